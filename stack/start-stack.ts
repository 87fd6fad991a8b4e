/**
 * Brings up the whole system on one machine: embedded PostgreSQL (unless DATABASE_URL), migrations,
 * demo data, the Temporal dev server with its UI (unless TEMPORAL_ADDRESS), the api, the reference agent
 * backend (unless AGENT_BACKEND_URL) and a worker. Used by `npm start`, the integration tests and the
 * benchmarks, so all three run exactly the same wiring.
 */
import type { ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client, ConnectionLike } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { createAgentBackend } from '../agent-backend/server.js';
import { PgRunStore, StoreUnavailableError } from '../agent-backend/store.js';
import { createWiredApi, lazyTemporalConnection } from '../api/wire.js';
import { EnvSchema, type Config } from '../core/platform/config.js';
import { createDb, type Db } from '../core/platform/db.js';
import { startEmbeddedPg, type EmbeddedPg } from '../core/platform/embedded-pg.js';
import { EventNotifier } from '../core/protocol/event-log.js';
import type { Logger } from '../core/platform/logger.js';
import type { OutboxDispatcher } from '../core/domain/outbox.js';
import { sweeperTimings, TurnSweeper, bucketSweep } from '../worker/sweeper.js';
import { temporalSecurity } from '../core/platform/temporal-connection.js';
import { applyMigrations } from '../core/platform/migrate.js';
import { enableDemoHands, ensureDemoData, type DemoData } from '../core/domain/seed.js';
import { demoSoulConfig } from '../core/domain/soul.js';
import { demoAgentModel } from '../core/domain/llm/providers/index.js';
import { installRuntimeLogger, startWorker, type RunningWorker } from '../worker/start.js';
import { pickTemporalMetricsAddress } from '../core/platform/metrics/temporal.js';
import { setupObservability } from '../core/platform/observability.js';
import { startWorkerHttp } from '../worker/http.js';
import { locateTemporal, startTemporalDevServer, type DevServer } from './temporal.js';
import { createHttpServer } from '../core/platform/http-server.js';
import { ipcReady, ServiceProcess } from './service-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The per-key/per-user limits (docs/security.md) out of the way, for the test and bench stacks where many turns and
 * streams run as one user; test/security/l6-rate-limits.test.ts sets its own.
 */
export const ONE_CLIENT_LIMITS = {
  RATE_LIMIT_KEY_PER_MINUTE: 1_000_000,
  RATE_LIMIT_USER_PER_MINUTE: 1_000_000,
  STREAMS_PER_KEY: 1_000_000,
  STREAMS_PER_USER: 1_000_000,
  TURNS_PER_KEY: 1_000_000,
  TURNS_PER_USER: 1_000_000,
} as const;

/** How long a stack's agent backend waits for PostgreSQL to accept its first connections. */
const STORE_INIT_WAIT_MS = 30_000;

export interface StackOptions {
  config: Config;
  logger: Logger;
  /** Run the worker in this process, as a child process (killable), or not at all. */
  worker?: 'in-process' | 'child' | 'none';
  seed?: boolean;
  /** Database name inside embedded PostgreSQL. */
  databaseName?: string;
  headlessTemporal?: boolean;
  /** A demo agent created now gets runtime and shell on (npm start, when this host can isolate commands: issue 27). */
  demoHands?: boolean;
  /**
   * Run the turn sweeper (worker/sweeper.ts) beside the worker, as a standalone worker does: `npm start`. Test stacks
   * leave it off so a test's deliberately stranded rows stay as the test left them (test/unit/turn-sweeper.test.ts
   * and the faults suite run it themselves).
   */
  sweeper?: boolean;
}

export interface Stack {
  config: Config;
  db: Db;
  databaseUrl: string;
  apiUrl: string;
  agentBackendUrl: string;
  /** The in-process agent backend's stub socket (the stub has no TCP listener; null with AGENT_BACKEND_URL). */
  agentStubSocket: string | null;
  temporalAddress: string;
  temporalUiUrl: string | null;
  temporal: Client;
  /** The api's outbox dispatcher (signals and cancels owed to Temporal). */
  outbox: OutboxDispatcher;
  demo: DemoData | null;
  worker: RunningWorker | null;
  /** The in-process worker's /healthz, /readyz and /metrics (null without one). */
  workerHttpUrl: string | null;
  workerChild: ChildProcess | null;
  /** Starts a worker child process (after a kill). */
  startWorkerChild: () => Promise<ChildProcess>;
  /** Stops everything this stack started, in order; with `drain`, turns in flight first get to finish. */
  stop: (opts?: StopOptions) => Promise<void>;
}

export interface StopOptions {
  /**
   * Turns in flight (runs in this process's agent backend, activities in this process's worker) get this
   * long to finish before anything stops; runs still going after it are stopped the way a user's stop
   * ends them (the turn ends `stopped` with its partial answer and usage), never failed.
   */
  drainMs?: number;
  /** Aborting it skips what is left of the drain (a second Ctrl-C). */
  skipDrain?: AbortSignal;
  /** Told how many turns are in flight when the drain starts (only when there are some). */
  onDrain?: (inFlight: number) => void;
}

/** How long startStack waits for the api's credential watch to listen before it hands the stack out anyway. */
const STACK_WATCH_WAIT_MS = 60_000;

/** How long runs stopped at the end of a drain get to confirm (run_cancelled) and be committed. */
const DRAIN_STOP_CONFIRM_MS = 5_000;

/** A phase's stop steps: run in reverse order by the stack's stop(). */
type Stops = (() => Promise<unknown>)[];

/**
 * The stack in phases: database (migrated), demo data, Temporal, api, agent backend, worker, and the drain that
 * stop() runs first. Each phase pushes its stop steps and hands the next one the addresses it resolved; a start
 * that fails stops what it started, in reverse.
 */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const { logger } = opts;
  let config = opts.config;
  // Before any client, worker or server exists: they read whether metrics and tracing are on.
  setupObservability(config, 'stack');
  const stops: Stops = [];
  let drain: ((opts: StopOptions) => Promise<void>) | null = null;
  const stop = async (opts: StopOptions = {}) => {
    if (drain && opts.drainMs) await drain(opts).catch((err) => logger.warn({ err: (err as Error).message }, 'drain failed'));
    for (const s of stops.reverse()) await s().catch((err) => logger.warn({ err: (err as Error).message }, 'stop step failed'));
  };
  try {
    const { databaseUrl, db } = await startDatabase(config, opts, stops);
    config = { ...config, DATABASE_URL: databaseUrl };
    const demo = await seedDemo(db, config, opts);
    const temporalPart = await startTemporal(config, opts, stops);
    const { temporalAddress, nativeConnection } = temporalPart;
    config = temporalPart.config;
    const api = await startApi(db, config, opts, temporalPart, stops);
    config = { ...config, apiUrl: api.apiUrl };
    const backend = await startInProcessBackend(config, opts, stops);
    const agentBackendUrl = backend?.url ?? config.agentBackendUrl;
    api.backendHolder.url = agentBackendUrl;
    config = { ...config, agentBackendUrl, AGENT_BACKEND_URL: agentBackendUrl };

    // worker: in this process (sharing the api's NativeConnection), a child process (killable), or none
    const workerChild = workerChildProcess(config);
    const startWorkerChild = async () => {
      await workerChild.start();
      stack.workerChild = workerChild.child;
      return workerChild.child!;
    };
    const stack: Stack = {
      config,
      db,
      databaseUrl,
      apiUrl: api.apiUrl,
      agentBackendUrl,
      agentStubSocket: backend?.stubSocket ?? null,
      temporalAddress,
      temporalUiUrl: temporalPart.dev?.uiUrl ?? null,
      temporal: api.temporal,
      outbox: api.outbox,
      demo,
      worker: null,
      workerHttpUrl: null,
      workerChild: null,
      startWorkerChild,
      stop,
    };
    if (nativeConnection) {
      const inProcess = await startInProcessWorker(db, config, opts, nativeConnection, api.temporal, stops);
      stack.worker = inProcess.worker;
      stack.workerHttpUrl = inProcess.httpUrl;
    } else if (opts.worker === 'child') {
      await startWorkerChild();
      // The worker drains its activities on SIGTERM; SIGKILL only when that hangs.
      stops.push(() => workerChild.stop('SIGTERM', config.SHUTDOWN_DRAIN_MS + 60_000));
    }
    drain = drainTurns(logger, backend?.runs ?? null, () => stack.worker);
    // Ready means what the api's /readyz says: a stack handed out before its credential watch listens would let a
    // revoked key's streams go on (a test's revoke, a user's). Its first attempt failed (a loaded machine, a slow
    // server) and is being retried: wait for it, told by the watch, not by polling.
    if (!(await api.credentials.whenListening(STACK_WATCH_WAIT_MS)))
      logger.warn({ waited_ms: STACK_WATCH_WAIT_MS }, 'the credential watch still does not listen; serving anyway (/readyz 503)');
    return stack;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Embedded PostgreSQL (unless DATABASE_URL), the migrations, and the stack's pool. */
async function startDatabase(config: Config, opts: StackOptions, stops: Stops): Promise<{ databaseUrl: string; db: Db }> {
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const pg: EmbeddedPg = await startEmbeddedPg({
      dir: path.join(config.dataDir, 'pg'),
      port: config.EMBEDDED_PG_PORT,
      durable: config.EMBEDDED_PG_DURABLE,
      // A generated password, kept in DATA_DIR (issue 17 L7), not postgres/postgres.
      passwordFile: path.join(config.dataDir, 'pg-password'),
    });
    stops.push(() => pg.stop());
    const name = opts.databaseName ?? 'dify_agent';
    await pg.ensureDatabase(name);
    databaseUrl = pg.url(name);
  }
  const migrated = await applyMigrations(databaseUrl);
  if (migrated.applied.length) opts.logger.info({ applied: migrated.applied }, 'migrations applied');
  const db = createDb(databaseUrl, { max: 20, preparedStatements: config.HOT_SQL_PREPARED });
  stops.push(() => db.$disconnect());
  return { databaseUrl, db };
}

/** The demo tenant, app and agent (unless `seed: false`), with hands when this host isolates commands. */
async function seedDemo(db: Db, config: Config, opts: StackOptions): Promise<DemoData | null> {
  const { logger } = opts;
  // With a system-hosted provider configured (OPENAI_API_KEY, ANTHROPIC_API_KEY, …, docs/models.md), the demo agent is
  // created on its model instead of the demo one.
  const realModel = demoAgentModel(config);
  const demoSoul = demoSoulConfig(realModel);
  if (opts.demoHands) {
    demoSoul.runtime = { enabled: true };
    demoSoul.shell = { ...demoSoul.shell, enabled: true };
    demoSoul.features.opening_statement = 'Hi! I am the demo agent. Try "/sh ls -la", "/calc 6*7" or "/ask What is your name?".';
    if (!realModel) demoSoul.features.suggested_questions = ['/sh ls -la', ...demoSoul.features.suggested_questions];
  }
  const demo = opts.seed === false ? null : await ensureDemoData(db, { dataDir: config.dataDir, soul: demoSoul });
  // A demo agent seeded before hands were on by default, and never edited since, gets them now.
  if (demo && opts.demoHands && (await enableDemoHands(db, demo, { untouched: demoSoulConfig(realModel), withHands: demoSoul })))
    logger.info({ agentId: demo.agentId }, 'demo agent: runtime and shell turned on (a new version published)');
  return demo;
}

interface TemporalPart {
  config: Config;
  dev: DevServer | null;
  temporalAddress: string;
  inProcessWorker: boolean;
  nativeConnection: NativeConnection | null;
  connection: ConnectionLike;
}

/** The Temporal dev server (unless TEMPORAL_ADDRESS) and the connection the api (and an in-process worker) use. */
async function startTemporal(config: Config, opts: StackOptions, stops: Stops): Promise<TemporalPart> {
  const { logger } = opts;
  let dev: DevServer | null = null;
  let temporalAddress = config.TEMPORAL_ADDRESS;
  if (!temporalAddress) {
    const bin = await locateTemporal({ explicit: config.TEMPORAL_CLI_PATH, log: (m) => logger.info(m) });
    const started = await startTemporalDevServer({
      bin,
      dataDir: config.dataDir,
      port: config.TEMPORAL_DEV_PORT,
      uiPort: config.TEMPORAL_UI_PORT,
      headless: opts.headlessTemporal,
    });
    dev = started;
    stops.push(() => started.stop());
    temporalAddress = dev.address;
  }
  // With the worker in this process, the api's client and the worker share one NativeConnection, so
  // turns start eagerly: the server returns the first workflow task in the start response to this
  // worker instead of routing it through matching (bench/README.md). Otherwise a lazy client that
  // starts even while Temporal is unreachable and reconnects quickly after a restart (api/wire.ts).
  const inProcessWorker = (opts.worker ?? 'in-process') === 'in-process';
  // The stack stops its worker itself (stop(): drain, then in order), not at the SDK's first signal.
  if (inProcessWorker)
    installRuntimeLogger(logger.child({ component: 'worker' }), config.LOG_LEVEL, {
      ownsSignals: true,
      metricsAddress: await pickTemporalMetricsAddress(),
    });
  // TLS / API key only towards an external Temporal (TEMPORAL_ADDRESS); the dev server started here speaks plain gRPC.
  const security = dev ? {} : temporalSecurity(config);
  const nativeConnection = inProcessWorker ? await NativeConnection.connect({ address: temporalAddress, ...security }) : null;
  const connection: ConnectionLike = nativeConnection ?? lazyTemporalConnection(temporalAddress, security);
  stops.push(() => connection.close());
  // The studio links each turn to its workflow in the UI of the dev server started here (unless one is configured).
  const withTemporal: Config = {
    ...config,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_UI_URL: config.TEMPORAL_UI_URL ?? (dev && !opts.headlessTemporal ? dev.uiUrl : undefined),
  };
  return { config: withTemporal, dev, temporalAddress, inProcessWorker, nativeConnection, connection };
}

/** The api, listening before the agent backend starts (the backend calls back into it). */
async function startApi(db: Db, config: Config, opts: StackOptions, t: TemporalPart, stops: Stops) {
  const { logger } = opts;
  const notifier = new EventNotifier(config.DATABASE_URL!, logger, config.PG_LISTEN_CONNECT_TIMEOUT_MS);
  await notifier.start();
  stops.push(() => notifier.stop());
  // The agent backend's address is known only after its phase: the api reads it through this holder.
  const backendHolder: { url: string } = { url: config.agentBackendUrl };
  const {
    app,
    temporal,
    outbox,
    credentials,
    started,
    stop: stopApiBackground,
  } = createWiredApi({
    db,
    connection: t.connection,
    eagerStart: t.inProcessWorker,
    notifier,
    config,
    logger,
    agentBackendUrl: () => backendHolder.url,
  });
  stops.push(stopApiBackground);
  await started();
  const server = createHttpServer(app, config).listen(config.API_PORT, config.API_HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  stops.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  const apiUrl = config.API_INTERNAL_URL ?? `http://${config.API_HOST}:${(server.address() as AddressInfo).port}`;
  return { apiUrl, temporal, outbox, credentials, backendHolder };
}

interface BackendRuns {
  activeRunIds: string[];
  cancelLocal: (runId: string, reason: string | null, message: string | null) => boolean;
}

/** The reference agent backend in this process (null with AGENT_BACKEND_URL: an external one). */
async function startInProcessBackend(
  config: Config,
  opts: StackOptions,
  stops: Stops,
): Promise<{ url: string; stubSocket: string | null; runs: BackendRuns } | null> {
  if (config.AGENT_BACKEND_URL) return null;
  const { logger } = opts;
  const store = new PgRunStore(config.DATABASE_URL!, logger.child({ component: 'agent-backend' }));
  // A busy PostgreSQL may take longer than one connect timeout to accept (a loaded box, several stacks starting
  // at once): wait for it like agent-backend/main.ts does, for up to STORE_INIT_WAIT_MS, rather than fail the start.
  for (let delay = 250, deadline = Date.now() + STORE_INIT_WAIT_MS; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      await store.init();
      break;
    } catch (err) {
      if (!(err instanceof StoreUnavailableError) || Date.now() + delay > deadline) throw err;
      logger.warn({ err: err.message, retry_in_ms: delay }, 'agent backend: PostgreSQL not accepting yet, waiting');
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  stops.push(() => store.close());
  const backend = createAgentBackend({ config, logger: logger.child({ component: 'agent-backend' }), store });
  const running = await backend.start(config.AGENT_BACKEND_PORT, config.AGENT_BACKEND_HOST);
  stops.push(() => running.close());
  return { url: running.url, stubSocket: running.stubSocket, runs: backend.runs };
}

/** The worker on the api's NativeConnection, its health/readiness/metrics port, and (npm start) the turn sweeper. */
async function startInProcessWorker(
  db: Db,
  config: Config,
  opts: StackOptions,
  connection: NativeConnection,
  temporal: Client,
  stops: Stops,
): Promise<{ worker: RunningWorker; httpUrl: string }> {
  const { logger } = opts;
  const worker = await startWorker({
    config,
    db,
    logger: logger.child({ component: 'worker' }),
    temporalAddress: config.TEMPORAL_ADDRESS!,
    connection,
  });
  stops.push(() => worker.shutdown());
  // The in-process worker's own health/readiness/metrics port, as a standalone worker has (worker/http.ts).
  const http = await startWorkerHttp(
    { db, temporal: () => temporal, worker: () => worker.worker, logger: logger.child({ component: 'worker' }) },
    config.WORKER_HEALTH_PORT ?? 0,
    config.WORKER_HEALTH_HOST,
  );
  stops.push(() => http.close());
  if (opts.sweeper) {
    const sweeper = new TurnSweeper({
      db,
      temporal: () => temporal,
      logger: logger.child({ component: 'sweeper' }),
      ...sweeperTimings(config),
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workspacesDir: config.workspacesDir,
      bucket: bucketSweep(config),
    });
    sweeper.start();
    stops.push(() => sweeper.stop());
  }
  return { worker, httpUrl: http.url };
}

/**
 * The worker as a child process (`worker: 'child'`, and after a test killed it): it reads the same configuration
 * this stack runs with (resolved addresses included); its log goes to DATA_DIR/worker-child.log.
 */
function workerChildProcess(config: Config): ServiceProcess {
  return new ServiceProcess(
    'worker-child',
    ['--import', 'tsx', path.join(ROOT, 'worker.ts')],
    () => ({
      ...process.env,
      ...configToEnv(config),
      DATABASE_URL: config.DATABASE_URL,
      TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS,
      AGENT_BACKEND_URL: config.AGENT_BACKEND_URL,
    }),
    ipcReady('worker-ready', 180_000),
    config.dataDir,
  );
}

/** Before anything stops: the in-process backend's runs finish and the worker commits them. */
function drainTurns(logger: Logger, runs: BackendRuns | null, worker: () => RunningWorker | null): (opts: StopOptions) => Promise<void> {
  const runCount = () => runs?.activeRunIds.length ?? 0;
  const activities = () => worker()?.worker.getStatus().numInFlightActivities ?? 0;
  const inFlight = () => runCount() + activities();
  return async ({ drainMs = 0, skipDrain, onDrain }) => {
    if (inFlight() === 0) return;
    // A turn is a backend run and the activity consuming it: count turns, not both.
    onDrain?.(Math.max(runCount(), activities()));
    await settle(inFlight, Date.now() + drainMs, skipDrain);
    const left = runs?.activeRunIds ?? [];
    if (left.length === 0) return;
    logger.warn({ runs: left }, 'drain: stopping the turns still running');
    for (const id of left) runs!.cancelLocal(id, 'shutdown', 'Stopped: the server shut down.');
    await settle(inFlight, Date.now() + DRAIN_STOP_CONFIRM_MS, skipDrain);
  };
}

/** Resolves once `busy()` is 0, at `deadline`, or when `skip` aborts. */
async function settle(busy: () => number, deadline: number, skip?: AbortSignal): Promise<void> {
  while (busy() > 0 && Date.now() < deadline && !skip?.aborted) await new Promise((r) => setTimeout(r, 100));
}

/** The environment that reproduces a config in another process. */
export function configToEnv(config: Config): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of Object.keys(EnvSchema.shape) as (keyof Config)[]) {
    const v = config[key];
    if (v !== undefined && v !== null && typeof v !== 'object') env[key] = String(v);
  }
  return env;
}
