/**
 * The builtin `code` tool (issue 41) on the real agent backend with real shellctl: a Python 3 program runs in the
 * agent's own sandbox through the run's shell — its workspace, its isolation (no network, no write outside), its
 * time and output limits — and without the runtime and shell it is refused in words. The scripted inner LLM is the
 * only stand-in. The wrapper's "python3 missing" answer runs through a real /bin/sh with no python3 on its PATH.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { RunEvent } from '../../core/protocol/run.js';
import { CODE_NEEDS_SHELL, codeObservation, pythonCommand } from '../../agent-backend/modules/builtins/code.js';
import type { FakeInnerLlm } from '../agent-backend/fake-inner-llm.js';
import { runRequest, startBackend, startFake, startPg, type TestBackend } from '../agent-backend/harness.js';

const REPO = path.resolve(import.meta.dirname, '../..');
let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  fake = await startFake();
  const { url } = await startPg('code_tool');
  const dataDir = path.join(inject('testDataDir'), `code-tool-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  backend = await startBackend({ databaseUrl: url, apiUrl: fake.url, env: { DATA_DIR: dataDir, SHELLCTL_AUTH_TOKEN: 'code-test-token' } });
}, 300_000);
afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
});
beforeEach(() => fake.reset());

/** core_tools with `code`, and (unless `shell: false`) the runtime and a shell with `shell` config. */
function codeRun(calls: Array<{ name: string; args: unknown }>, opts: { shell?: Record<string, unknown> | false } = {}) {
  const workspaceId = crypto.randomUUID();
  fake.script(...calls.map((c, i) => ({ toolCalls: [{ id: `call_${i + 1}`, name: c.name, args: c.args }] })), { text: ['done'] });
  const extraLayers =
    opts.shell === false
      ? []
      : [
          { name: 'runtime', type: 'runtime', config: { workspace_id: workspaceId } },
          { name: 'shell', type: 'shell', deps: ['runtime'], config: opts.shell ?? {} },
        ];
  return { request: runRequest({ coreTools: ['code'], extraLayers }), dir: path.join(backend.config.workspacesDir, workspaceId) };
}

async function results(request: ReturnType<typeof runRequest>) {
  const { run_id } = await backend.client.createRun(request);
  const events: RunEvent[] = await backend.client.untilTerminal(run_id);
  expect(events.at(-1)!.type).toBe('run_succeeded');
  return events.flatMap((e) =>
    e.type === 'pydantic_ai_event' && e.data.event_kind === 'function_tool_result'
      ? [e.data as unknown as { tool_name: string; result: unknown; is_error: boolean }]
      : [],
  );
}

describe('the code tool', () => {
  it('runs Python in the shell’s workspace: it reads what the shell wrote, quotes and newlines reach python3 as written', async () => {
    const program = [
      'import os',
      "n = int(open('n.txt').read())",
      "print(n + 1, os.getcwd() == os.environ['HOME'])",
      `print('it\\'s "$HOME" \\\\ and \`ls\`')`,
      "open('outputs/sum.txt', 'w').write(str(n + 1))",
    ].join('\n');
    const { request, dir } = codeRun([
      { name: 'shell', args: { command: 'echo 41 > n.txt' } },
      { name: 'code', args: { code: program } },
    ]);
    const [, code] = await results(request);
    expect(code).toMatchObject({
      tool_name: 'code',
      is_error: false,
      result: { exit_code: 0, stdout: '42 True\nit\'s "$HOME" \\ and `ls`\n', stderr: '' },
    });
    // The shell's outputs/ rule: a file the program wrote there is attached.
    expect((code!.result as { attached_files?: string[] }).attached_files).toEqual(['outputs/sum.txt']);
    expect(fs.readFileSync(path.join(dir, 'outputs', 'sum.txt'), 'utf8')).toBe('42');
  });

  it('is held by the shell’s sandbox: no network, nothing written outside the workspace', async () => {
    let reached = false;
    const listener = net.createServer((s) => {
      reached = true;
      s.end('ESCAPED\n');
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const port = (listener.address() as net.AddressInfo).port;
    const outside = path.join(REPO, `escaped-by-code-${process.pid}`);
    try {
      const program = [
        'import socket',
        'try:',
        `    print(socket.create_connection(('127.0.0.1', ${port}), 2).recv(16))`,
        'except OSError as e:',
        "    print('network:', e.__class__.__name__)",
        'try:',
        `    open(${JSON.stringify(outside)}, 'w').write('x')`,
        "    print('wrote outside')",
        'except OSError as e:',
        "    print('outside:', e.__class__.__name__)",
      ].join('\n');
      const [code] = await results(codeRun([{ name: 'code', args: { code: program } }]).request);
      const stdout = (code!.result as { stdout: string }).stdout;
      expect(stdout).toMatch(/^network: \w+\noutside: \w+\n$/);
      expect(reached).toBe(false);
      expect(fs.existsSync(outside)).toBe(false);
    } finally {
      listener.close();
    }
  });

  it('has the shell layer’s time and output limits (the model may ask for less time, never more)', async () => {
    const [slow, loud] = await results(
      codeRun(
        [
          { name: 'code', args: { code: 'while True: pass', timeout_ms: 60_000 } },
          { name: 'code', args: { code: "print('x' * 100)" } },
        ],
        { shell: { timeout_ms: 800, max_output_bytes: 10 } },
      ).request,
    );
    expect(slow).toMatchObject({
      is_error: true,
      result: { error: 'timeout', message: 'the command exceeded its time limit of 800 ms and was killed' },
    });
    expect((loud!.result as { stdout: string }).stdout).toBe('xxxxxxxxxx\n[output truncated: 91 more bytes not shown]');
  });

  it('without the runtime and shell, a call is refused in words and nothing runs', async () => {
    const [code] = await results(codeRun([{ name: 'code', args: { code: "open('ran', 'w')" } }], { shell: false }).request);
    expect(code).toMatchObject({ tool_name: 'code', is_error: true, result: CODE_NEEDS_SHELL });
  });

  it('bad arguments are an observation naming the field', async () => {
    const [code] = await results(codeRun([{ name: 'code', args: { code: '', language: 'ruby' } }]).request);
    expect(code!.is_error).toBe(true);
    expect(code!.result).toMatch(/^Invalid arguments: .*code.*language|^Invalid arguments: .*language.*code/);
  });

  it('says python3 is missing when the sandbox has none (the wrapper through a real /bin/sh without python3 on PATH)', async () => {
    const r = await promisify(execFile)('/bin/sh', ['-c', pythonCommand('print(1)')], { env: { PATH: '/nonexistent' } }).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    const exitCode = (r as { code?: number }).code ?? 0;
    expect(exitCode).toBe(127);
    const observation = codeObservation({
      status: 'exited',
      exitCode,
      stdout: r.stdout,
      stderr: r.stderr,
      stdoutTruncated: false,
      stderrTruncated: false,
      isolated: true,
    });
    expect(observation).toMatchObject({ isError: true, result: { error: 'python_unavailable' } });
    expect((observation as { result: { message: string } }).result.message).toContain('python3 is not installed in this sandbox');
  });
});
