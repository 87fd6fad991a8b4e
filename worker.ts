/**
 * The Temporal worker: runs `agentTurn` workflows and their activities. Scale by running more of these on
 * the same task queue. `npm run worker` (the dev stack starts one in-process).
 */
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createActivities } from './activities/index.js';
import { createScheduleActivities } from './activities/scheduled-turn.js';
import { createConversationQueueActivities } from './activities/conversation-queue.js';
import { createWebhookActivities } from './activities/webhooks.js';
import { WebhookDispatcher } from './core/webhooks/dispatcher.js';
import { AgentBackendClient } from './core/backend-client.js';
import { loadConfig, type Config } from './core/config.js';
import { createDb, type Db } from './core/db.js';
import { createDefaultProviders } from './core/llm/providers/index.js';
import { resolveTenantModel } from './core/llm/tenant-model.js';
import { ensureTurnSearchAttributes } from './core/search-attribute-registry.js';
import { createLogger, type Logger } from './core/logger.js';
import { OutboxDispatcher } from './core/outbox.js';
import { sweeperTimings, TurnSweeper } from './turn/sweeper.js';
import { isCompiled } from './core/project-root.js';
import { temporalSecurity } from './core/temporal-connection.js';
import { pickTemporalMetricsAddress, temporalTelemetryOptions } from './core/metrics/temporal.js';
import { setupObservability } from './core/observability.js';
import { workerTelemetryOptions } from './core/tracing/worker-options.js';
import { startWorkerHttp } from './core/worker-http.js';
import { installProcessGuard } from './core/process-guard.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const compiled = isCompiled(import.meta.url);
export const WORKFLOWS_PATH = path.join(here, 'workflows', compiled ? 'index.js' : 'index.ts');
/**
 * The compiled build ships the workflow code already bundled (scripts/build.ts, from the same compiled
 * workflows/): a production worker starts without webpack work and runs exactly the code that was built and
 * tested. From sources (tsx) the worker bundles workflows/ itself at start, as before.
 */
export const WORKFLOW_BUNDLE_PATH = path.join(here, 'workflow-bundle.js');

function workflowCode(): { workflowBundle: { codePath: string } } | { workflowsPath: string } {
  if (!compiled) return { workflowsPath: WORKFLOWS_PATH };
  if (!fs.existsSync(WORKFLOW_BUNDLE_PATH))
    throw new Error(`${WORKFLOW_BUNDLE_PATH} is missing: run \`npm run build\` (it bundles the workflows).`);
  return { workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } };
}

export interface RunningWorker {
  worker: Worker;
  run: Promise<void>;
  shutdown: () => Promise<void>;
}

let runtimeInstalled = false;

/**
 * Routes the SDK's own logs through pino at our level (once per process). `ownsSignals`: the host process
 * shuts the worker down itself, in order (the dev stack drains turns first), so the SDK must not react to
 * SIGINT/SIGTERM on its own (by default it shuts every worker down at the first signal).
 */
export function installRuntimeLogger(
  logger: Logger,
  level: string,
  /** `metricsAddress`: where the SDK's Prometheus exporter listens (core/metrics/temporal.ts); the worker's /metrics serves it. */
  opts: { ownsSignals?: boolean; metricsAddress?: string | null } = {},
): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const sdkLevel: LogLevel = level === 'debug' || level === 'trace' ? 'DEBUG' : level === 'info' ? 'INFO' : 'WARN';
  try {
    Runtime.install({
      ...(opts.ownsSignals ? { shutdownSignals: [] } : {}),
      telemetryOptions: temporalTelemetryOptions(opts.metricsAddress),
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
  const connection = opts.connection ?? (await NativeConnection.connect({ address: opts.temporalAddress, ...temporalSecurity(config) }));
  // Turns are started and upserted with these attributes: a namespace that lacks one would refuse every start.
  const added = await ensureTurnSearchAttributes(connection, config.TEMPORAL_NAMESPACE);
  if (added.length) logger.warn({ added, namespace: config.TEMPORAL_NAMESPACE }, 'registered missing turn search attributes');
  const backend = new AgentBackendClient(config.agentBackendUrl, config.AGENT_BACKEND_TOKEN, {
    streamIdleMs: config.AGENT_BACKEND_STREAM_IDLE_MS,
  });
  const providers = createDefaultProviders(config);
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    ...workflowCode(),
    // Turn counts (metrics) and the turn's trace through workflow and activities (tracing), when on.
    ...workerTelemetryOptions({ prebuiltBundle: compiled }),
    activities: {
      ...createActivities({
        db,
        backend,
        config,
        logger: logger.child({ component: 'activities' }),
        modelSupportsVision: (provider, model) => providers.get(provider)?.resolveModel(model)?.supports_vision ?? false,
        // The tenant's view of its model (declared models, prices, window) for the run request (issue 29).
        resolveModel: (tenantId, provider, model) => resolveTenantModel(db, config.ENCRYPTION_KEY, providers, tenantId, provider, model),
      }),
      // Scheduled turns and webhook deliveries (issue 35: workflows/scheduled-turn.ts, workflows/deliver-webhook.ts).
      ...createScheduleActivities({ db, config, logger: logger.child({ component: 'schedules' }) }),
      ...createWebhookActivities({ db, config, logger: logger.child({ component: 'webhooks' }) }),
      // Multitask strategies: the conversation queue's claim (workflows/conversation-queue.ts).
      ...createConversationQueueActivities({ db, config, logger: logger.child({ component: 'conversation-queue' }) }),
    },
    // Slots (docs/configuration.md): a turn in flight holds one activity slot (runAgent) for its whole run, so the
    // activity slots of all workers are also the default admission cap of the api (api/admission.ts).
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: config.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    ...(config.WORKER_MAX_CACHED_WORKFLOWS !== undefined ? { maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS } : {}),
    // Keep the stuck-detector quiet and shut down fast in dev; runAgent reattaches on retry anyway.
    shutdownGraceTime: '3 seconds',
  });
  const run = worker.run();
  // Every worker starts the deliverWebhook workflows of the deliveries turn outcomes wrote (core/webhooks/dispatcher.ts).
  const webhooks = new WebhookDispatcher({
    db,
    client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
    config,
    logger: logger.child({ component: 'webhook-dispatcher' }),
  });
  webhooks.start();
  return {
    worker,
    run,
    shutdown: async () => {
      await webhooks.stop();
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await run.catch(() => undefined);
      if (!opts.connection) await connection.close().catch(() => undefined);
    },
  };
}

/** Resolves after `ms`, or at once when `signal` aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * A standalone worker process: starts without Temporal and without PostgreSQL and connects when they come
 * back (retry with backoff, one log line per state change). It also runs an outbox dispatcher (core/outbox.ts),
 * so signals and cancels an api accepted are delivered even if every api replica is gone, and, with
 * WORKER_HEALTH_PORT, answers `GET /healthz` ({temporal, database}), `/readyz` (+ polling) and `/metrics` (core/worker-http.ts).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  setupObservability(config, 'worker');
  const logger = createLogger('worker', config.LOG_LEVEL);
  installProcessGuard(logger, config.UNCAUGHT_ERROR_POLICY);
  if (!config.DATABASE_URL) throw new Error('DATABASE_URL is required for a standalone worker.');
  const db = createDb(config.DATABASE_URL, { max: 20 });
  const address = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_DEV_PORT}`;
  const security = temporalSecurity(config); // read once: a wrong PEM path stops the worker here
  const stopping = new AbortController();
  installRuntimeLogger(logger, config.LOG_LEVEL, { metricsAddress: await pickTemporalMetricsAddress() });

  let client: Client | null = null;
  let running: RunningWorker | null = null;
  const outbox = new OutboxDispatcher({ db, temporal: () => client, logger });
  outbox.start();
  // What an outage left behind (a pending message without a workflow, a lock held by an ended turn): turn/sweeper.ts.
  const sweeper = new TurnSweeper({
    db,
    temporal: () => client,
    logger: logger.child({ component: 'sweeper' }),
    ...sweeperTimings(config),
    taskQueue: config.TEMPORAL_TASK_QUEUE,
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
      const connection = await NativeConnection.connect({ address, ...security });
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
