/**
 * The benchmark's stack: exactly the `npm start` wiring (stack/start-stack.ts) on embedded defaults, in a
 * fresh data dir `.data/bench-<pid>` on free ports, removed afterwards.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Env } from '../core/config.js';
import { createLogger } from '../core/logger.js';
import { startStack, type Stack, type StackOptions } from '../stack/start-stack.js';
import { freePort } from '../stack/ports.js';

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
}

export async function startBenchStack(opts: BenchStackOptions): Promise<BenchStack> {
  const dataDir = path.join(ROOT, '.data', `bench-${process.pid}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
  const config = loadConfig(
    {},
    {
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
      // Per-key/per-user limits (README "Security") out of the way: many turns and streams run as one user here;
      // test/security/l6-rate-limits.test.ts sets its own.
      RATE_LIMIT_KEY_PER_MINUTE: 1_000_000,
      RATE_LIMIT_USER_PER_MINUTE: 1_000_000,
      STREAMS_PER_KEY: 1_000_000,
      STREAMS_PER_USER: 1_000_000,
      TURNS_PER_KEY: 1_000_000,
      TURNS_PER_USER: 1_000_000,
    },
  );
  const stack = await startStack({ config, logger: createLogger('bench', opts.logLevel), worker: opts.worker, headlessTemporal: true });
  return {
    stack,
    dataDir,
    stop: async () => {
      await stack.stop();
      if (!opts.keepData) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
