/**
 * The agent stub and the `dify-agent` CLI (docs/PROTOCOL.md §4): pull/push through the stub to the api's
 * inner agent-config endpoint with the run's signed execution context, and every error the CLI owes. The stub
 * listens on its own unix socket only (issue 27): no run protocol behind it, and not on the backend's TCP port.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { runCli } from '../../cli/dify-agent.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import { socketRequest, stubCall } from '../support/stub-socket.js';
import { EXECUTION_CONTEXT, INNER_KEY, runRequest, startBackend, startFake, startPg, TOKEN, type TestBackend } from './harness.js';

let pg: { stop: () => Promise<void> };
let fake: FakeInnerLlm;
let backend: TestBackend;
let tmp: string;

beforeAll(async () => {
  const db = await startPg('stub', 55434);
  pg = db.pg;
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url });
}, 120_000);

afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
  await pg?.stop();
});

beforeEach(() => {
  fake.reset();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dify-agent-cli-'));
});

/** A run that stays running (the model hangs) so its stub token is honoured. */
async function runningRun(opts: { config?: boolean } = { config: true }) {
  fake.script({ text: ['thinking'], hang: true });
  const { run_id } = await backend.client.createRun(runRequest({ config: opts.config }));
  return { runId: run_id, token: mintStubToken(TOKEN, run_id) };
}

async function cli(argv: string[], env: Record<string, string | undefined>, stdin: string[] = []) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    env,
    cwd: tmp,
    stdin: (async function* () {
      for (const s of stdin) yield s;
    })(),
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
  });
  return { code, stdout, stderr };
}

describe('agent stub', () => {
  it('has a socket of its own, 0666 in a 0700 directory, serving the stub routes only', async () => {
    const { runId, token } = await runningRun();
    expect(fs.statSync(backend.stubSocket).isSocket()).toBe(true);
    expect(fs.statSync(backend.stubSocket).mode & 0o777).toBe(0o666);
    expect(fs.statSync(path.dirname(backend.stubSocket)).mode & 0o777).toBe(0o700);
    // No run protocol through the socket, with or without the backend token.
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }] as Record<string, string>[]) {
      const runs = await socketRequest(backend.stubSocket, '/runs', {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(runRequest()),
      });
      expect(runs.status).toBe(404);
      expect((await socketRequest(backend.stubSocket, `/runs/${runId}`, { headers })).status).toBe(404);
      expect((await socketRequest(backend.stubSocket, `/runs/${runId}/cancel`, { method: 'POST', headers })).status).toBe(404);
      expect((await socketRequest(backend.stubSocket, '/modules', { headers })).status).toBe(404);
      expect((await socketRequest(backend.stubSocket, '/healthz', { headers })).status).toBe(404);
    }
    expect((await backend.client.status(runId)).status).toBe('running');
    // And no stub on the backend's TCP listener.
    const tcp = await fetch(`${backend.url}/agent-stub/config/prompt`, { headers: { authorization: `Bearer ${token}` } });
    expect(tcp.status).toBe(404);
    expect(await tcp.json()).toMatchObject({ code: 'not_found' });
    await backend.client.cancel(runId);
  });

  it('forwards reads and writes with the inner key and the signed execution context', async () => {
    const { runId, token } = await runningRun();
    fake.prompts.set('agent-1', 'Be kind.');
    const get = await stubCall(backend.stubSocket, token);
    expect(get.status).toBe(200);
    expect(get.json()).toEqual({ prompt: 'Be kind.' });
    const put = await stubCall(backend.stubSocket, token, 'PUT', { prompt: 'Be brief.' });
    expect(put.json()).toEqual({ prompt: 'Be brief.' });
    expect(fake.prompts.get('agent-1')).toBe('Be brief.');

    const forwarded = fake.configRequests[0];
    expect(forwarded.agentId).toBe('agent-1');
    expect(forwarded.headers['x-inner-api-key']).toBe(INNER_KEY);
    const ctx = JSON.parse(Buffer.from(String(forwarded.headers['x-agent-execution-context']), 'base64').toString('utf8'));
    expect(ctx).toEqual(EXECUTION_CONTEXT);
    await backend.client.cancel(runId);
  });

  it('refuses forged tokens, runs without a config layer, ended runs and null prompts', async () => {
    const sock = backend.stubSocket;
    const forged = await stubCall(sock, mintStubToken('other-secret', 'x'));
    expect(forged.status).toBe(401);
    expect((await stubCall(sock, null)).status).toBe(401);

    const noConfig = await runningRun({ config: false });
    const res = await stubCall(sock, noConfig.token);
    expect(res.status).toBe(403);
    await backend.client.cancel(noConfig.runId);

    const { runId, token } = await runningRun();
    const nullPrompt = await stubCall(sock, token, 'PUT', { prompt: null });
    expect(nullPrompt.status).toBe(400);
    await backend.client.cancel(runId);
    await backend.client.untilTerminal(runId);
    const ended = await stubCall(sock, token);
    expect(ended.status).toBe(401);
    expect(fake.configRequests).toHaveLength(0);
  });
});

describe('dify-agent CLI', () => {
  it('pulls to ./.dify_conf/prompt.md byte for byte and pushes it back', async () => {
    const { runId, token } = await runningRun();
    const env = { DIFY_AGENT_STUB_SOCKET: backend.stubSocket, DIFY_AGENT_STUB_TOKEN: token };
    const prompt = 'Hello {{#sys.query#}}\r\n  indented ünïcödé \n\n';
    fake.prompts.set('agent-1', prompt);

    const pulled = await cli(['config', 'prompt', 'pull'], env);
    expect(pulled).toMatchObject({ code: 0, stderr: '' });
    const file = path.join(tmp, '.dify_conf', 'prompt.md');
    expect(pulled.stdout).toBe(`${file}\n`);
    expect(fs.readFileSync(file, 'utf8')).toBe(prompt);

    fs.writeFileSync(file, 'Edited\n');
    const pushed = await cli(['config', 'prompt', 'push'], env);
    expect(pushed).toEqual({ code: 0, stdout: '{"prompt": "Edited\\n"}\n', stderr: '' });
    expect(fake.prompts.get('agent-1')).toBe('Edited\n');

    const other = await cli(['config', 'prompt', 'pull', '--to', 'sub/p.txt'], env);
    expect(other.stdout).toBe(`${path.join(tmp, 'sub', 'p.txt')}\n`);

    const fromStdin = await cli(['config', 'prompt', 'push', '-'], env, ['from ', 'stdin']);
    expect(fromStdin.stdout).toBe('{"prompt": "from stdin"}\n');
    const cleared = await cli(['config', 'prompt', 'push', '-'], env, []);
    expect(cleared.stdout).toBe('{"prompt": ""}\n');
    expect(fake.prompts.get('agent-1')).toBe('');
    await backend.client.cancel(runId);
  });

  it('reports missing files, invalid UTF-8, missing or null prompt fields and usage errors', async () => {
    const env = { DIFY_AGENT_STUB_SOCKET: backend.stubSocket, DIFY_AGENT_STUB_TOKEN: 'x' };
    const missing = await cli(['config', 'prompt', 'push', 'nope.md'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`error: file not found: ${path.join(tmp, 'nope.md')}\n`);

    fs.writeFileSync(path.join(tmp, 'bad.md'), Buffer.from([0x48, 0xff, 0xfe, 0x21]));
    const bad = await cli(['config', 'prompt', 'push', 'bad.md'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('is not valid UTF-8');

    const answering =
      (body: unknown): typeof fetch =>
      async () =>
        new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
    for (const [body, message] of [
      [{}, 'no prompt field'],
      [{ prompt: null }, 'null prompt'],
    ] as const) {
      let stderr = '';
      // Outside the sandbox the CLI also takes a URL (DIFY_AGENT_STUB_URL): here a fetch that answers `body`.
      const code = await runCli(['config', 'prompt', 'pull'], {
        env: { DIFY_AGENT_STUB_URL: 'http://stub.invalid', DIFY_AGENT_STUB_TOKEN: 'x' },
        cwd: tmp,
        stdin: (async function* () {})(),
        stdout: () => undefined,
        stderr: (t) => (stderr += t),
        fetch: answering(body),
      });
      expect(code).toBe(1);
      expect(stderr).toContain(message);
    }

    const unauthorized = await cli(['config', 'prompt', 'pull'], env);
    expect(unauthorized.code).toBe(1);
    expect(unauthorized.stderr).toContain('the agent stub answered 401');
    expect((await cli(['config', 'prompt', 'pull'], {})).stderr).toBe(
      'error: neither DIFY_AGENT_STUB_SOCKET nor DIFY_AGENT_STUB_URL is set\n',
    );
    const gone = await cli(['config', 'prompt', 'pull'], {
      DIFY_AGENT_STUB_SOCKET: path.join(tmp, 'nope.sock'),
      DIFY_AGENT_STUB_TOKEN: 'x',
    });
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`cannot reach the agent stub at ${path.join(tmp, 'nope.sock')}`);
    expect((await cli(['config', 'prompt', 'fetch'], env)).code).toBe(2);
    expect((await cli([], env)).code).toBe(2);
  });

  it('runs as a program', async () => {
    const { runId, token } = await runningRun();
    fake.prompts.set('agent-1', 'From the program');
    const root = path.resolve(import.meta.dirname, '../..');
    const child = spawn(
      path.join(root, 'node_modules', '.bin', 'tsx'),
      [path.join(root, 'cli', 'dify-agent.ts'), 'config', 'prompt', 'pull'],
      {
        cwd: tmp,
        env: { ...process.env, DIFY_AGENT_STUB_SOCKET: backend.stubSocket, DIFY_AGENT_STUB_TOKEN: token },
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    expect({ code, err }).toEqual({ code: 0, err: '' });
    expect(out).toBe(`${path.join(tmp, '.dify_conf', 'prompt.md')}\n`);
    expect(fs.readFileSync(path.join(tmp, '.dify_conf', 'prompt.md'), 'utf8')).toBe('From the program');
    await backend.client.cancel(runId);
  });
});
