/**
 * The worker's library parts: startWorker (a Temporal worker running the turn workflows and their activities, plus
 * the webhook dispatcher), the SDK runtime's logger, and where the workflow code is read from. worker.ts is the
 * standalone process around them; the dev stack (stack/start-stack.ts) and the bench start workers through here.
 */
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createActivities } from '../activities/index.js';
import { createScheduleActivities } from '../activities/scheduled-turn.js';
import { scheduledTurnCreator } from '../api/turns/scheduled.js';
import { createConversationQueueActivities } from '../activities/conversation-queue.js';
import { createWebhookActivities } from '../activities/webhooks.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';
import { AgentBackendClient } from '../core/protocol/backend-client.js';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import { createDefaultProviders } from '../core/domain/llm/providers/index.js';
import { resolveTenantModel } from '../core/domain/llm/tenant-model.js';
import { ensureTurnSearchAttributes } from './search-attribute-registry.js';
import type { Logger } from '../core/platform/logger.js';
import { isCompiled } from '../core/platform/project-root.js';
import { explainTemporalConnectError, temporalSecurity } from '../core/platform/temporal-connection.js';
import { temporalTelemetryOptions } from '../core/platform/metrics/temporal.js';
import { workerTelemetryOptions } from './telemetry.js';
import { cachedWorkflowBundle } from './workflow-bundle-cache.js';

/** Where worker.ts runs from (the project root, or dist/ when compiled): this file is one folder below it. */
const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const compiled = isCompiled(import.meta.url);

export const WORKFLOWS_PATH = path.join(here, 'workflows', compiled ? 'index.js' : 'index.ts');

/**
 * The compiled build ships the workflow code already bundled (scripts/build.ts, from the same compiled
 * workflows/): a production worker starts without webpack work and runs exactly the code that was built and
 * tested. From sources (tsx) the worker bundles workflows/ itself at start, as before. This is the bundle with every
 * interceptor module; beside it are those with fewer (worker/telemetry.ts PREBUILT_BUNDLES), loaded by what is on.
 */
export const WORKFLOW_BUNDLE_PATH = path.join(here, 'workflow-bundle.js');

type WorkflowCode = { workflowBundle: { codePath: string } | { code: string } } | { workflowsPath: string };

/**
 * The workflow code and the telemetry options that go with it. From sources with WORKER_WORKFLOW_BUNDLE_CACHE_DIR (the
 * test suite): the bundle of workflows/ with the interceptor modules of what is on, reused from that directory while
 * its inputs are unchanged (worker/workflow-bundle-cache.ts); the bundle holds those modules, so they leave the options.
 */
async function workflowCodeAndTelemetry(
  config: Config,
  logger: Logger,
): Promise<WorkflowCode & Pick<WorkerOptions, 'interceptors' | 'sinks'>> {
  const { prebuiltBundle, ...telemetry } = workerTelemetryOptions({ prebuiltBundle: compiled });
  const cacheDir = config.WORKER_WORKFLOW_BUNDLE_CACHE_DIR;
  if (compiled || !cacheDir) return { ...workflowCode(prebuiltBundle), ...telemetry };
  const { workflowModules = [], ...interceptors } = telemetry.interceptors ?? {};
  const { code } = await cachedWorkflowBundle({
    dir: cacheDir,
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: workflowModules,
    log: (m) => logger.info(m),
  });
  return { workflowBundle: { code }, ...telemetry, interceptors };
}

function workflowCode(prebuiltBundle: string | undefined): WorkflowCode {
  if (!compiled) return { workflowsPath: WORKFLOWS_PATH };
  const codePath = path.join(here, prebuiltBundle ?? path.basename(WORKFLOW_BUNDLE_PATH));
  if (!fs.existsSync(codePath)) throw new Error(`${codePath} is missing: run \`npm run build\` (it bundles the workflows).`);
  return { workflowBundle: { codePath } };
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
  /** `metricsAddress`: where the SDK's Prometheus exporter listens (core/platform/metrics/temporal.ts); the worker's /metrics serves it. */
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

/** The worker's connection to Temporal with the TEMPORAL_TLS_* settings; a refused handshake says which setting. */
export async function connectWorkerTemporal(address: string, config: Config): Promise<NativeConnection> {
  return NativeConnection.connect({ address, ...temporalSecurity(config) }).catch((err: unknown) => {
    throw explainTemporalConnectError(err, address, config);
  });
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
  const connection = opts.connection ?? (await connectWorkerTemporal(opts.temporalAddress, config));
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
    // Turn counts (metrics) and the turn's trace through workflow and activities (tracing), when on.
    ...(await workflowCodeAndTelemetry(config, logger)),
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
      ...createScheduleActivities({
        db,
        logger: logger.child({ component: 'schedules' }),
        // A scheduled run's turn is created by the chat request's records code (api/turns/scheduled.ts).
        createTurn: scheduledTurnCreator({ db, config }),
      }),
      ...createWebhookActivities({ db, config, logger: logger.child({ component: 'webhooks' }) }),
      // Multitask strategies: the conversation queue's claim (workflows/conversation-queue.ts).
      ...createConversationQueueActivities({ db, config, logger: logger.child({ component: 'conversation-queue' }) }),
    },
    // Slots (docs/configuration.md): a turn in flight holds one activity slot (runAgent) for its whole run, so the
    // activity slots of all workers are also the default admission cap of the api (api/turns/admission.ts).
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: config.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    ...(config.WORKER_MAX_CACHED_WORKFLOWS !== undefined ? { maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS } : {}),
    // Keep the stuck-detector quiet and shut down fast in dev; runAgent reattaches on retry anyway.
    shutdownGraceTime: '3 seconds',
  });
  const run = worker.run();
  // Every worker starts the deliverWebhook workflows of the deliveries turn outcomes wrote (worker/webhook-dispatcher.ts).
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
