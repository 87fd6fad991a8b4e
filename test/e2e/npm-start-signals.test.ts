/**
 * `npm start` stops everything it started when its process is told to stop (SIGTERM to the npm process,
 * as a process manager or `docker stop` would send): PostgreSQL and the Temporal dev server must not be
 * left running. Both once were: tsx SIGKILLed its child when the child's signal handlers were replaced
 * wholesale, and `sh -c` did not pass npm's SIGTERM on.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../stack/ports.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = path.join(inject('testDataDir'), 'npm-start');
let child: ChildProcess | null = null;

/** PIDs of processes whose command line mentions `needle` (PostgreSQL and Temporal carry the data dir). */
function processesWith(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return cond();
}

afterAll(() => {
  // Whatever happened, leave nothing behind.
  if (child?.pid) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  for (const pid of processesWith(dataDir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

describe('npm start', () => {
  it('stops PostgreSQL and the Temporal dev server when npm gets SIGTERM', { timeout: 180_000 }, async () => {
    let out = '';
    child = spawn('npm', ['start', '--ignore-scripts'], {
      cwd: ROOT,
      detached: true, // own process group: the signal goes to npm only, as from a process manager
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        API_PORT: String(await freePort()),
        AGENT_BACKEND_PORT: String(await freePort()),
        EMBEDDED_PG_PORT: String(await freePort()),
        TEMPORAL_DEV_PORT: String(await freePort()),
        TEMPORAL_UI_PORT: String(await freePort()),
        TEMPORAL_CLI_PATH: inject('temporalBin'),
        LOG_LEVEL: 'warn',
      },
    });
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));

    expect(await until(() => out.includes('Press Ctrl-C to stop everything.'), 150_000), out.slice(-2000)).toBe(true);
    const started = processesWith(dataDir);
    // PostgreSQL (postmaster) and the Temporal dev server run with the data dir in their command lines.
    expect(started.length, 'processes found under the data dir').toBeGreaterThanOrEqual(2);

    process.kill(child.pid!, 'SIGTERM');
    await exited;
    expect(await until(() => processesWith(dataDir).length === 0, 30_000), `left running: ${processesWith(dataDir).join(', ')}`).toBe(true);
    expect(out).toContain('SIGTERM: stopping ...');
    expect(out).toContain('stopped.');
  });
});
