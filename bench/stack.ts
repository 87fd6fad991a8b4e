/**
 * The benchmark's stack: exactly the `npm start` wiring (stack/start-stack.ts) on embedded defaults, in a
 * fresh data dir `.data/bench-<pid>` on free ports, removed afterwards. With `temporal: 'cluster'` the same
 * wiring runs on the PostgreSQL-backed Temporal server of `npm run cluster` (stack/cluster.ts: four service
 * processes, SQL visibility) instead of the dev server, with Temporal's databases on the bench's own embedded
 * PostgreSQL, as the cluster has them: only the Temporal server differs between the two runs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Env } from '../core/platform/config.js';
import { createLogger } from '../core/platform/logger.js';
import { startEmbeddedPg } from '../core/platform/embedded-pg.js';
import { ONE_CLIENT_LIMITS, startStack, type Stack, type StackOptions } from '../stack/start-stack.js';
import { startTemporalServer } from '../stack/cluster.js';
import { freePort, stablePort } from '../stack/ports.js';
import { TEMPORAL_SERVICES, type TemporalPorts } from '../stack/temporal-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface BenchStack {
  stack: Stack;
  dataDir: string;
  stop: () => Promise<void>;
}

/** Per-token delay of the demo model outside `/slow` (the tool workload's calls use it). */
export const BENCH_TOKEN_DELAY_MS = 5;

export interface BenchStackOptions {
  worker: NonNullable<StackOptions['worker']>;
  logLevel: Env['LOG_LEVEL'];
  /** Explicit `temporal` CLI binary (else the project's locator finds one). */
  temporalCliPath?: string;
  keepData?: boolean;
  /** `dev`: the stack starts the dev server; `cluster`: the PostgreSQL-backed server (default dev). */
  temporal?: 'dev' | 'cluster';
  /** More configuration over the bench's (e.g. bench/paused.ts's worker health port). */
  env?: Partial<Env>;
}

/** PostgreSQL and the PostgreSQL-backed Temporal server, for a stack pointed at them (DATABASE_URL, TEMPORAL_ADDRESS). */
async function startClusterTemporal(dataDir: string, logLevel: Env['LOG_LEVEL']) {
  const pg = await startEmbeddedPg({ dir: path.join(dataDir, 'pg'), port: await freePort(), durable: true });
  try {
    await pg.ensureDatabase('dify_agent');
    const port = () => stablePort();
    const record = async () => {
      const out = {} as TemporalPorts['grpc'];
      for (const s of TEMPORAL_SERVICES) out[s] = await port();
      return out;
    };
    const ports: TemporalPorts = { grpc: await record(), membership: await record(), frontendHttp: await port() };
    const quiet = logLevel === 'error' || logLevel === 'silent' || logLevel === 'fatal';
    const temporal = await startTemporalServer({
      dataDir: path.join(dataDir, 'cluster'),
      databaseUrl: pg.url('dify_agent'),
      ports,
      log: quiet ? undefined : (m) => console.log(m),
    });
    return { databaseUrl: pg.url('dify_agent'), temporal, stop: async () => (await temporal.stop(), await pg.stop()) };
  } catch (err) {
    await pg.stop();
    throw err;
  }
}

export async function startBenchStack(opts: BenchStackOptions): Promise<BenchStack> {
  const dataDir = path.join(ROOT, '.data', `bench-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  const cluster = opts.temporal === 'cluster' ? await startClusterTemporal(dataDir, opts.logLevel) : null;
  const config = loadConfig(
    {},
    {
      ...(cluster ? { DATABASE_URL: cluster.databaseUrl, TEMPORAL_ADDRESS: cluster.temporal.address } : {}),
      ...(opts.temporalCliPath ? { TEMPORAL_CLI_PATH: opts.temporalCliPath } : {}),
      DATA_DIR: dataDir,
      EMBEDDED_PG_PORT: await freePort(),
      TEMPORAL_DEV_PORT: await freePort(),
      TEMPORAL_UI_PORT: await freePort(),
      API_PORT: 0,
      AGENT_BACKEND_PORT: 0,
      DEMO_MODEL_TOKEN_DELAY_MS: BENCH_TOKEN_DELAY_MS,
      TEMPORAL_TASK_QUEUE: 'agent-turns-bench',
      LOG_LEVEL: opts.logLevel,
      // BENCH_METRICS=off: the same run without Prometheus metrics (issue 20: their overhead is metrics on vs off).
      METRICS_ENABLED: process.env.BENCH_METRICS !== 'off',
      // Per-key/per-user limits out of the way: many turns and streams run as one user here.
      ...ONE_CLIENT_LIMITS,
      // Admission control as a deployment would set it (docs/failure-modes.md), e.g. MAX_TURNS_IN_FLIGHT=32 npm run bench:
      // the overload cells then show turns shed with 503 + Retry-After instead of turns that time out.
      ...(process.env.MAX_TURNS_IN_FLIGHT ? { MAX_TURNS_IN_FLIGHT: Number(process.env.MAX_TURNS_IN_FLIGHT) } : {}),
      ...(process.env.MAX_RUNS_PER_BACKEND ? { MAX_RUNS_PER_BACKEND: Number(process.env.MAX_RUNS_PER_BACKEND) } : {}),
      ...opts.env,
    },
  );
  const stack = await startStack({
    config,
    logger: createLogger('bench', opts.logLevel),
    worker: opts.worker,
    headlessTemporal: true,
  }).catch(async (err) => {
    await cluster?.stop();
    throw err;
  });
  return {
    stack,
    dataDir,
    stop: async () => {
      await stack.stop();
      await cluster?.stop();
      if (!opts.keepData) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
