/**
 * The production topology as separate processes on one machine (issue 15): PostgreSQL (embedded, or
 * DATABASE_URL), the real Temporal server on it (one process per service: frontend, history, matching, worker;
 * schema set up and upgraded with temporal-sql-tool; SQL advanced visibility with the turn search attributes),
 * the Temporal UI, and the compiled api (2 replicas), worker (2) and agent backend (2) — `node dist/...`, not tsx
 * — with a round-robin balancer in front of the apis and one in front of the backends.
 *
 * `npm run cluster` runs it (see main() at the end); the failover tests (test/cluster) and the bench's
 * `--temporal cluster` start it through startCluster() on ports of their own and kill parts of it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common';
import { SECRET_VARS } from '../core/platform/config.js';
import { createDb } from '../core/platform/db.js';
import { ensureLocalSecrets } from '../core/platform/local-secrets.js';
import { startEmbeddedPg, type EmbeddedPg } from '../core/platform/embedded-pg.js';
import { applyMigrations } from '../core/platform/migrate.js';
import { ensureTurnSearchAttributes } from '../worker/search-attribute-registry.js';
import { ensureDemoData, type DemoData } from '../core/domain/seed.js';
import { startBalancer, type Balancer } from './balancer.js';
import { stablePort } from './ports.js';
import { healthzReady, ipcReady, ServiceProcess, waitFor } from './service-process.js';
import {
  locateTemporalServer,
  locateTemporalUi,
  pgEndpoint,
  setupTemporalSchema,
  startTemporalUi,
  TEMPORAL_SERVICES,
  TemporalServiceProcess,
  writeServerConfig,
  type TemporalPorts,
  type TemporalService,
} from './temporal-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

type Log = (msg: string) => void;

export interface ClusterPorts {
  postgres: number;
  temporal: TemporalPorts;
  ui: number;
  /** The balancers: what clients (api) and the apis/workers (agent backends) call. */
  api: number;
  backend: number;
  apiReplicas: number[];
  backendReplicas: number[];
  /** Each worker's GET /healthz. */
  workerHealth: number[];
}

/** Free ports for a cluster beside others on this machine (the failover tests, bench:distance), each one distinct. */
export async function freeClusterPorts(): Promise<ClusterPorts> {
  const taken = new Set<number>();
  const next = async () => {
    for (;;) {
      const p = await stablePort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const record = async () => {
    const out = {} as ClusterPorts['temporal']['grpc'];
    for (const s of TEMPORAL_SERVICES) out[s] = await next();
    return out;
  };
  return {
    postgres: await next(),
    temporal: { grpc: await record(), membership: await record(), frontendHttp: await next() },
    ui: await next(),
    api: await next(),
    backend: await next(),
    apiReplicas: [await next(), await next()],
    backendReplicas: [await next(), await next()],
    workerHealth: [await next(), await next()],
  };
}

/** `npm run cluster`'s fixed ports: the api and backend balancers where `npm start` puts the api and backend. */
export function defaultPorts(): ClusterPorts {
  return {
    postgres: 54339,
    temporal: {
      grpc: { frontend: 7233, history: 7234, matching: 7235, worker: 7239 },
      membership: { frontend: 6933, history: 6934, matching: 6935, worker: 6939 },
      frontendHttp: 7243,
    },
    ui: 8233,
    api: 5001,
    backend: 5002,
    apiReplicas: [5011, 5012],
    backendReplicas: [5021, 5022],
    workerHealth: [5031, 5032],
  };
}

export interface ClusterOptions {
  /** Where PostgreSQL, the Temporal config, the logs and the shared uploads/workspaces live. */
  dataDir: string;
  ports: ClusterPorts;
  /** External PostgreSQL (the server also holds the `temporal` and `temporal_visibility` databases). */
  databaseUrl?: string;
  /** The compiled build the Node services run (scripts/build.ts output); built there first with `build`. */
  buildDir: string;
  build?: boolean;
  /** Extra environment of every Node service (core/platform/config.ts variables). */
  env?: Record<string, string>;
  taskQueue?: string;
  namespace?: string;
  ui?: boolean;
  seed?: boolean;
  log?: Log;
}

export interface Cluster {
  dataDir: string;
  logDir: string;
  databaseUrl: string;
  temporalAddress: string;
  namespace: string;
  taskQueue: string;
  /** The api balancer's URL: what clients call. */
  apiUrl: string;
  backendUrl: string;
  uiUrl: string | null;
  demo: DemoData | null;
  temporal: Record<TemporalService, TemporalServiceProcess>;
  apis: ServiceProcess[];
  workers: ServiceProcess[];
  backends: ServiceProcess[];
  balancers: { api: Balancer; backend: Balancer };
  /** Every process of the cluster by name (for measurements). */
  processes: () => { name: string; pid: number | undefined }[];
  stop: () => Promise<void>;
}

/** This cluster's own secrets, kept in its data dir (0600) so a restart decrypts what the last run encrypted. */
function clusterSecrets(dataDir: string): Record<string, string> {
  return ensureLocalSecrets({ dataDir, names: SECRET_VARS }).values as Record<string, string>;
}

/** `npm run build` into `outDir` (without the type check: `npm run typecheck` is that; the JavaScript is the same). */
export function buildCompiled(outDir: string): void {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'build.ts'), '--no-check', '--out-dir', outDir], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`the build failed (exit ${r.status ?? r.signal})`);
}

/** Registers the namespace (once) and the turn search attributes, retrying while the services join. */
async function prepareNamespace(address: string, namespace: string, log: Log): Promise<void> {
  const connection = await waitFor(
    'the Temporal frontend',
    () => Connection.connect({ address, connectTimeout: '3 seconds' }),
    60_000,
    500,
  );
  try {
    await waitFor(
      `namespace ${namespace}`,
      async () => {
        try {
          await connection.workflowService.describeNamespace({ namespace });
          return true;
        } catch {
          // ALREADY_EXISTS (6) after a registration whose answer was lost: the describe above succeeds next time.
          await connection.workflowService
            .registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('3 days') })
            .catch((err: { code?: number }) => {
              if (err.code !== 6) throw err;
            });
          log(`Temporal namespace ${namespace} registered`);
          return undefined;
        }
      },
      120_000,
      1000,
    );
    const added = await waitFor('the turn search attributes', () => ensureTurnSearchAttributes(connection, namespace), 60_000, 1000);
    if (added.length) log(`search attributes registered: ${added.join(', ')}`);
    // Visibility answers for the namespace: the UI, the audit and the api's lookups all use it.
    await waitFor(
      'visibility of the namespace',
      () => connection.workflowService.countWorkflowExecutions({ namespace, query: '' }).then(() => true),
      60_000,
      500,
    );
  } finally {
    await connection.close();
  }
}

export interface TemporalServer {
  address: string;
  services: Record<TemporalService, TemporalServiceProcess>;
  stop: () => Promise<void>;
}

/**
 * The PostgreSQL-backed Temporal server alone: `temporal` and `temporal_visibility` created and migrated on the
 * PostgreSQL of `databaseUrl`, the four services started, the namespace and the turn search attributes
 * registered. startCluster runs it; so does the bench's `--temporal cluster`.
 */
export async function startTemporalServer(opts: {
  dataDir: string;
  databaseUrl: string;
  ports: TemporalPorts;
  namespace?: string;
  log?: Log;
  logDir?: string;
}): Promise<TemporalServer> {
  const log = opts.log ?? (() => undefined);
  const logDir = opts.logDir ?? path.join(opts.dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const bins = locateTemporalServer({ log });
  const endpoint = pgEndpoint(opts.databaseUrl);
  setupTemporalSchema(bins, endpoint, log);
  const configFile = writeServerConfig(path.join(opts.dataDir, 'temporal'), endpoint, opts.ports);
  const services = Object.fromEntries(
    TEMPORAL_SERVICES.map((s) => [s, new TemporalServiceProcess(s, bins.server, configFile, opts.ports.grpc[s], logDir)]),
  ) as Record<TemporalService, TemporalServiceProcess>;
  // Clients first out: frontend, then the services behind it.
  const stop = async () => {
    for (const s of ['frontend', 'worker', 'matching', 'history'] as const) await services[s].stop();
  };
  process.once('exit', () => {
    for (const s of Object.values(services)) if (s.up) s.child!.kill('SIGKILL');
  });
  try {
    log('starting the Temporal services (frontend, history, matching, worker) ...');
    await Promise.all(TEMPORAL_SERVICES.map((s) => services[s].start()));
    const address = `127.0.0.1:${opts.ports.grpc.frontend}`;
    await prepareNamespace(address, opts.namespace ?? 'default', log);
    return { address, services, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A phase's stop steps: run in reverse order by the cluster's stop(). */
type Stops = (() => Promise<unknown>)[];

/**
 * The cluster in phases: build, database (migrated, seeded), Temporal server, UI, balancers, Node services. Each
 * phase pushes its stop steps; a start that fails stops what it started, in reverse.
 */
export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const log = opts.log ?? (() => undefined);
  const { ports } = opts;
  const dataDir = path.resolve(opts.dataDir);
  const logDir = path.join(dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const namespace = opts.namespace ?? 'default';
  const taskQueue = opts.taskQueue ?? 'agent-turns';
  const stops: Stops = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch((err: Error) => log(`stop step failed: ${err.message}`));
  };
  try {
    locateTemporalServer({ log }); // first: a missing server (and its ~25 min build) shows before anything starts
    if (opts.build !== false) {
      log(`building the compiled services into ${path.relative(ROOT, opts.buildDir) || '.'} ...`);
      buildCompiled(opts.buildDir);
    }
    const { pg, databaseUrl, demo } = await startClusterDatabase(opts, dataDir, stops);
    const temporalServer = await startTemporalServer({ dataDir, databaseUrl, ports: ports.temporal, namespace, log, logDir });
    stops.push(() => temporalServer.stop());
    const { services: temporal, address: temporalAddress } = temporalServer;
    const uiUrl = opts.ui !== false ? await startClusterUi(dataDir, ports.ui, temporalAddress, namespace, log, stops) : null;
    const balancers = await startBalancers(ports, stops);
    const env = clusterEnv(opts, dataDir, { databaseUrl, temporalAddress, namespace, taskQueue, balancers });
    const { apis, workers, backends } = await startNodeServices(opts, env, logDir, log, stops);
    return {
      dataDir,
      logDir,
      databaseUrl,
      temporalAddress,
      namespace,
      taskQueue,
      apiUrl: balancers.api.url,
      backendUrl: balancers.backend.url,
      uiUrl,
      demo,
      temporal,
      apis,
      workers,
      backends,
      balancers,
      processes: () => [
        ...(pg ? [{ name: 'postgres', pid: postmasterPid(dataDir) }] : []),
        ...TEMPORAL_SERVICES.map((s) => ({ name: `temporal-${s}`, pid: temporal[s].child?.pid })),
        ...[...apis, ...workers, ...backends].map((s) => ({ name: s.name, pid: s.pid })),
      ],
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** PostgreSQL: the product's database (migrated, seeded) and later Temporal's two, on one server. */
async function startClusterDatabase(
  opts: ClusterOptions,
  dataDir: string,
  stops: Stops,
): Promise<{ pg: EmbeddedPg | null; databaseUrl: string; demo: DemoData | null }> {
  let pg: EmbeddedPg | null = null;
  let databaseUrl = opts.databaseUrl;
  if (!databaseUrl) {
    const started = await startEmbeddedPg({
      dir: path.join(dataDir, 'pg'),
      port: opts.ports.postgres,
      durable: true,
      passwordFile: path.join(dataDir, 'pg-password'),
    });
    pg = started;
    stops.push(() => started.stop());
    await pg.ensureDatabase('dify_agent');
    databaseUrl = pg.url('dify_agent');
  }
  await applyMigrations(databaseUrl);
  let demo: DemoData | null = null;
  if (opts.seed !== false) {
    const db = createDb(databaseUrl, { max: 2 });
    try {
      demo = await ensureDemoData(db, { dataDir });
    } finally {
      await db.$disconnect();
    }
  }
  return { pg, databaseUrl, demo };
}

/** The Temporal UI server, when its binary is available (null otherwise: the cluster runs without it). */
async function startClusterUi(
  dataDir: string,
  port: number,
  frontend: string,
  namespace: string,
  log: Log,
  stops: Stops,
): Promise<string | null> {
  const uiBin = locateTemporalUi({ log });
  if (!uiBin) {
    log('the Temporal UI server is not available (see above); the cluster runs without it');
    return null;
  }
  const ui = await startTemporalUi({ bin: uiBin, dir: path.join(dataDir, 'temporal-ui'), port, frontend, namespace });
  stops.push(async () => {
    if (ui.exitCode === null) {
      const gone = new Promise((r) => ui.once('exit', r));
      ui.kill('SIGTERM');
      await gone;
    }
  });
  return `http://127.0.0.1:${port}`;
}

/** Balancers first: each service is configured with the other tier's balancer address. */
async function startBalancers(ports: ClusterPorts, stops: Stops): Promise<{ api: Balancer; backend: Balancer }> {
  const api = await startBalancer({ port: ports.api, upstreams: ports.apiReplicas });
  stops.push(() => api.close());
  const backend = await startBalancer({ port: ports.backend, upstreams: ports.backendReplicas });
  stops.push(() => backend.close());
  return { api, backend };
}

/** The environment every Node service of the cluster shares (core/platform/config.ts variables). */
function clusterEnv(
  opts: ClusterOptions,
  dataDir: string,
  at: {
    databaseUrl: string;
    temporalAddress: string;
    namespace: string;
    taskQueue: string;
    balancers: { api: Balancer; backend: Balancer };
  },
): () => NodeJS.ProcessEnv {
  const secrets = clusterSecrets(dataDir);
  return () => ({
    ...secrets,
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    NODE_ENV: 'production',
    LOG_LEVEL: 'info',
    // One data dir for every replica: uploads and agent workspaces are shared, as a volume would be.
    DATA_DIR: dataDir,
    DATABASE_URL: at.databaseUrl,
    TEMPORAL_ADDRESS: at.temporalAddress,
    TEMPORAL_NAMESPACE: at.namespace,
    TEMPORAL_TASK_QUEUE: at.taskQueue,
    API_HOST: '127.0.0.1',
    API_INTERNAL_URL: at.balancers.api.url,
    AGENT_BACKEND_HOST: '127.0.0.1',
    AGENT_BACKEND_URL: at.balancers.backend.url,
    ...(opts.env ?? {}),
  });
}

/** The compiled api, worker and agent backend replicas, each its own process (stack/service-process.ts). */
async function startNodeServices(
  opts: ClusterOptions,
  baseEnv: () => NodeJS.ProcessEnv,
  logDir: string,
  log: Log,
  stops: Stops,
): Promise<{ apis: ServiceProcess[]; workers: ServiceProcess[]; backends: ServiceProcess[] }> {
  const { ports } = opts;
  const script = (entry: string) => path.join(opts.buildDir, entry);
  const backends = ports.backendReplicas.map(
    (port, i) =>
      new ServiceProcess(
        `agent-backend-${i + 1}`,
        [script('agent-backend/main.js')],
        // A backend's own address is its own port (the shell network stub lets commands reach it, not the balancer).
        () => ({ ...baseEnv(), AGENT_BACKEND_PORT: String(port), AGENT_BACKEND_URL: `http://127.0.0.1:${port}` }),
        healthzReady(`http://127.0.0.1:${port}`, `agent backend ${i + 1}`),
        logDir,
      ),
  );
  const apis = ports.apiReplicas.map(
    (port, i) =>
      new ServiceProcess(
        `api-${i + 1}`,
        [script('api/main.js')],
        () => ({ ...baseEnv(), API_PORT: String(port) }),
        healthzReady(`http://127.0.0.1:${port}`, `api ${i + 1}`),
        logDir,
      ),
  );
  const workers = ports.workerHealth.map(
    (port, i) =>
      new ServiceProcess(
        `worker-${i + 1}`,
        [script('worker.js')],
        () => ({ ...baseEnv(), WORKER_HEALTH_PORT: String(port) }),
        ipcReady('worker-ready', 120_000),
        logDir,
      ),
  );
  const nodeServices = [...apis, ...workers, ...backends];
  stops.push(async () => {
    // Apis stop taking turns first; workers drain; backends last (the workers' activities read from them).
    await Promise.all(apis.map((s) => s.stop()));
    await Promise.all(workers.map((s) => s.stop()));
    await Promise.all(backends.map((s) => s.stop()));
  });
  process.once('exit', () => {
    for (const s of nodeServices) if (s.up) s.child!.kill('SIGKILL');
  });
  log('starting 2 agent backends, 2 apis, 2 workers ...');
  await Promise.all(nodeServices.map((s) => s.start()));
  return { apis, workers, backends };
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    return Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}
