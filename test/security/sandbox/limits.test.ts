/**
 * Issue 27, the escape suite through the real stack: resource bombs. A bounded fork bomb, a memory bomb and a disk
 * fill (one file over the file-size limit, then a workspace over its quota) each stop at their limit, nothing of
 * them is left running on the host, the host is unaffected, and the next turn of the same conversation works.
 * Small limits for this stack: procs 64, memory 256 MiB, file 32 MiB, workspace quota 64 MiB. Every bomb is bounded by
 * itself too (300 processes, 512 MiB, 150 MB of files), so a run without the sandbox fails the tests, not the host.
 * Depends on the new shellctl (cgroup/rlimit limits, the workspace quota watch) and the limit report (helper B).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pythonScript, startSandboxStack, type SandboxStack, type Turn } from './support.js';

const MiB = 1024 * 1024;
const PROCS = 64;
const MEMORY = 256 * MiB;
const FILE = 32 * MiB;
const QUOTA = 64 * MiB;

let s: SandboxStack;
beforeAll(async () => {
  s = await startSandboxStack('sandbox_limits', {
    SHELL_LIMIT_PROCS: PROCS,
    SHELL_LIMIT_MEMORY_BYTES: MEMORY,
    SHELL_LIMIT_FILE_BYTES: FILE,
    WORKSPACE_QUOTA_BYTES: QUOTA,
  });
}, 300_000);
afterAll(async () => s?.stack.stop());

const USER = 'limits';
let conversationId: string | undefined;
let sandboxUid = -1;
async function run(command: string, timeoutMs?: number) {
  const t = await s.sh(command, USER, { conversationId, timeoutMs });
  conversationId = t.conversationId;
  expect(t.end.event, JSON.stringify(t.end.data)).toBe('message_end');
  return t;
}

/** The shell tool's observation as the model got it (parsed when it is JSON). */
function observation(t: Turn): Record<string, unknown> {
  const raw = t.frames.filter((f) => f.event === 'agent_thought' && f.data.tool === 'shell').at(-1)?.data.observation;
  try {
    return JSON.parse(String(raw)) as Record<string, unknown>;
  } catch {
    return { raw };
  }
}

/** Host processes running as the sandbox uid (none may outlive their turn). */
function processesOf(uid: number): number[] {
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid) out.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function noneLeft(uid: number) {
  for (let i = 0; i < 50 && processesOf(uid).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  expect(processesOf(uid)).toEqual([]);
}

async function nextTurnWorks() {
  const t = await run('echo "alive $((6 * 7))"');
  expect(t.answer).toContain('The command exited with code 0.');
  expect(t.answer).toContain('alive 42');
}

describe('resource bombs stop at their limits', () => {
  it('the sandbox uid is known (and not root)', async () => {
    const t = await run('id -u');
    sandboxUid = Number(/stdout:\n(\d+)/.exec(t.answer)?.[1]);
    expect(sandboxUid).toBeGreaterThanOrEqual(200_000);
  });

  it(`a fork bomb stops at ${PROCS} processes (EAGAIN), the host can still fork, nothing is left, the next turn works`, async () => {
    const script = [
      'import errno, os, time',
      'pids = []',
      'try:',
      '    while len(pids) < 300:',
      '        pid = os.fork()',
      '        if pid == 0:',
      '            time.sleep(30)',
      '            os._exit(0)',
      '        pids.append(pid)',
      '    print("ESCAPED fork", len(pids), flush=True)',
      'except OSError as e:',
      '    print("REFUSED fork", errno.errorcode.get(e.errno, e.errno), "after", len(pids), flush=True)',
      'for p in pids: os.kill(p, 9)',
    ].join('\n');
    // Then a shell bomb, bounded by its depth (at most 2^9 shells) so that it cannot take a host down without a limit.
    const t = await run(
      `${pythonScript(script)}; f() { [ "$1" -lt 9 ] && { f $(($1 + 1)) & f $(($1 + 1)); wait; }; }; f 0; echo "shell bomb done"`,
      20_000,
    );
    expect(t.answer).not.toContain('ESCAPED');
    const m = /REFUSED fork (\S+) after (\d+)/.exec(t.answer);
    expect(m, t.answer).not.toBeNull();
    expect(m![1]).toBe('EAGAIN');
    expect(Number(m![2])).toBeLessThan(PROCS);
    // The host was not starved while it ran, and is not now.
    expect(execFileSync('/bin/echo', ['host forks']).toString()).toBe('host forks\n');
    await noneLeft(sandboxUid);
    await nextTurnWorks();
  });

  it(`a memory bomb stops near ${MEMORY / MiB} MiB (MemoryError or the memory limit), the next turn works`, async () => {
    const script = [
      'chunks = []',
      'try:',
      '    while len(chunks) < 32:', // 512 MiB at most: twice the limit, bounded without it
      '        chunks.append(b"x" * (16 << 20))',
      '        print("MB", 16 * len(chunks), flush=True)',
      '    print("ESCAPED memory", flush=True)',
      'except MemoryError:',
      '    print("REFUSED memory MemoryError", flush=True)',
    ].join('\n');
    const t = await run(pythonScript(script), 30_000);
    expect(t.answer).not.toContain('ESCAPED');
    const reached = Math.max(0, ...[...t.answer.matchAll(/^MB (\d+)$/gm)].map((x) => Number(x[1])));
    expect(reached).toBeLessThanOrEqual(MEMORY / MiB);
    const obs = observation(t);
    // Either python was refused the allocation, or the command was stopped at the memory limit.
    expect(t.answer.includes('REFUSED memory MemoryError') || obs.limit === 'memory', JSON.stringify(obs)).toBe(true);
    await noneLeft(sandboxUid);
    await nextTurnWorks();
  });

  it(`a file over ${FILE / MiB} MiB is cut at the limit, the next turn works`, async () => {
    const t = await run('head -c 50000000 /dev/zero > big.bin; echo "head exit $?"; ls -l big.bin', 30_000);
    const { dir } = await s.workspaceOf(conversationId!);
    const size = fs.statSync(path.join(dir, 'big.bin')).size;
    expect(size).toBeLessThanOrEqual(FILE);
    expect(size).toBeLessThan(50_000_000);
    const obs = observation(t);
    expect(/head exit [1-9]/.test(t.answer) || obs.limit === 'file_size', JSON.stringify(obs)).toBe(true);
    await nextTurnWorks();
    fs.rmSync(path.join(dir, 'big.bin'));
  });

  it(`filling the workspace stops the command at its ${QUOTA / MiB} MiB quota; after deleting, the next turn works`, async () => {
    // 20 files of 5 MB (100 MB in all), each under what is left of the quota: a per-file bound alone lets them all
    // through; the workspace must still stop growing near its quota.
    const t = await run(
      'for i in $(seq 1 20); do head -c 5000000 /dev/zero > fill$i.bin || { echo "write $i refused"; break; }; sleep 0.2; done; echo "wrote until $i"',
      45_000,
    );
    const { dir } = await s.workspaceOf(conversationId!);
    const total = fs
      .readdirSync(dir)
      .filter((n) => n.startsWith('fill'))
      .reduce((sum, n) => sum + fs.statSync(path.join(dir, n)).size, 0);
    const obs = observation(t);
    expect(total, JSON.stringify(obs)).toBeLessThanOrEqual(QUOTA + 5_000_000); // at most one write late
    expect(total).toBeLessThan(100_000_000);
    expect(/write \d+ refused/.test(t.answer) || obs.limit === 'workspace_quota', JSON.stringify(obs)).toBe(true);
    await noneLeft(sandboxUid);
    // The model deletes what it no longer needs and carries on.
    const clean = await run('rm -f fill*.bin; echo cleaned');
    expect(clean.answer).toContain('cleaned');
    await nextTurnWorks();
  });
});
