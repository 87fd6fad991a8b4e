/**
 * The Temporal worker: runs `agentTurn` workflows and their activities. Scale by running more of these on
 * the same task queue. `npm run worker` (the dev stack starts one in-process).
 */
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from './core/platform/config.js';
import { createDb } from './core/platform/db.js';
import { createLogger } from './core/platform/logger.js';
import { OutboxDispatcher } from './core/domain/outbox.js';
import { sweeperTimings, TurnSweeper, bucketSweep } from './worker/sweeper.js';
import { explainTemporalConnectError, temporalSecurity } from './core/platform/temporal-connection.js';
import { pickTemporalMetricsAddress } from './core/platform/metrics/temporal.js';
import { setupObservability } from './core/platform/observability.js';
import { startWorkerHttp } from './worker/http.js';
import { installProcessGuard } from './core/platform/process-guard.js';
import { type RunningWorker, installRuntimeLogger, startWorker } from './worker/start.js';

/** Resolves after `ms`, or at once when `signal` aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * A standalone worker process: starts without Temporal and without PostgreSQL and connects when they come
 * back (retry with backoff, one log line per state change). It also runs an outbox dispatcher (core/domain/outbox.ts),
 * so signals and cancels an api accepted are delivered even if every api replica is gone, and, with
 * WORKER_HEALTH_PORT, answers `GET /healthz` ({temporal, database}), `/readyz` (+ polling) and `/metrics` (worker/http.ts).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  setupObservability(config, 'worker');
  const logger = createLogger('worker', config.LOG_LEVEL);
  installProcessGuard(logger, config.UNCAUGHT_ERROR_POLICY);
  if (!config.DATABASE_URL) throw new Error('DATABASE_URL is required for a standalone worker.');
  const db = createDb(config.DATABASE_URL, { max: 20, preparedStatements: config.HOT_SQL_PREPARED });
  const address = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_DEV_PORT}`;
  const security = temporalSecurity(config); // read once: a wrong PEM path stops the worker here
  const stopping = new AbortController();
  installRuntimeLogger(logger, config.LOG_LEVEL, { metricsAddress: await pickTemporalMetricsAddress() });

  let client: Client | null = null;
  let running: RunningWorker | null = null;
  const outbox = new OutboxDispatcher({ db, temporal: () => client, logger });
  outbox.start();
  // What an outage left behind (a pending message without a workflow, a lock held by an ended turn): worker/sweeper.ts.
  const sweeper = new TurnSweeper({
    db,
    temporal: () => client,
    logger: logger.child({ component: 'sweeper' }),
    ...sweeperTimings(config),
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workspacesDir: config.workspacesDir,
    bucket: bucketSweep(config),
  });
  sweeper.start();
  const health = config.WORKER_HEALTH_PORT
    ? await startWorkerHttp(
        { db, temporal: () => (running ? client : null), worker: () => running?.worker ?? null, logger },
        config.WORKER_HEALTH_PORT,
        config.WORKER_HEALTH_HOST,
      )
    : null;

  const stop = () => {
    stopping.abort();
    void (async () => {
      await outbox.stop();
      await sweeper.stop();
      await running?.shutdown();
      await health?.close();
      await db.$disconnect();
      process.exit(0);
    })();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  // Temporal: connect (and create the worker, which checks the namespace) until it works.
  for (let attempt = 0; !stopping.signal.aborted; attempt++) {
    try {
      const connection = await NativeConnection.connect({ address, ...security }).catch((err: unknown) => {
        throw explainTemporalConnectError(err, address, config);
      });
      try {
        running = await startWorker({ config, db, logger, temporalAddress: address, connection });
      } catch (err) {
        await connection.close().catch(() => undefined);
        throw err;
      }
      client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
      if (attempt > 0) logger.info({ address, attempts: attempt + 1 }, 'temporal reachable; worker connected');
      break;
    } catch (err) {
      if (attempt === 0) logger.warn({ address, err: (err as Error).message }, 'temporal unreachable; worker retrying until it is back');
      await pause(Math.min(5000, 250 * 2 ** attempt), stopping.signal);
    }
  }
  if (!running) return;
  logger.info({ task_queue: config.TEMPORAL_TASK_QUEUE }, 'worker running');
  // A parent that spawned us with an IPC channel (the dev stack, tests) waits for this.
  process.send?.('worker-ready');
  await running.run;
}

// `tsx worker.ts`: a standalone worker process.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
