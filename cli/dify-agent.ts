#!/usr/bin/env tsx
/**
 * `dify-agent`: the command installed in an agent's sandbox (docs/PROTOCOL.md §4, docs/seeds/004).
 *
 *   dify-agent config prompt pull [--to PATH]   write the saved Agent Soul system prompt (UTF-8) to
 *                                               PATH (default ./.dify_conf/prompt.md); print its
 *                                               absolute path
 *   dify-agent config prompt push [PATH|-]      replace the prompt with PATH (default the same file;
 *                                               `-` reads stdin); print {"prompt": "saved text"}
 *   dify-agent config manifest [--to PATH]      print the saved configuration without the prompt (JSON:
 *                                               {source, manifest}), or write it to PATH and print its path
 *
 * It talks to the agent backend's stub with DIFY_AGENT_STUB_TOKEN (the run's stub token), over the unix socket
 * DIFY_AGENT_STUB_SOCKET (what the sandbox provides: the stub's own listener, bind-mounted in) or else at
 * DIFY_AGENT_STUB_URL (a base URL, for use outside the sandbox, e.g. through a proxy to the socket). The text
 * is exchanged byte for byte: raw mention markers, whitespace and line endings are preserved.
 * Exit codes: 0 success, 1 error, 2 usage error.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const DEFAULT_PROMPT_PATH = path.join('.dify_conf', 'prompt.md');

const USAGE = `usage:
  dify-agent config prompt pull [--to PATH]
  dify-agent config prompt push [PATH|-]
  dify-agent config manifest [--to PATH]

environment:
  DIFY_AGENT_STUB_SOCKET  unix socket of the agent stub (set inside the sandbox)
  DIFY_AGENT_STUB_URL     base URL of the agent stub (when there is no socket)
  DIFY_AGENT_STUB_TOKEN   the run's agent stub token`;

export interface CliIo {
  env: Record<string, string | undefined>;
  cwd: string;
  stdin: AsyncIterable<Uint8Array | string>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  fetch?: typeof fetch;
}

class CliError extends Error {
  constructor(
    message: string,
    readonly code = 1,
  ) {
    super(message);
  }
}

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  try {
    await dispatch(argv, io);
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr(err.code === 2 ? `${err.message}\n${USAGE}\n` : `error: ${err.message}\n`);
      return err.code;
    }
    io.stderr(`error: ${(err as Error)?.message ?? String(err)}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: CliIo): Promise<void> {
  const [group, noun, verb, ...rest] = argv;
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h') throw new CliError('dify-agent: missing command', 2);
  if (group === 'config' && noun === 'manifest') return manifestCommand(io, argv.slice(2));
  if (group !== 'config' || noun !== 'prompt' || (verb !== 'pull' && verb !== 'push')) {
    throw new CliError(`dify-agent: unknown command '${argv.slice(0, 3).join(' ')}'`, 2);
  }
  if (verb === 'pull') {
    let to = DEFAULT_PROMPT_PATH;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--to' && rest[i + 1] !== undefined) to = rest[++i];
      else if (rest[i].startsWith('--to=')) to = rest[i].slice(5);
      else throw new CliError(`dify-agent config prompt pull: unexpected argument '${rest[i]}'`, 2);
    }
    await pull(io, to);
  } else {
    if (rest.length > 1) throw new CliError('dify-agent config prompt push: at most one PATH', 2);
    await push(io, rest[0] ?? DEFAULT_PROMPT_PATH);
  }
}

async function pull(io: CliIo, to: string): Promise<void> {
  const prompt = await callStub(io, 'GET');
  const abs = path.resolve(io.cwd, to);
  fs.mkdirSync(path.dirname(abs), { recursive: true });
  fs.writeFileSync(abs, prompt, 'utf8');
  io.stdout(`${abs}\n`);
}

async function push(io: CliIo, from: string): Promise<void> {
  let bytes: Buffer;
  let label: string;
  if (from === '-') {
    label = 'stdin';
    const chunks: Buffer[] = [];
    for await (const c of io.stdin) chunks.push(typeof c === 'string' ? Buffer.from(c, 'utf8') : Buffer.from(c));
    bytes = Buffer.concat(chunks);
  } else {
    const abs = path.resolve(io.cwd, from);
    label = abs;
    try {
      bytes = fs.readFileSync(abs);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw new CliError(`file not found: ${abs}`);
      if (code === 'EISDIR') throw new CliError(`not a file: ${abs}`);
      throw new CliError(`cannot read ${abs}: ${(err as Error).message}`);
    }
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new CliError(`${label} is not valid UTF-8`);
  }
  const saved = await callStub(io, 'PUT', text);
  io.stdout(`{"prompt": ${JSON.stringify(saved)}}\n`);
}

const STUB_PATH = '/agent-stub/config/prompt';
const MANIFEST_PATH = '/agent-stub/config/manifest';

/**
 * `dify-agent config manifest [--to PATH]` (issue 31, docs/seeds/004 "the config manifest"): the saved config of the
 * run's own scope without the prompt, as the stub answers it (`{source, manifest}`), pretty-printed.
 */
async function manifestCommand(io: CliIo, rest: string[]): Promise<void> {
  let to: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--to' && rest[i + 1] !== undefined) to = rest[++i];
    else if (rest[i].startsWith('--to=')) to = rest[i].slice(5);
    else throw new CliError(`dify-agent config manifest: unexpected argument '${rest[i]}'`, 2);
  }
  const answer = await stubJson(io, 'GET', MANIFEST_PATH);
  if (!('manifest' in answer) || !answer.manifest || typeof answer.manifest !== 'object')
    throw new CliError('the agent stub answer has no manifest object');
  const text = `${JSON.stringify(answer, null, 2)}\n`;
  if (to === undefined) return io.stdout(text);
  const abs = path.resolve(io.cwd, to);
  fs.mkdirSync(path.dirname(abs), { recursive: true });
  fs.writeFileSync(abs, text, 'utf8');
  io.stdout(`${abs}\n`);
}

/** One request over a unix socket (node:http; fetch has no socket option). */
function viaSocket(
  socketPath: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
  stubPath = STUB_PATH,
): Promise<{ status: number; statusText: string; raw: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: stubPath, method, headers: { host: 'agent-stub', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', raw: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Calls the agent stub and returns the `prompt` string of its answer. */
async function callStub(io: CliIo, method: 'GET' | 'PUT', prompt?: string): Promise<string> {
  const answer = await stubJson(io, method, STUB_PATH, method === 'PUT' ? JSON.stringify({ prompt }) : undefined);
  if (!('prompt' in answer)) throw new CliError('the agent stub answer has no prompt field');
  const value = (answer as { prompt: unknown }).prompt;
  if (value === null) throw new CliError('the agent stub answered a null prompt');
  if (typeof value !== 'string') throw new CliError('the agent stub answered a prompt that is not a string');
  return value;
}

/** One stub request; its JSON object answer (an HTTP or stub error, or anything but an object, is a CliError). */
async function stubJson(io: CliIo, method: 'GET' | 'PUT', stubPath: string, body?: string): Promise<Record<string, unknown>> {
  const socket = io.env.DIFY_AGENT_STUB_SOCKET;
  const base = io.env.DIFY_AGENT_STUB_URL;
  const token = io.env.DIFY_AGENT_STUB_TOKEN;
  if (!socket && !base) throw new CliError('neither DIFY_AGENT_STUB_SOCKET nor DIFY_AGENT_STUB_URL is set');
  if (!token) throw new CliError('DIFY_AGENT_STUB_TOKEN is not set');
  const headers = { authorization: `Bearer ${token}`, ...(method === 'PUT' ? { 'content-type': 'application/json' } : {}) };
  let res: { status: number; statusText: string; raw: string };
  try {
    if (socket) res = await viaSocket(socket, method, headers, body, stubPath);
    else {
      const r = await (io.fetch ?? fetch)(`${base!.replace(/\/+$/, '')}${stubPath}`, { method, headers, body });
      res = { status: r.status, statusText: r.statusText, raw: await r.text() };
    }
  } catch (err) {
    throw new CliError(`cannot reach the agent stub at ${socket ?? base}: ${(err as Error).message}`);
  }
  const { raw } = res;
  let parsed: unknown;
  try {
    parsed = raw ? JSON.parse(raw) : undefined;
  } catch {
    parsed = undefined;
  }
  if (res.status < 200 || res.status > 299) {
    const { message, code } = (parsed as { message?: unknown; code?: unknown } | undefined) ?? {};
    // The api's error code too (e.g. invalid_agent_config, as the studio's save answers it): what a script can test.
    const named = typeof code === 'string' && /^[a-z0-9_]{1,64}$/.test(code) ? ` ${code}` : '';
    throw new CliError(
      `the agent stub answered ${res.status}${named}: ${typeof message === 'string' ? message : raw.slice(0, 200) || res.statusText}`,
    );
  }
  const answer = parsed;
  if (!answer || typeof answer !== 'object' || Array.isArray(answer))
    throw new CliError('the agent stub answered something that is not a JSON object');
  return answer as Record<string, unknown>;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href;
if (invokedDirectly) {
  runCli(process.argv.slice(2), {
    env: process.env,
    cwd: process.cwd(),
    stdin: process.stdin,
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
  }).then((code) => {
    process.exitCode = code;
  });
}
