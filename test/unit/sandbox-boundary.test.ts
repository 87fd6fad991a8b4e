/**
 * Issue 27 pieces without a kernel: the limit observations the model gets, the isolation a probe lacks, the stub
 * socket's path (sun_path is 108 bytes), and shellctl statuses with and without the new fields.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { shellObservation } from '../../agent-backend/modules/context.js';
import { startStubServer, stubSocketPath } from '../../agent-backend/stub-server.js';
import { createLogger } from '../../core/platform/logger.js';
import { socketRequest } from '../support/stub-socket.js';
import { ShellctlStatus, type ShellResult } from '../../agent-backend/workspace/exec.js';
import { missingIsolation, ShellctlProbe } from '../../agent-backend/workspace/sandbox.js';

const result = (r: Partial<ShellResult>): ShellResult => ({
  status: 'exited',
  exitCode: 0,
  stdout: 'out',
  stderr: 'err',
  stdoutTruncated: false,
  stderrTruncated: false,
  isolated: true,
  ...r,
});

describe('limit observations', () => {
  it.each([
    ['memory', 'ran out of memory'],
    ['procs', 'start fewer processes'],
    ['cpu', 'CPU time'],
    ['file_size', 'write smaller files'],
    ['workspace_quota', 'delete files you no longer need'],
    ['something_new', 'hit a resource limit (something_new)'],
  ])('%s', (limit, words) => {
    const o = shellObservation(result({ status: 'exited', exitCode: 137, limit }));
    expect(o).toMatchObject({ kind: 'result', isError: true, result: { error: 'limit_exceeded', limit, exit_code: 137, stdout: 'out' } });
    expect((o as { result: { message: string } }).result.message).toContain(words);
  });

  it('a wall-clock limit stays the timeout observation; no limit, the plain result', () => {
    expect(shellObservation(result({ status: 'timeout', exitCode: null, limit: 'wall_clock', message: 'too slow' }))).toMatchObject({
      isError: true,
      result: { error: 'timeout', message: 'too slow' },
    });
    expect(shellObservation(result({}))).toEqual({ kind: 'result', result: { exit_code: 0, stdout: 'out', stderr: 'err' } });
  });
});

describe('isolation a probe lacks', () => {
  it('names Landlock and namespaces; an older shellctl probe ({abi}) lacks namespaces', () => {
    const full = { abi: 7, namespaces: true, user_namespace: false, seccomp: true, limits: 'cgroup-v2', uid_switch: true };
    expect(missingIsolation(ShellctlProbe.parse(full))).toEqual([]);
    expect(missingIsolation(ShellctlProbe.parse({ ...full, abi: 0 }))).toEqual(['Landlock (the kernel offers none)']);
    // An older kernel's Landlock (ABI 1-3: files only) is enough: the network namespace isolates the network.
    expect(missingIsolation(ShellctlProbe.parse({ ...full, abi: 3 }))).toEqual([]);
    expect(missingIsolation(ShellctlProbe.parse({ ...full, abi: 1 }))).toEqual([]);
    expect(missingIsolation(ShellctlProbe.parse({ abi: 6 }))).toEqual(['Linux namespaces (mount, PID, network, IPC, UTS)']);
  });

  it('names a masked /proc (a container without systempaths=unconfined / procMount Unmasked); an older probe without the field is not refused for it', () => {
    const full = { abi: 7, namespaces: true, user_namespace: true, seccomp: true, limits: 'rlimits', uid_switch: false };
    expect(missingIsolation(ShellctlProbe.parse({ ...full, proc: false }))).toEqual([
      "a fresh /proc for the command's PID namespace (this /proc is masked)",
    ]);
    expect(missingIsolation(ShellctlProbe.parse({ ...full, proc: true }))).toEqual([]);
    expect(missingIsolation(ShellctlProbe.parse(full))).toEqual([]);
    // Without namespaces the probe never reached /proc: namespaces are what is missing.
    expect(missingIsolation(ShellctlProbe.parse({ ...full, namespaces: false, proc: false }))).toEqual([
      'Linux namespaces (mount, PID, network, IPC, UTS)',
    ]);
  });

  it('statuses parse with and without the isolation and limit fields', () => {
    expect(ShellctlStatus.parse({ status: 'exited', exit_code: 0, abi: 6, isolated: true }).isolation).toBeUndefined();
    const s = ShellctlStatus.parse({
      status: 'exited',
      exit_code: 137,
      abi: 7,
      isolated: true,
      isolation: { landlock_abi: 7, namespaces: true, user_namespace: false, seccomp: true, limits: 'cgroup-v1', uid: 212345 },
      limit: 'memory',
    });
    expect(s).toMatchObject({ limit: 'memory', isolation: { uid: 212345 } });
  });
});

describe('the stub socket path', () => {
  it('defaults under the data dir per port, honours AGENT_STUB_SOCKET, and moves a too-long default to tmp', () => {
    expect(stubSocketPath({ dataDir: '/srv/data', port: 5002 })).toBe('/srv/data/sandbox/stub-5002.sock');
    expect(stubSocketPath({ explicit: 'rel/s.sock', dataDir: '/srv/data', port: 5002 })).toBe(path.resolve('rel/s.sock'));
    const long = stubSocketPath({ dataDir: `/srv/${'d'.repeat(120)}`, port: 5002 });
    expect(long.startsWith(path.join(os.tmpdir(), 'dify-agent-stub-'))).toBe(true);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(107);
  });
});

describe('the stub server', () => {
  const logger = createLogger('test', 'silent');
  const router = () => express.Router().get('/agent-stub/config/prompt', (_req, res) => void res.json({ prompt: 'p' }));

  it('replaces a stale socket (a crashed backend left it), refuses a live one, 404s the rest and removes its socket on close', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stub-srv-'));
    const sock = path.join(dir, 'own', 'stub-1.sock');
    fs.mkdirSync(path.dirname(sock));
    // A socket file nobody listens on: bound, never unlinked.
    execFileSync('python3', ['-c', `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(sock)})`]);
    expect(fs.statSync(sock).isSocket()).toBe(true);
    const server = await startStubServer({ router: router(), socketPath: sock, logger, privateDir: true });
    expect(fs.statSync(sock).mode & 0o777).toBe(0o666);
    expect(fs.statSync(path.dirname(sock)).mode & 0o777).toBe(0o700);
    expect((await socketRequest(sock, '/agent-stub/config/prompt')).json()).toEqual({ prompt: 'p' });
    expect((await socketRequest(sock, '/runs', { method: 'POST' })).status).toBe(404);
    await expect(startStubServer({ router: router(), socketPath: sock, logger, privateDir: true })).rejects.toThrow(
      /another process listens/,
    );
    await server.close();
    expect(fs.existsSync(sock)).toBe(false);
  });

  it("leaves an explicit socket's directory as it is (a shared /tmp stays 1777)", async () => {
    const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'stub-shared-'));
    fs.chmodSync(shared, 0o1777);
    const server = await startStubServer({ router: router(), socketPath: path.join(shared, 's.sock'), logger, privateDir: false });
    expect(fs.statSync(shared).mode & 0o7777).toBe(0o1777);
    await server.close();
  });
});
