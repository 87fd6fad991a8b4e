/**
 * The runtime and shell modules on the real agent backend (real HTTP, PostgreSQL, shellctl and Landlock;
 * the scripted inner LLM is the only stand-in): configuration errors at run validation, the refusal when
 * Landlock is unavailable, the explicit isolation-off setting, and the release of the run's processes and
 * temporary credential (the stub token) on every ending (success, failure, cancellation).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { RunEvent } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from '../agent-backend/fake-inner-llm.js';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { runRequest, startBackend, startFake, startPg, TOKEN, type TestBackend } from '../agent-backend/harness.js';
import { workspaceProcesses } from '../support/processes.js';
import { stubCall } from '../support/stub-socket.js';
import { CONTAINER_SANDBOX_ADVICE, inContainer } from '../../agent-backend/workspace/sandbox.js';

let fake: FakeInnerLlm;
const backends: Record<string, TestBackend> = {};
const REPO = path.resolve(import.meta.dirname, '../..');

async function backend(name: string, env: Record<string, unknown>): Promise<TestBackend> {
  const { url } = await startPg(`ws_${name}`);
  const dataDir = path.join(inject('testDataDir'), `workspace-runtime-${name}-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  backends[name] = await startBackend({ databaseUrl: url, apiUrl: fake.url, env: { DATA_DIR: dataDir, ...env } });
  return backends[name];
}

beforeAll(async () => {
  fake = await startFake();
  await backend('on', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token' });
  await backend('notoken', {});
  await backend('nolandlock', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token', SHELLCTL_FORCE_NO_LANDLOCK: '1' });
  await backend('off', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token', SHELLCTL_FORCE_NO_LANDLOCK: '1', SHELL_ISOLATION: 'off' });
  await backend('small', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token', SHELL_LIMIT_MEMORY_BYTES: 128 * 1024 * 1024 });
  await backend('nons', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token', SHELLCTL_FORCE_NO_NAMESPACES: true });
  // A Debian 12 / Ubuntu 22.04 kernel: Landlock ABI 2 (no network rules).
  await backend('oldkernel', { SHELLCTL_AUTH_TOKEN: 'runtime-test-token', SHELLCTL_FORCE_ABI: 2 });
  await backend('weak', {
    SHELLCTL_AUTH_TOKEN: 'runtime-test-token',
    AGENT_BACKEND_TOKEN: 'dev-backend-token-change-me',
    INNER_API_KEY: 'dev-inner-api-key-change-me',
  });
}, 300_000);

afterAll(async () => {
  for (const b of Object.values(backends)) await b.stop();
  await fake?.stop();
});

beforeEach(() => fake.reset());

function workspaceLayers(workspaceId: string, shell: Record<string, unknown> = {}) {
  return [
    { name: 'runtime', type: 'runtime', config: { workspace_id: workspaceId } },
    { name: 'shell', type: 'shell', deps: ['runtime'], config: shell },
  ];
}

/** A run whose model calls `shell` once with `command`, then answers. */
async function shellRun(b: TestBackend, command: string, opts: { metadata?: Record<string, unknown>; config?: boolean } = {}) {
  const workspaceId = crypto.randomUUID();
  fake.script({ toolCalls: [{ id: 'call_1', name: 'shell', args: { command } }] }, { text: ['done'] });
  const created = await b.client.createRun(
    runRequest({ extraLayers: workspaceLayers(workspaceId), config: opts.config, ...(opts.metadata ? { metadata: opts.metadata } : {}) }),
  );
  return { runId: created.run_id, dir: path.join(b.config.workspacesDir, workspaceId) };
}

function toolResult(events: RunEvent[]) {
  const e = events.find((x) => x.type === 'pydantic_ai_event' && (x.data as { event_kind: string }).event_kind === 'function_tool_result');
  return e?.data as { result: unknown; is_error: boolean } | undefined;
}

/** The run's temporary credential (the CLI's stub token) against the agent stub: 200 while it runs, 401 after. */
async function stubStatus(b: TestBackend, runId: string): Promise<number> {
  return (await stubCall(b.stubSocket, mintStubToken(TOKEN, runId))).status;
}

async function pidFrom(file: string): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '';
    if (text) return Number(text);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no pid in ${file}`);
}

describe('runtime and shell on the agent backend', () => {
  it('without a deployment token, a composition with runtime or shell is rejected at validation, before any I/O', async () => {
    const res = await backends.notoken!.client.request('POST', '/runs', runRequest({ extraLayers: workspaceLayers(crypto.randomUUID()) }));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('module_unavailable');
    expect(body.message).toContain('SHELLCTL_AUTH_TOKEN');
    expect(fake.calls).toHaveLength(0);
  });

  it('a shell that names no runtime layer is rejected', async () => {
    const res = await backends.on!.client.request(
      'POST',
      '/runs',
      runRequest({ extraLayers: [{ name: 'shell', type: 'shell', config: {} }] }),
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain(
      "runtime refers to 'runtime', which is not a layer of this composition",
    );
  });

  it('runs the command in the workspace and answers exit code, stdout and stderr', async () => {
    const b = backends.on!;
    const { runId, dir } = await shellRun(b, 'echo out; echo err >&2; pwd; exit 3');
    const events = await b.client.untilTerminal(runId);
    expect(events.at(-1)!.type).toBe('run_succeeded');
    expect(toolResult(events)).toEqual({
      duration_ms: expect.any(Number),
      result: { exit_code: 3, stdout: `out\n${dir}\n`, stderr: 'err\n' },
      is_error: false,
      index: expect.any(Number),
      tool_call_id: 'call_1',
      tool_name: 'shell',
      event_kind: 'function_tool_result',
    });
  });

  it('cuts output at the cap without splitting a UTF-8 character', async () => {
    const b = backends.on!;
    fake.script({ toolCalls: [{ id: 'call_1', name: 'shell', args: { command: "printf 'aa\\303\\251\\303\\251'" } }] }, { text: ['done'] });
    const { run_id } = await b.client.createRun(runRequest({ extraLayers: workspaceLayers(crypto.randomUUID(), { max_output_bytes: 5 }) }));
    const r = toolResult(await b.client.untilTerminal(run_id))!;
    expect((r.result as { stdout: string }).stdout).toBe('aaé\n[output truncated: 1 more bytes not shown]');
  });

  it("the model may not raise the layer's time limit", async () => {
    const b = backends.on!;
    fake.script({ toolCalls: [{ id: 'call_1', name: 'shell', args: { command: 'sleep 30', timeout_ms: 60_000 } }] }, { text: ['done'] });
    const { run_id } = await b.client.createRun(runRequest({ extraLayers: workspaceLayers(crypto.randomUUID(), { timeout_ms: 500 }) }));
    const r = toolResult(await b.client.untilTerminal(run_id))!;
    expect(r).toMatchObject({
      is_error: true,
      result: { error: 'timeout', message: 'the command exceeded its time limit of 500 ms and was killed' },
    });
  });

  it('refuses with a clear error when Landlock is unavailable, and nothing of the command runs', async () => {
    const b = backends.nolandlock!;
    const { runId, dir } = await shellRun(b, 'touch ran');
    const events = await b.client.untilTerminal(runId);
    const r = toolResult(events)!;
    expect(r.is_error).toBe(true);
    expect(r.result).toEqual({
      error: 'shell_unavailable',
      // In a container (CI machines are one) the refusal adds what the container needs (agent-backend/workspace/sandbox.ts).
      message:
        'the shell refused to run the command: this host lacks Landlock (the kernel offers none), needed to isolate commands from other tenants (SHELL_ISOLATION=on; docs/workspace.md)' +
        (inContainer() ? `; ${CONTAINER_SANDBOX_ADVICE}` : ''),
    });
    expect(fs.existsSync(path.join(dir, 'ran'))).toBe(false);
  });

  it('refuses naming the namespaces when they are unavailable; /readyz reports what is missing', async () => {
    const b = backends.nons!;
    const { runId, dir } = await shellRun(b, 'touch ran');
    const r = toolResult(await b.client.untilTerminal(runId))!;
    expect(r.is_error).toBe(true);
    expect((r.result as { message: string }).message).toContain('this host lacks Linux namespaces (mount, PID, network, IPC, UTS)');
    expect(fs.existsSync(path.join(dir, 'ran'))).toBe(false);
    const ready = (await (await fetch(`${b.url}/readyz`)).json()) as { isolation: Record<string, unknown> };
    expect(ready.isolation).toMatchObject({ shell: 'refused', isolation: 'on', namespaces: false });
    expect(ready.isolation.missing).toEqual(['Linux namespaces (mount, PID, network, IPC, UTS)']);
  });

  it('an older kernel (Landlock ABI 2, no network rules) still runs commands: files by Landlock, network by the namespace', async () => {
    const b = backends.oldkernel!;
    const listener = net.createServer((s) => s.end('ESCAPED\n'));
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const port = (listener.address() as net.AddressInfo).port;
    try {
      const probe =
        `echo inside > note.txt; cat note.txt; touch ${REPO}/escaped-by-old-kernel 2>&1; ` +
        `/usr/bin/python3 -c "import socket; s = socket.create_connection(('127.0.0.1', ${port}), 2); print(s.recv(16))" 2>&1 | tail -1`;
      const { runId, dir } = await shellRun(b, probe);
      const r = toolResult(await b.client.untilTerminal(runId))!;
      expect(r.is_error).toBe(false);
      const out = (r.result as { stdout: string }).stdout;
      expect(out).toContain('inside');
      expect(fs.readFileSync(path.join(dir, 'note.txt'), 'utf8')).toBe('inside\n');
      expect(fs.existsSync(path.join(REPO, 'escaped-by-old-kernel'))).toBe(false);
      expect(out).not.toContain('ESCAPED');
      expect(out).toMatch(/Network is unreachable|Connection refused/);
    } finally {
      listener.close();
    }
    const ready = (await (await fetch(`${b.url}/readyz`)).json()) as { isolation: Record<string, unknown> };
    expect(ready.isolation).toMatchObject({ shell: 'available', landlock_abi: 2, namespaces: true, missing: [] });
  });

  it('node runs under the default limits; a command over its memory limit is told so in words it can act on', async () => {
    const ok = await shellRun(backends.on!, 'node -e "console.log(6 * 7)"');
    expect(toolResult(await backends.on!.client.untilTerminal(ok.runId))).toMatchObject({
      is_error: false,
      result: { exit_code: 0, stdout: '42\n' },
    });
    const b = backends.small!;
    const { runId } = await shellRun(b, 'node -e "const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))"');
    const r = toolResult(await b.client.untilTerminal(runId))!;
    expect(r.is_error).toBe(true);
    expect(r.result).toMatchObject({ error: 'limit_exceeded', limit: 'memory' });
    expect((r.result as { message: string }).message).toContain('ran out of memory');
  });

  it('/readyz reports the isolation in force', async () => {
    const on = (await (await fetch(`${backends.on!.url}/readyz`)).json()) as { isolation: Record<string, unknown> };
    expect(on.isolation).toMatchObject({ shell: 'available', isolation: 'on', namespaces: true, missing: [], reason: null });
    expect(on.isolation.landlock_abi).toBeGreaterThanOrEqual(4);
    expect(['cgroup-v2', 'cgroup-v1', 'rlimits']).toContain(on.isolation.limits);
    expect(typeof on.isolation.seccomp).toBe('boolean');
    expect(typeof on.isolation.uid_switch).toBe('boolean');
    const off = (await (await fetch(`${backends.off!.url}/readyz`)).json()) as { isolation: Record<string, unknown> };
    expect(off.isolation).toMatchObject({ shell: 'unconfined', isolation: 'off' });
    const none = (await (await fetch(`${backends.notoken!.url}/readyz`)).json()) as { isolation: Record<string, unknown> };
    expect(none.isolation).toMatchObject({ shell: 'unavailable' });
    expect(none.isolation.reason).toContain('SHELLCTL_AUTH_TOKEN');
  });

  it('the runtime enters only after the api authorized its workspace for the run: one check per run', async () => {
    const b = backends.on!;
    const { runId } = await shellRun(b, 'true');
    await b.client.untilTerminal(runId);
    expect(fake.workspaceChecks).toHaveLength(1);
    const check = fake.workspaceChecks[0]!;
    expect(check.headers['x-inner-api-key']).toBe('test-inner-key');
    expect(check.body).toMatchObject({ run_id: runId, execution_context: { tenant_id: 'tenant-1', signature: 'sig-abc' } });
    expect(check.body.workspace_id).toEqual(expect.any(String));
    // A run without a runtime layer asks nothing.
    const plain = await b.client.createRun(runRequest());
    await b.client.untilTerminal(plain.run_id);
    expect(fake.workspaceChecks).toHaveLength(1);
  });

  it('a workspace the api refuses: run_failed workspace_not_authorized with its reason, the workspace untouched', async () => {
    const b = backends.on!;
    fake.workspaceVerdict = {
      status: 403,
      body: { code: 'workspace_not_authorized', message: 'the workspace is not the one of the run’s binding.', status: 403 },
    };
    const { runId, dir } = await shellRun(b, 'touch ran');
    const events = await b.client.untilTerminal(runId);
    const terminal = events.at(-1)!;
    expect(terminal.type).toBe('run_failed');
    expect(terminal.data).toMatchObject({ error_type: 'workspace_not_authorized' });
    expect((terminal.data as { error: string }).error).toContain(
      'is not authorized for this run: the workspace is not the one of the run’s binding.',
    );
    expect(fs.existsSync(dir)).toBe(false);
    expect(fake.calls).toHaveLength(0);
  });

  it('the backend refuses runtime and shell while its secrets are the public defaults', async () => {
    const b = backends.weak!;
    const res = await b.client.request('POST', '/runs', runRequest({ extraLayers: workspaceLayers(crypto.randomUUID()) }));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('module_unavailable');
    expect(body.message).toContain('AGENT_BACKEND_TOKEN and INNER_API_KEY hold their public development default');
  });

  it('runs unconfined only when the deployment turned isolation off explicitly', async () => {
    const b = backends.off!;
    const { runId } = await shellRun(b, `head -c 20 ${REPO}/package.json`);
    const r = toolResult(await b.client.untilTerminal(runId))!;
    expect(r.is_error).toBe(false);
    expect((r.result as { stdout: string }).stdout).toContain('"name"');
  });

  it('success: the workspace stays, nothing the command started outlives it', async () => {
    const b = backends.on!;
    const { runId, dir } = await shellRun(b, 'sleep 60 >/dev/null 2>&1 & echo $! > pid; echo kept > kept.txt', { config: true });
    const events = await b.client.untilTerminal(runId);
    expect(events.at(-1)!.type).toBe('run_succeeded');
    expect(await stubStatus(b, runId)).toBe(401);
    await pidFrom(path.join(dir, 'pid'));
    expect(workspaceProcesses(dir)).toEqual([]);
    expect(fs.readFileSync(path.join(dir, 'kept.txt'), 'utf8')).toBe('kept\n');
  });

  it('failure (wall-clock limit) during a command: the run fails and the command is killed', async () => {
    const b = backends.on!;
    const { runId, dir } = await shellRun(b, 'sleep 60 & echo $! > pid; wait', {
      metadata: { limits: { max_wall_clock_ms: 1500 } },
      config: true,
    });
    await pidFrom(path.join(dir, 'pid'));
    expect(workspaceProcesses(dir).length).toBeGreaterThan(0);
    expect(await stubStatus(b, runId)).toBe(200);
    const events = await b.client.untilTerminal(runId);
    const terminal = events.at(-1)!;
    expect(terminal.type).toBe('run_failed');
    expect(terminal.data).toMatchObject({ reason: 'run_timeout' });
    expect((terminal.data as { session_snapshot: unknown }).session_snapshot).not.toBeNull();
    expect(workspaceProcesses(dir)).toEqual([]);
    expect(await stubStatus(b, runId)).toBe(401);
  });

  it('cancellation during a command: the run is cancelled and the command is killed', async () => {
    const b = backends.on!;
    const { runId, dir } = await shellRun(b, 'sleep 60 & echo $! > pid; wait', { config: true });
    await pidFrom(path.join(dir, 'pid'));
    expect(workspaceProcesses(dir).length).toBeGreaterThan(0);
    expect(await stubStatus(b, runId)).toBe(200);
    expect((await b.client.cancel(runId)).status).toBe(202);
    const events = await b.client.untilTerminal(runId);
    expect(events.at(-1)!.type).toBe('run_cancelled');
    expect((events.at(-1)!.data as { session_snapshot: unknown }).session_snapshot).not.toBeNull();
    expect(workspaceProcesses(dir)).toEqual([]);
    expect(await stubStatus(b, runId)).toBe(401);
  });
});
