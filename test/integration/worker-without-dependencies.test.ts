/**
 * A standalone worker process starts while neither Temporal nor PostgreSQL is reachable, says so on its
 * health endpoint, and connects to each as it comes back — without a restart; its outbox dispatcher then
 * delivers what is owed to Temporal.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb, type Db } from '../../core/platform/db.js';
import { startEmbeddedPg, type EmbeddedPg } from '../../core/platform/embedded-pg.js';
import { applyMigrations } from '../../core/platform/migrate.js';
import { enqueueOutbox } from '../../core/domain/outbox.js';
import { freePort, stablePort } from '../../stack/ports.js';
import { startTemporalDevServer, type DevServer } from '../../stack/temporal.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = path.join(inject('testDataDir'), 'worker-without-deps');
let temporalPort: number;
let pgPort: number;
let healthPort: number;
let worker: ChildProcess;
let temporal: DevServer | null = null;
let pg: EmbeddedPg | null = null;
let db: Db | null = null;

beforeAll(async () => {
  // Stable ports: nothing listens on them yet, and the servers come up on them later.
  temporalPort = await stablePort();
  pgPort = await stablePort();
  healthPort = await freePort();
  fs.mkdirSync(dataDir, { recursive: true });
  const log = fs.openSync(path.join(dataDir, 'worker.log'), 'a');
  worker = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'worker.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: `postgresql://postgres:postgres@127.0.0.1:${pgPort}/worker_deps`,
      TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}`,
      TEMPORAL_TASK_QUEUE: `tq-worker-deps-${process.pid}`,
      WORKER_HEALTH_PORT: String(healthPort),
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', log, log],
  });
});
afterAll(async () => {
  if (worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((r) => worker.once('exit', r));
    worker.kill('SIGTERM');
    await exited;
  }
  await db?.$disconnect();
  await temporal?.stop();
  await pg?.stop();
});

async function health(until: (checks: Record<string, boolean>) => boolean) {
  let last: unknown = 'no answer';
  for (let i = 0; i < 240; i++) {
    const res = await fetch(`http://127.0.0.1:${healthPort}/healthz`).catch(() => null);
    if (res) {
      const body = (await res.json()) as { checks: Record<string, boolean> };
      last = { http: res.status, checks: body.checks };
      if (until(body.checks)) return last;
    }
    if (worker.exitCode !== null) throw new Error(`the worker exited with ${worker.exitCode}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`health never matched; last: ${JSON.stringify(last)}`);
}

describe('a standalone worker', () => {
  it('starts without Temporal and PostgreSQL and connects to each as it comes back', { timeout: 180_000 }, async () => {
    expect(await health(() => true)).toEqual({ http: 503, checks: { temporal: false, database: false } });

    temporal = await startTemporalDevServer({
      bin: inject('temporalBin'),
      dataDir,
      port: temporalPort,
      uiPort: await stablePort(),
      headless: true,
    });
    expect(await health((c) => c.temporal)).toEqual({ http: 503, checks: { temporal: true, database: false } });

    pg = await startEmbeddedPg({ dir: path.join(dataDir, 'pg'), port: pgPort, durable: false });
    await pg.ensureDatabase('worker_deps');
    const url = pg.url('worker_deps');
    await applyMigrations(url);
    expect(await health((c) => c.database)).toEqual({ http: 200, checks: { temporal: true, database: true } });

    // Its outbox dispatcher works too: a cancel owed to a workflow that does not exist is settled (gone).
    db = createDb(url);
    const owed = await enqueueOutbox(db, { kind: 'cancel', workflowId: 'agent-turn-no-such-workflow' });
    await db.$executeRaw`update temporal_outbox set next_attempt_at = now() where id = ${owed.id}::uuid`;
    let row: { delivered_at: Date | null; last_error: string | null } | undefined;
    for (let i = 0; i < 120 && !row?.delivered_at; i++) {
      await new Promise((r) => setTimeout(r, 250));
      [row] = await db.$queryRaw<
        { delivered_at: Date | null; last_error: string | null }[]
      >`select delivered_at, last_error from temporal_outbox where id = ${owed.id}::uuid`;
    }
    expect(row?.delivered_at).not.toBeNull();
    expect(row?.last_error).toMatch(/not found/i);
  });
});
