/**
 * An agent backend that dies (SIGKILL) while a shell command runs leaves no process behind: shellctl
 * gets SIGTERM from PR_SET_PDEATHSIG and kills the command's whole tree (it is their subreaper); the
 * command itself has PDEATHSIG=SIGKILL should shellctl die first. Another replica then ends the run with
 * `backend_restarted` (the api turns that into the turn's error).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { FakeInnerLlm } from '../agent-backend/fake-inner-llm.js';
import { INNER_KEY, RunClient, runRequest, startBackend, startFake, startPg, TOKEN, type TestBackend } from '../agent-backend/harness.js';
import { freePort } from '../../stack/ports.js';
import { isAlive, workspaceProcesses } from '../support/processes.js';

const REPO = path.resolve(import.meta.dirname, '../..');
let fake: FakeInnerLlm;
let dbUrl: string;
let dataDir: string;
let child: ChildProcess | null = null;
let replica: TestBackend | null = null;

async function until<T>(what: string, fn: () => T | Promise<T>, ms = 20_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  fake = await startFake();
  dbUrl = (await startPg('ws_crash')).url;
  dataDir = path.join(inject('testDataDir'), `workspace-crash-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
}, 120_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await replica?.stop();
  await fake?.stop();
});

describe('an agent backend crash during a shell command', () => {
  it('leaves no process behind, and another replica ends the run with backend_restarted', async () => {
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO, 'agent-backend/main.ts')], {
      cwd: REPO,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME, // the Go module cache, should shellctl need a build
        DATABASE_URL: dbUrl,
        DATA_DIR: dataDir,
        AGENT_BACKEND_PORT: String(port),
        AGENT_BACKEND_TOKEN: TOKEN,
        INNER_API_KEY: INNER_KEY,
        API_INTERNAL_URL: fake.url,
        SHELLCTL_AUTH_TOKEN: 'crash-test-token',
        LOG_LEVEL: 'silent',
      },
      stdio: 'ignore',
    });
    const url = `http://127.0.0.1:${port}`;
    await until(
      'the backend to listen',
      () =>
        fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        ),
      60_000,
    );

    const workspaceId = crypto.randomUUID();
    fake.script({
      toolCalls: [{ id: 'call_1', name: 'shell', args: { command: 'sleep 60 & echo $! > pid; (setsid sleep 61 & echo $! >> pid); wait' } }],
    });
    const client = new RunClient(url, TOKEN);
    const { run_id: runId } = await client.createRun(
      runRequest({
        extraLayers: [
          { name: 'runtime', type: 'runtime', config: { workspace_id: workspaceId } },
          { name: 'shell', type: 'shell', deps: ['runtime'], config: {} },
        ],
      }),
    );
    const workspace = path.join(dataDir, 'workspaces', workspaceId);
    const pidFile = path.join(workspace, 'pid');
    await until(
      'both pids',
      () => {
        const p = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').trim().split(/\s+/).map(Number) : [];
        return p.length === 2 ? p : null;
      },
      180_000,
    ); // the first run may wait for shellctl to be built
    // The printed pids are the command's PID namespace's (issue 27): on the host its tree is found by its workspace.
    const pids = workspaceProcesses(workspace);
    expect(pids.length).toBeGreaterThanOrEqual(2);

    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    await until('the command tree to die', () => pids.every((p) => !isAlive(p)) && workspaceProcesses(workspace).length === 0, 5_000);

    replica = await startBackend({
      databaseUrl: dbUrl,
      apiUrl: fake.url,
      env: { DATA_DIR: dataDir },
      options: { staleAfterMs: 1_000, reapIntervalMs: 200, heartbeatMs: 200 },
    });
    const status = await until('the run to be reaped', async () => {
      const s = (await replica!.client.status(runId)) as { status: string; error: string | null };
      return s.status !== 'running' ? s : null;
    });
    expect(status.status).toBe('failed');
    const events = await replica.client.untilTerminal(runId);
    expect(events.at(-1)!.data).toMatchObject({ reason: 'backend_restarted' });
  }, 300_000);
});
