/** The api with all its routers and readiness checks, as both `npm start` and a standalone replica run it. */
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor, type ConnectionLike } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { AgentBackendClient } from '../core/protocol/backend-client.js';
import { tracingActive } from '../core/platform/tracing/index.js';
import { devDefaultSecrets, type Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import type { EventNotifier } from '../core/protocol/event-log.js';
import { createDefaultProviders } from '../core/domain/llm/providers/index.js';
import type { Logger } from '../core/platform/logger.js';
import type { TemporalSecurity } from '../core/platform/temporal-connection.js';
import { OutboxDispatcher } from '../core/domain/outbox.js';
import { createApiApp } from './app.js';
import { CredentialWatch } from './credential-watch.js';
import { createInnerLlmRouter } from './inner/llm.js';
import { innerAgentConfigRoutes } from './inner/agent-config.js';
import { innerExecutionContextRoutes } from './inner/execution-context-verify.js';
import { innerToolRoutes } from './inner/tools.js';
import { innerKnowledgeRoutes } from './inner/knowledge.js';
import { createEmbedder } from '../core/domain/knowledge/embed.js';

/** How long one readiness check may take before it counts as down. */
const READY_CHECK_MS = 2000;

/**
 * The api's Temporal connection: lazy (the api starts and serves PostgreSQL-only routes while Temporal is
 * unreachable; gRPC connects on first use and reconnects with a short backoff), and a request fails within
 * about half a second when Temporal is down (3 tries instead of the SDK's 10 over ~20 s), so a turn start
 * answers 503 + Retry-After promptly instead of hanging.
 */
export function lazyTemporalConnection(address: string, security: TemporalSecurity = {}): Connection {
  return Connection.lazy({
    address,
    ...security,
    channelArgs: { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 3000 },
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: 3 }))],
  });
}

/** Resolves true if `p` settles successfully within `ms`. */
function within(ms: number, p: () => Promise<unknown>): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p()
      .then(
        () => resolve(true),
        () => resolve(false),
      )
      .finally(() => clearTimeout(t));
  });
}

export function temporalReachable(connection: ConnectionLike): Promise<boolean> {
  return within(READY_CHECK_MS, () =>
    connection.withDeadline(Date.now() + READY_CHECK_MS, () => connection.workflowService.getSystemInfo({})),
  );
}

/**
 * Keeps probing Temporal in the background (every second while down, every 10 s while up) and logs each
 * change, so an operator sees when the api lost and regained it; the probe also keeps the lazy channel
 * reconnecting.
 */
function watchTemporal(connection: ConnectionLike, logger: Logger): () => void {
  let up: boolean | null = null;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = async () => {
    const now = await temporalReachable(connection);
    if (now !== up) {
      if (now) logger.info('temporal reachable');
      else logger.warn('temporal unreachable; the api keeps serving what needs only PostgreSQL and retries');
      up = now;
    }
    if (!stopped) timer = setTimeout(() => void tick(), now ? 10_000 : 1000);
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export function createWiredApi(deps: {
  db: Db;
  connection: ConnectionLike;
  /** True when `connection` is a NativeConnection a worker of this process polls with (eager start). */
  eagerStart?: boolean;
  notifier: EventNotifier;
  config: Config;
  logger: Logger;
  /** Where the agent backend is (known only after it started, in the dev stack). */
  agentBackendUrl: () => string;
}) {
  const { db, connection, notifier, config, logger } = deps;
  // Tracing on: a turn's workflow start carries the request's trace context in its headers (one trace per turn).
  const interceptors = tracingActive() ? { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } : undefined;
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, interceptors });
  const backend = new AgentBackendClient(deps.agentBackendUrl, config.AGENT_BACKEND_TOKEN);
  // Every api process delivers pending signals and cancels, its own and those of replicas that died.
  const outbox = new OutboxDispatcher({ db, temporal: () => temporal, logger });
  outbox.start();
  const unwatch = watchTemporal(connection, logger.child({ component: 'api' }));
  // A revoked app key's open streams end on every replica, whichever revoked it (issue 47).
  const credentials = new CredentialWatch({
    databaseUrl: config.DATABASE_URL!,
    db,
    logger: logger.child({ component: 'api' }),
    connectTimeoutMs: config.PG_LISTEN_CONNECT_TIMEOUT_MS,
  });
  // Its first attempt (never rejects; a failure is retried in the background): the caller awaits it before serving.
  const watchStarted = credentials.start();
  // One provider registry: model calls (inner LLM) and knowledge embeddings.
  const providers = createDefaultProviders(config);
  const embed = createEmbedder(providers);
  const app = createApiApp({
    db,
    backend,
    temporal,
    outbox,
    eagerStart: deps.eagerStart,
    notifier,
    credentials,
    embed,
    providers,
    config,
    logger: logger.child({ component: 'api' }),
    inner: [
      {
        path: '/inner/api/agent/llm',
        router: createInnerLlmRouter({
          db,
          config,
          logger,
          providers,
          maxJsonDepth: config.JSON_MAX_DEPTH,
          uploads: config,
          notifier,
        }),
      },
      {
        path: '/inner/api/knowledge',
        router: innerKnowledgeRoutes({
          db,
          embed,
          innerApiKey: config.INNER_API_KEY,
          signingKey: config.EXECUTION_CONTEXT_SIGNING_KEY,
          maxJsonDepth: config.JSON_MAX_DEPTH,
        }),
      },
      {
        path: '/inner/api/tools',
        router: innerToolRoutes({ db, config, logger: logger.child({ component: 'api' }) }),
      },
      {
        // Issue 27: a run's runtime layer is admitted only for the workspace its signed context and binding name.
        path: '/inner/api/agent/execution-context',
        router: innerExecutionContextRoutes({
          db,
          innerApiKey: config.INNER_API_KEY,
          signingKey: config.EXECUTION_CONTEXT_SIGNING_KEY,
          signingKeyIsDefault: devDefaultSecrets(config).includes('EXECUTION_CONTEXT_SIGNING_KEY'),
          maxJsonDepth: config.JSON_MAX_DEPTH,
        }),
      },
      {
        path: '/inner/api/agent-config',
        router: innerAgentConfigRoutes({
          db,
          innerApiKey: config.INNER_API_KEY,
          signingKey: config.EXECUTION_CONTEXT_SIGNING_KEY,
          maxJsonDepth: config.JSON_MAX_DEPTH,
        }),
      },
    ],
    ready: async () => {
      const [database, temporalUp, agentBackend] = await Promise.all([
        within(READY_CHECK_MS, () => db.$queryRaw`select 1`),
        temporalReachable(connection),
        within(READY_CHECK_MS, () =>
          fetch(`${deps.agentBackendUrl()}/healthz`, { signal: AbortSignal.timeout(READY_CHECK_MS) }).then((r) =>
            r.ok ? r : Promise.reject(new Error(String(r.status))),
          ),
        ),
      ]);
      // Not listening: a revoke would not end this replica's streams until it reconnects (api/credential-watch.ts).
      return { database, temporal: temporalUp, agent_backend: agentBackend, credential_watch: credentials.listening };
    },
  });
  /** Stops the background work (outbox dispatcher, Temporal and credential watches); the caller closes db and connection. */
  const stop = async () => {
    unwatch();
    await credentials.stop();
    await outbox.stop();
  };
  /**
   * Resolves once the credential watch's first attempt to listen is over (bounded by PG_LISTEN_CONNECT_TIMEOUT_MS):
   * await it before serving, so that an api that comes up listens before it takes streams; if it failed, this says
   * so and the api serves anyway (PostgreSQL-only outages must not keep it down) with /readyz 503 until it listens.
   */
  const started = async () => {
    await watchStarted;
    if (!credentials.listening)
      logger.warn('serving before the credential watch listens: /readyz reports credential_watch false until it does');
  };
  return { app, temporal, outbox, credentials, started, stop };
}
