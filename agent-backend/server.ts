/**
 * The agent backend service: the run protocol (docs/PROTOCOL.md §2) behind the backend bearer token on its TCP
 * listener, and the agent stub (docs/PROTOCOL.md §4) behind per-run stub tokens on a listener of its own, a unix
 * socket bind-mounted into the agent's sandbox (agent-backend/stub-server.ts): a sandboxed command reaches the stub
 * and nothing else (issue 27). Runs execute in this process; their events go to PostgreSQL so any replica can serve them.
 */
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../core/platform/config.js';
import type { Logger } from '../core/platform/logger.js';
import { createGuardedFetch } from '../core/platform/net/ssrf.js';
import type { RunLimits } from './composition.js';
import { jsonBody } from '../core/platform/json-guard.js';
import { HttpError } from './errors.js';
import { EventHub } from './events.js';
import { createInnerLlmCaller, type ModelCaller } from './model/inner-llm-model.js';
import { createKnowledgeClient } from './knowledge-client.js';
import { createRegistry, type ModuleRegistry } from './modules/registry.js';
import type { PluginToolResolver } from './modules/types.js';
import { createInnerToolResolver } from './inner-tool-resolver.js';
import { RunManager } from './run-manager.js';
import { registryRoutes } from './routes/registry.js';
import { opsRoutes } from './routes/ops.js';
import { traceRequests } from '../core/platform/tracing/index.js';
import { runRoutes } from './routes/runs.js';
import { stubRoutes } from './routes/stub.js';
import { startStubServer, stubSocketPath } from './stub-server.js';
import { createWorkspaceAuthorizer } from './workspace-authorizer.js';
import { Sandbox, type IsolationReport } from './workspace/sandbox.js';
import { createWorkspaceStore } from './workspace/store.js';
import { isConnectionError, type PgRunStore } from './store.js';

export interface AgentBackendOptions {
  /** Identifies this process as the owner of the runs it starts. */
  instanceId: string;
  /** How often the owner renews its runs' lease (default AGENT_RUN_LEASE_RENEW_MS). */
  heartbeatMs: number;
  /** A running run whose owner has not heartbeated for this long fails with `backend_restarted` (AGENT_RUN_LEASE_TTL_MS). */
  staleAfterMs: number;
  /** How often this replica looks for lapsed leases (AGENT_RUN_REAP_INTERVAL_MS). */
  reapIntervalMs: number;
  retentionIntervalMs: number;
  /** SSE poll fallback when no NOTIFY arrives. */
  pollMs: number;
  keepAliveMs: number;
}

export interface AgentBackendDeps {
  config: Config;
  logger: Logger;
  store: PgRunStore;
  /** Model factory; default: the api's inner LLM endpoint at `config.apiUrl`. */
  llm?: ModelCaller;
  toolResolver?: PluginToolResolver;
  registry?: ModuleRegistry;
  /** fetch used by the agent stub (and the default model). */
  fetch?: typeof fetch;
  options?: Partial<AgentBackendOptions>;
}

export interface RunningBackend {
  url: string;
  port: number;
  /** The agent stub's unix socket (the only way to the stub; bind-mounted into the sandbox). */
  stubSocket: string;
  /** The isolation in force for shell commands (as /readyz reports it). */
  isolation: () => IsolationReport;
  /** `abandonRuns` simulates a crash: running runs are left as they are (for the restart path). */
  close(opts?: { abandonRuns?: boolean }): Promise<void>;
}

/**
 * The backend in its parts: options, the run manager, the module registry, the HTTP app and the listeners. Nothing
 * listens or runs in the background until `start`.
 */
export function createAgentBackend(deps: AgentBackendDeps) {
  const { config, logger, store } = deps;
  const options = backendOptions(deps);
  const limits: RunLimits = {
    maxModelRequests: config.RUN_MAX_MODEL_REQUESTS,
    maxToolCalls: config.RUN_MAX_TOOL_CALLS,
    maxWallClockMs: config.RUN_MAX_WALL_CLOCK_MS,
  };
  const hub = new EventHub();
  // The Local runtime (agent workspaces + shellctl); runtime/shell are unavailable without SHELLCTL_AUTH_TOKEN.
  const sandbox = new Sandbox(config, logger.child({ component: 'sandbox' }));
  const runs = createRunManager(deps, options, hub);
  const registry = deps.registry ?? createModuleRegistry(deps, sandbox);
  const app = backendApp(deps, { options, runs, registry, limits, sandbox });
  // The stub is not on this listener: only its socket serves it (nothing outside the sandbox needs it).
  const stub = stubRoutes({
    store,
    logger,
    apiUrl: config.apiUrl,
    innerApiKey: config.INNER_API_KEY,
    tokenSecret: config.AGENT_BACKEND_TOKEN,
    fetch: deps.fetch,
    maxJsonDepth: config.JSON_MAX_DEPTH,
  });

  let background = false;
  const startBackground = async () => {
    if (background) return;
    background = true;
    store.onReconnect(() => void runs.onStoreReconnected());
    await store.listen({
      onEvents: (runId, seq) => hub.notify(runId, seq),
      onCancel: (runId) =>
        void runs.onRemoteCancel(runId).catch((err) => logger.warn({ err, runId }, 'agent backend: cancel delivery failed')),
      onReconnect: () => void runs.onStoreReconnected(),
    });
    runs.startBackground();
  };

  return {
    app,
    runs,
    instanceId: options.instanceId,
    async start(port = config.AGENT_BACKEND_PORT, host = config.AGENT_BACKEND_HOST): Promise<RunningBackend> {
      await startBackground();
      return listen(deps, { app, stub, runs, sandbox, instanceId: options.instanceId }, port, host);
    },
  };
}

function backendOptions({ config, options }: AgentBackendDeps): AgentBackendOptions {
  return {
    instanceId: `${process.pid}-${crypto.randomUUID()}`,
    // The run lease (issue 30; AGENT_RUN_LEASE_*, core/platform/config.ts): by default renewed every second on the lease's own
    // connection, lapsed after 5 s, checked every second by every replica: a dead backend's runs fail within ~6 s of
    // its last renewal. A slow owner (a long model call, a GC pause, a busy pool) keeps renewing; a database outage
    // suspends the judgement (run-manager.ts).
    heartbeatMs: config.AGENT_RUN_LEASE_RENEW_MS,
    staleAfterMs: config.AGENT_RUN_LEASE_TTL_MS,
    reapIntervalMs: config.AGENT_RUN_REAP_INTERVAL_MS,
    retentionIntervalMs: 3_600_000,
    pollMs: 1_000,
    keepAliveMs: config.SSE_PING_MS,
    ...options,
  };
}

/** Runs in this process, their model calls through the api's inner LLM endpoint, provider tools through the api. */
function createRunManager(deps: AgentBackendDeps, options: AgentBackendOptions, hub: EventHub): RunManager {
  const { config, logger, store } = deps;
  const modelCaller =
    deps.llm ?? createInnerLlmCaller({ apiUrl: config.apiUrl, innerApiKey: config.INNER_API_KEY, fetch: deps.fetch, logger });
  // Provider tools (API, MCP) are called by the api, which holds their credentials (docs/tools.md).
  const toolResolver =
    deps.toolResolver ??
    createInnerToolResolver({
      apiUrl: config.apiUrl,
      innerApiKey: config.INNER_API_KEY,
      timeoutMs: config.TOOL_TIMEOUT_MS,
      fetch: deps.fetch,
      logger,
    });
  return new RunManager(store, hub, modelCaller, toolResolver, logger, {
    instanceId: options.instanceId,
    coalesce: { ms: config.BACKEND_DELTA_COALESCE_MS, chars: config.BACKEND_DELTA_COALESCE_CHARS },
    heartbeatMs: options.heartbeatMs,
    staleAfterMs: options.staleAfterMs,
    reapIntervalMs: options.reapIntervalMs,
    retentionHours: config.RUN_RETENTION_HOURS,
    retentionIntervalMs: options.retentionIntervalMs,
  });
}

/** The layers a composition can name, with what they reach: the sandbox, knowledge, workspaces and the builtin shelf. */
function createModuleRegistry({ config, logger, fetch }: AgentBackendDeps, sandbox: Sandbox): ModuleRegistry {
  const knowledge = createKnowledgeClient({ apiUrl: config.apiUrl, innerApiKey: config.INNER_API_KEY, fetch });
  const workspaces = createWorkspaceAuthorizer({ apiUrl: config.apiUrl, innerApiKey: config.INNER_API_KEY, fetch });
  // The builtin shelf's http_request: the SSRF guard with its own switch, the api's tool limits (docs/tools.md).
  const builtins = {
    fetch: createGuardedFetch({ allowPrivate: config.HTTP_REQUEST_ALLOW_PRIVATE_NETWORK }),
    timeoutMs: config.TOOL_TIMEOUT_MS,
    maxResponseBytes: config.TOOL_MAX_RESPONSE_BYTES,
    logger: logger.child({ component: 'builtin_tools' }),
  };
  const workspaceStore = createWorkspaceStore(config, logger.child({ component: 'workspace-store' }));
  return createRegistry([], { sandbox, knowledge, workspaces, workspaceStore, builtins });
}

/** The TCP listener's routes: probes, then the run protocol behind the backend token, then 404 and the error handler. */
function backendApp(
  { config, logger, store }: AgentBackendDeps,
  parts: { options: AgentBackendOptions; runs: RunManager; registry: ModuleRegistry; limits: RunLimits; sandbox: Sandbox },
): express.Express {
  const { options, runs, registry, limits, sandbox } = parts;
  const app = express();
  app.disable('x-powered-by');
  // A run's spans join the turn's trace: POST /runs carries the runAgent activity's traceparent (tracing on).
  app.use(traceRequests('agent_backend'));
  // No body is parsed before its caller is authenticated (issue 17 M2): /runs checks the backend token,
  // the stub (on its socket) its per-run token, each then parses with a size and a nesting-depth limit.
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, instance_id: options.instanceId, active_runs: runs.activeRunIds.length });
  });
  app.use(
    opsRoutes({ store, apiUrl: config.apiUrl, activeRuns: () => runs.activeRunIds.length, isolation: () => sandbox.isolationReport() }),
  );
  app.use(
    ['/runs', '/modules', '/compositions'],
    bearerAuth(config.AGENT_BACKEND_TOKEN),
    jsonBody({ limit: config.AGENT_BACKEND_MAX_BODY_BYTES, maxDepth: config.JSON_MAX_DEPTH, rejectNul: true }),
  );
  app.use(registryRoutes({ registry, limits }));
  app.use(
    runRoutes({
      store,
      runs,
      registry,
      limits,
      logger,
      instanceId: options.instanceId,
      pollMs: options.pollMs,
      keepAliveMs: options.keepAliveMs,
      maxRuns: config.MAX_RUNS_PER_BACKEND,
    }),
  );
  app.use((_req: Request, _res: Response, next: NextFunction) => next(new HttpError(404, 'not_found', 'no such route')));
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const e = toHttpError(err);
    // At capacity is this process's own state, expected under load and retried by the caller: no warning per refusal.
    if (e.code === 'backend_busy') logger.debug('agent backend: run refused, at capacity');
    else if (e.status === 503) logger.warn({ err: (err as Error)?.message }, 'agent backend: request failed, dependency unavailable');
    else if (e.status >= 500) logger.error({ err }, 'agent backend: request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    if (e.status === 503) res.set('Retry-After', String(RETRY_AFTER_S));
    res.status(e.status).json({ code: e.code, message: e.message, status: e.status });
  });
  return app;
}

/** The TCP listener, then the stub's socket (the sandbox is told where it is), then the shell prepared in the background. */
async function listen(
  { config, logger }: AgentBackendDeps,
  parts: { app: express.Express; stub: express.Router; runs: RunManager; sandbox: Sandbox; instanceId: string },
  port: number,
  host: string,
): Promise<RunningBackend> {
  const { app, stub, runs, sandbox, instanceId } = parts;
  const server = app.listen(port, host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const actual = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${actual}`;
  let stubServer: Awaited<ReturnType<typeof startStubServer>>;
  try {
    stubServer = await startStubServer({
      router: stub,
      socketPath: stubSocketPath({ explicit: config.AGENT_STUB_SOCKET, dataDir: config.dataDir, port: actual }),
      logger,
      privateDir: !config.AGENT_STUB_SOCKET,
    });
  } catch (err) {
    server.close();
    throw err;
  }
  logger.info({ url, stubSocket: stubServer.socketPath, instanceId }, 'agent backend listening');
  sandbox.setStubSocket(stubServer.socketPath);
  if (sandbox.unavailableReason) logger.info(`agent workspace: runtime/shell unavailable: ${sandbox.unavailableReason}`);
  else
    void sandbox
      .prepare()
      .catch((err: unknown) =>
        logger.error({ err: (err as Error).message }, 'agent workspace: shellctl is not ready; shell runs will fail until it is'),
      );
  return {
    url,
    port: actual,
    stubSocket: stubServer.socketPath,
    isolation: () => sandbox.isolationReport(),
    close: async (opts = {}) => {
      server.close();
      server.closeAllConnections();
      const stubClosed = stubServer.close();
      await runs.shutdown(opts.abandonRuns ? 'abandon' : 'graceful');
      await stubClosed;
    },
  };
}

export type AgentBackend = ReturnType<typeof createAgentBackend>;

function bearerAuth(token: string) {
  const expected = Buffer.from(token);
  return (req: Request, _res: Response, next: NextFunction) => {
    const m = /^Bearer\s+(.+)$/i.exec(req.get('authorization') ?? '');
    const given = Buffer.from(m ? m[1].trim() : '');
    if (given.length === expected.length && crypto.timingSafeEqual(given, expected)) return next();
    next(new HttpError(401, 'unauthorized', 'a valid backend bearer token is required'));
  };
}

/** Seconds a client should wait before retrying a request that met a database outage. */
const RETRY_AFTER_S = 2;

function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  // Nothing was half-written: each route's write is one statement (or none happened).
  if (isConnectionError(err)) return new HttpError(503, 'service_unavailable', 'the run store (PostgreSQL) is unreachable; retry shortly');
  const e = err as { status?: number; type?: string; message?: string };
  if (e?.type === 'entity.parse.failed') return new HttpError(400, 'invalid_request', 'the request body is not valid JSON');
  if (e?.type === 'entity.too.large') return new HttpError(413, 'payload_too_large', 'the request body is too large');
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500)
    return new HttpError(e.status, 'invalid_request', e.message ?? 'bad request');
  return new HttpError(500, 'internal_error', 'internal error');
}
