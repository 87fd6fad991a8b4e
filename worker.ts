/**
 * The Temporal worker: runs `agentTurn` workflows and their activities. Scale by running more of these on
 * the same task queue. `npm run worker` (the dev stack starts one in-process).
 */
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createActivities } from './activities/index.js';
import { AgentBackendClient } from './core/backend-client.js';
import { loadConfig, type Config } from './core/config.js';
import { createDb, type Db } from './core/db.js';
import { createDefaultProviders } from './core/llm/providers/index.js';
import { createLogger, type Logger } from './core/logger.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const WORKFLOWS_PATH = path.join(here, 'workflows', 'index.ts');

export interface RunningWorker {
  worker: Worker;
  run: Promise<void>;
  shutdown: () => Promise<void>;
}

let runtimeInstalled = false;

/** Routes the SDK's own logs through pino at our level (once per process). */
export function installRuntimeLogger(logger: Logger, level: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const sdkLevel: LogLevel = level === 'debug' || level === 'trace' ? 'DEBUG' : level === 'info' ? 'INFO' : 'WARN';
  try {
    Runtime.install({
      logger: new DefaultLogger(sdkLevel, (entry) => {
        const fn = entry.level === 'ERROR' ? logger.error : entry.level === 'WARN' ? logger.warn : logger.debug;
        fn.call(logger, { sdk: entry.meta }, entry.message);
      }),
    });
  } catch {
    /* already installed by the host process */
  }
}

export async function startWorker(opts: {
  config: Config;
  db: Db;
  logger: Logger;
  temporalAddress: string;
  /** A connection shared with this process's api client (eager workflow start); its owner closes it. */
  connection?: NativeConnection;
}): Promise<RunningWorker> {
  const { config, db, logger } = opts;
  installRuntimeLogger(logger, config.LOG_LEVEL);
  const connection = opts.connection ?? (await NativeConnection.connect({ address: opts.temporalAddress }));
  const backend = new AgentBackendClient(config.agentBackendUrl, config.AGENT_BACKEND_TOKEN);
  const providers = createDefaultProviders(config);
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workflowsPath: WORKFLOWS_PATH,
    activities: createActivities({
      db,
      backend,
      config,
      logger: logger.child({ component: 'activities' }),
      modelSupportsVision: (provider, model) => providers.get(provider)?.resolveModel(model)?.supports_vision ?? false,
    }),
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 100,
    // Keep the stuck-detector quiet and shut down fast in dev; runAgent reattaches on retry anyway.
    shutdownGraceTime: '3 seconds',
  });
  const run = worker.run();
  return {
    worker,
    run,
    shutdown: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await run.catch(() => undefined);
      if (!opts.connection) await connection.close().catch(() => undefined);
    },
  };
}

// `tsx worker.ts`: a standalone worker process.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const config = loadConfig();
  const logger = createLogger('worker', config.LOG_LEVEL);
  if (!config.DATABASE_URL) throw new Error('DATABASE_URL is required for a standalone worker.');
  const db = createDb(config.DATABASE_URL, { max: 20 });
  const w = await startWorker({ config, db, logger, temporalAddress: config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_DEV_PORT}` });
  logger.info({ task_queue: config.TEMPORAL_TASK_QUEUE }, 'worker running');
  // A parent that spawned us with an IPC channel (the dev stack, tests) waits for this.
  process.send?.('worker-ready');
  const stop = () => void w.shutdown().then(() => db.$disconnect()).then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await w.run;
}
