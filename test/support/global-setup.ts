/**
 * Starts the real infrastructure once per test run: embedded PostgreSQL and the Temporal dev server
 * (found or installed by the project's locator). Each test file then gets its own database and task
 * queue, so files run in parallel without sharing state.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPg } from '../../core/platform/embedded-pg.js';
import { locateTemporal, startTemporalDevServer } from '../../stack/temporal.js';
import { freePort } from '../../stack/ports.js';
import { applyMigrations } from '../../core/platform/migrate.js';
import { ensureWebBuild } from '../../scripts/build-web.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Per run, so a developer's `npm start` or a second test run never collides with this one.
// (and per test project: each project runs this setup).
const TEST_DATA_DIR = path.join(ROOT, '.data', `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);

const PG_TEMPLATE = 'migrated_template';

declare module 'vitest' {
  export interface ProvidedContext {
    pgPort: number;
    /** A database migrated once per run; freshDatabase() copies it (test/support/db.ts). */
    pgTemplate: string;
    temporalAddress: string;
    temporalBin: string;
    temporalPort: number;
    temporalUiPort: number;
    testDataDir: string;
  }
}

type Provided = Pick<
  import('vitest').ProvidedContext,
  'pgPort' | 'pgTemplate' | 'temporalAddress' | 'temporalBin' | 'temporalPort' | 'temporalUiPort' | 'testDataDir'
>;

/** One start per run, shared by the run's projects (vitest.config.ts: files in a process of their own, files sharing one):
 * vitest calls this setup once per project in the same main process; the second call gets the first's services, and
 * the last teardown stops them. */
const SHARED = Symbol.for('dify-agent-tests.infrastructure');
interface Shared {
  started: Promise<{ provided: Provided; stop: () => Promise<void> }>;
  users: number;
}

export default async function setup(project: TestProject) {
  const g = globalThis as unknown as Record<symbol, Shared | undefined>;
  const shared = (g[SHARED] ??= { started: startInfrastructure(), users: 0 });
  shared.users += 1;
  const { provided, stop } = await shared.started;
  for (const [key, value] of Object.entries(provided)) project.provide(key as keyof Provided, value as never);
  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    g[SHARED] = undefined;
    await stop();
  };
}

async function startInfrastructure(): Promise<{ provided: Provided; stop: () => Promise<void> }> {
  fs.rmSync(TEST_DATA_DIR, { recursive: true, force: true });
  fs.mkdirSync(TEST_DATA_DIR, { recursive: true });
  // The pages the api serves (.cache/web): built when web/ changed since the last build (a single-file run skips pretest).
  await ensureWebBuild();
  const pgPort = await freePort();
  const temporalPort = await freePort();
  const temporalUiPort = await freePort();
  // A throwaway cluster: no fsync (the suite's durability tests kill processes, not the OS).
  const pg = await startEmbeddedPg({ dir: path.join(TEST_DATA_DIR, 'pg'), port: pgPort, durable: false });
  // Every file's fresh database is a copy of this one (CREATE DATABASE ... TEMPLATE: ~40 ms instead of 0.2-0.5 s of
  // migrations per file); nothing connects to it after this, as a template requires.
  await pg.ensureDatabase(PG_TEMPLATE);
  await applyMigrations(pg.url(PG_TEMPLATE));
  const bin = await locateTemporal({ explicit: process.env.TEMPORAL_CLI_PATH, log: (m) => console.log(`[temporal] ${m}`) });
  const temporal = await startTemporalDevServer({
    bin,
    dataDir: TEST_DATA_DIR,
    port: temporalPort,
    uiPort: temporalUiPort,
    headless: true,
  });
  const provided: Provided = {
    pgPort,
    pgTemplate: PG_TEMPLATE,
    temporalAddress: temporal.address,
    temporalBin: bin,
    temporalPort,
    temporalUiPort,
    testDataDir: TEST_DATA_DIR,
  };
  const stop = async () => {
    await temporal.stop();
    await pg.stop();
    // KEEP_TEST_DATA=1 keeps the logs (worker-child.log, temporal/server.log) for a post-mortem.
    if (!process.env.KEEP_TEST_DATA) fs.rmSync(TEST_DATA_DIR, { recursive: true, force: true });
  };
  return { provided, stop };
}
