/**
 * The production Temporal server (not the CLI's dev server): `temporal-server` on PostgreSQL, one OS process
 * per service (frontend, history, matching, worker), its schema created and upgraded with `temporal-sql-tool`.
 * Used by `npm run cluster` (stack/cluster.ts), the failover tests and `npm run bench -- --temporal cluster`.
 *
 * The server is not on npm or PyPI. Lookup order: TEMPORAL_SERVER_PATH / TEMPORAL_SQL_TOOL_PATH → the project
 * cache (.cache/temporal-server/v<version>/bin) → `go install` from the Go module proxy into that cache (~25 min
 * on two busy cores the first time) → a clear error. The versioned schema files come from the Go module cache
 * (`go mod download`), the same module the binaries are built from.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { portOpen } from './temporal.js';
import { logTail } from './service-process.js';

export const TEMPORAL_SERVER_VERSION = '1.32.2';
/** The server's go.mod asks for a newer Go than Debian's: the toolchain `go install` fetches (GOTOOLCHAIN). */
export const TEMPORAL_SERVER_GO_TOOLCHAIN = 'go1.27.3';
const MODULE = 'go.temporal.io/server';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SERVER_CACHE_DIR = path.join(ROOT, '.cache', 'temporal-server', `v${TEMPORAL_SERVER_VERSION}`);

type Log = (msg: string) => void;

export interface TemporalServerBinaries {
  server: string;
  sqlTool: string;
  /** `.../schema/postgresql/v12`, holding `temporal/` and `visibility/` (each with `versioned/`). */
  schemaDir: string;
}

function versionOf(bin: string): string | undefined {
  try {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 20_000 });
    return r.status === 0 ? r.stdout.trim().split(/\s+/).at(-1) : undefined;
  } catch {
    return undefined;
  }
}

/** The Go binary: GO_BIN, `go` on PATH, or the official tarball's place (also stack/s3-server.ts's). */
export function goBinary(explicit?: string): string | undefined {
  const candidates = [
    explicit,
    ...(process.env.PATH ?? '').split(path.delimiter).map((d) => d && path.join(d, 'go')),
    '/usr/local/go/bin/go',
  ];
  return candidates.find((c): c is string => !!c && fs.existsSync(c));
}

function goEnv(go: string, name: string): string {
  return spawnSync(go, ['env', name], { encoding: 'utf8' }).stdout.trim();
}

/** `go install` of the server and its SQL tool into the cache (the first run only; minutes, not seconds). */
function buildIntoCache(go: string, log: Log): void {
  const bin = path.join(SERVER_CACHE_DIR, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  log(
    `building the Temporal server ${TEMPORAL_SERVER_VERSION} from the Go module proxy into ${bin} ` +
      '(about 25 minutes on two cores the first time; later runs use the cache) ...',
  );
  const env = { ...process.env, GOTOOLCHAIN: TEMPORAL_SERVER_GO_TOOLCHAIN, GOBIN: bin };
  const targets = [`${MODULE}/cmd/server@v${TEMPORAL_SERVER_VERSION}`, `${MODULE}/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`];
  const r = spawnSync(go, ['install', ...targets], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`go install ${targets.join(' ')} failed (exit ${r.status ?? r.signal})`);
}

/** The schema files of this server version, from the Go module cache (downloaded there if missing). */
function schemaDir(go: string | undefined, log: Log): string {
  const explicit = process.env.TEMPORAL_SCHEMA_DIR;
  if (explicit) return explicit;
  if (!go) throw missingGo('the Temporal server schema files');
  const rel = path.join('schema', 'postgresql', 'v12');
  const cached = path.join(goEnv(go, 'GOMODCACHE'), `${MODULE}@v${TEMPORAL_SERVER_VERSION}`, rel);
  if (fs.existsSync(path.join(cached, 'temporal', 'versioned'))) return cached;
  log(`downloading ${MODULE}@v${TEMPORAL_SERVER_VERSION} (schema files) with go mod download ...`);
  const r = spawnSync(go, ['mod', 'download', '-json', `${MODULE}@v${TEMPORAL_SERVER_VERSION}`], {
    encoding: 'utf8',
    env: { ...process.env, GOTOOLCHAIN: TEMPORAL_SERVER_GO_TOOLCHAIN, GOFLAGS: '-mod=mod' },
  });
  const dir = r.status === 0 ? (JSON.parse(r.stdout) as { Dir?: string }).Dir : undefined;
  if (!dir)
    throw new Error(`go mod download ${MODULE}@v${TEMPORAL_SERVER_VERSION} failed: ${r.stderr.trim().split('\n').slice(-2).join(' ')}`);
  return path.join(dir, rel);
}

function missingGo(what: string): Error {
  return new Error(
    [
      `Cannot get ${what}: the Temporal server ${TEMPORAL_SERVER_VERSION} is built from Go sources (it is not on npm) and Go was not found.`,
      'Do one of:',
      '  apt-get install golang-go   (or install Go from go.dev; its `go` fetches the toolchain the server needs)',
      '  set GO_BIN to a Go binary',
      `  set TEMPORAL_SERVER_PATH and TEMPORAL_SQL_TOOL_PATH to prebuilt temporal-server ${TEMPORAL_SERVER_VERSION} binaries`,
      "  and TEMPORAL_SCHEMA_DIR to the server release's schema/postgresql/v12 directory",
    ].join('\n'),
  );
}

/** Finds (or builds and caches) the server, its SQL tool and its schema files. */
export function locateTemporalServer(opts: { log?: Log; install?: boolean } = {}): TemporalServerBinaries {
  const log = opts.log ?? (() => undefined);
  const go = goBinary(process.env.GO_BIN);
  const envServer = process.env.TEMPORAL_SERVER_PATH;
  const envSql = process.env.TEMPORAL_SQL_TOOL_PATH;
  for (const [name, p] of [
    ['TEMPORAL_SERVER_PATH', envServer],
    ['TEMPORAL_SQL_TOOL_PATH', envSql],
  ] as const)
    if (p && !versionOf(p)) throw new Error(`${name}=${p} is not a working Temporal binary (\`${p} --version\` failed).`);
  let server = envServer ?? path.join(SERVER_CACHE_DIR, 'bin', 'server');
  let sqlTool = envSql ?? path.join(SERVER_CACHE_DIR, 'bin', 'sql');
  if (!versionOf(server) || !versionOf(sqlTool)) {
    if (opts.install === false)
      throw new Error(`The Temporal server is not in ${SERVER_CACHE_DIR}/bin; run \`npm run cluster\` once to build it.`);
    if (!go) throw missingGo('the Temporal server');
    buildIntoCache(go, log);
    server = envServer ?? path.join(SERVER_CACHE_DIR, 'bin', 'server');
    sqlTool = envSql ?? path.join(SERVER_CACHE_DIR, 'bin', 'sql');
  }
  return { server: envServer ? server : namedLink(server, 'temporal-server'), sqlTool, schemaDir: schemaDir(go, log) };
}

/**
 * `go install` names the binary after its package directory (`server`); a `temporal-server` link beside it is
 * what the cluster starts, so `ps`, `top` and the bench's per-process CPU (comm starts with "temporal") name it.
 */
function namedLink(bin: string, name: string): string {
  const link = path.join(path.dirname(bin), name);
  try {
    if (!fs.existsSync(link)) fs.symlinkSync(path.basename(bin), link);
    return link;
  } catch {
    return bin;
  }
}

export interface PgEndpoint {
  host: string;
  port: number;
  user: string;
  password: string;
}

export function pgEndpoint(databaseUrl: string): PgEndpoint {
  const u = new URL(databaseUrl);
  return {
    host: u.hostname,
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
  };
}

export const TEMPORAL_DATABASES = { main: 'temporal', visibility: 'temporal_visibility' } as const;

/**
 * Creates the `temporal` and `temporal_visibility` databases if missing and brings both schemas to this server
 * version: `setup-schema -v 0.0` on a new database (a no-op on one already set up), then `update-schema`, which
 * applies the versioned steps not yet applied — the same commands an operator runs on an upgrade.
 */
export function setupTemporalSchema(bins: TemporalServerBinaries, pg: PgEndpoint, log: Log = () => undefined): void {
  const base = ['--plugin', 'postgres12', '--ep', pg.host, '-p', String(pg.port), '-u', pg.user, '--pw', pg.password];
  const run = (db: string, args: string[], quiet = false) => {
    const r = spawnSync(bins.sqlTool, [...base, '--db', db, ...(quiet ? ['--quiet'] : []), ...args], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r.status !== 0)
      throw new Error(`temporal-sql-tool ${args[0]} on ${db} failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' ')}`);
  };
  for (const [kind, db] of [
    ['temporal', TEMPORAL_DATABASES.main],
    ['visibility', TEMPORAL_DATABASES.visibility],
  ] as const) {
    run(db, ['create-database'], true); // --quiet: "already exists" is fine
    run(db, ['setup-schema', '-v', '0.0']);
    run(db, ['update-schema', '-d', path.join(bins.schemaDir, kind, 'versioned')]);
    log(`Temporal schema ${db} up to date`);
  }
}

export const TEMPORAL_SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;
export type TemporalService = (typeof TEMPORAL_SERVICES)[number];

export interface TemporalPorts {
  /** gRPC ports per service (frontend's is the one clients use). */
  grpc: Record<TemporalService, number>;
  /** Membership (ringpop) ports per service: how the services find each other. */
  membership: Record<TemporalService, number>;
  /** The frontend's HTTP API (the UI server does not need it; kept distinct so two clusters do not collide). */
  frontendHttp: number;
}

/**
 * The server's config file: PostgreSQL persistence and SQL (advanced) visibility, the four services on
 * loopback, no metrics listener (one fixed address would collide between the processes), and a dynamic
 * config file next to it.
 */
export function writeServerConfig(dir: string, pg: PgEndpoint, ports: TemporalPorts, historyShards = 4): string {
  fs.mkdirSync(dir, { recursive: true });
  const datastore = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${pg.host}:${pg.port}`,
      connectProtocol: 'tcp',
      user: pg.user,
      password: pg.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const rpc = (service: TemporalService) => ({
    rpc: {
      grpcPort: ports.grpc[service],
      membershipPort: ports.membership[service],
      bindOnLocalHost: true,
      ...(service === 'frontend' ? { httpPort: ports.frontendHttp } : {}),
    },
  });
  const dynamicConfig = path.join(dir, 'dynamic-config.yaml');
  fs.writeFileSync(
    dynamicConfig,
    YAML.stringify({
      // A search attribute registered a moment ago is usable at once (else a start may see a stale cache).
      'system.forceSearchAttributesCacheRefreshOnRead': [{ value: true }],
      // The workflow turns start eagerly (bench/README.md): allowed on this server as on the dev server.
      'system.enableEagerWorkflowStart': [{ value: true }],
    }),
  );
  const config = {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: historyShards,
      datastores: {
        'postgres-default': datastore(TEMPORAL_DATABASES.main, 20),
        'postgres-visibility': datastore(TEMPORAL_DATABASES.visibility, 10),
      },
    },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
    services: Object.fromEntries(TEMPORAL_SERVICES.map((s) => [s, rpc(s)])),
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${ports.grpc.frontend}` },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: dynamicConfig, pollInterval: '10s' },
  };
  const file = path.join(dir, 'config.yaml');
  fs.writeFileSync(file, YAML.stringify(config), { mode: 0o600 }); // it holds the database password
  return file;
}

/** One Temporal service as its own OS process (`temporal-server start --service <name>`). */
export class TemporalServiceProcess {
  child: ChildProcess | null = null;
  readonly logFile: string;

  constructor(
    readonly service: TemporalService,
    private readonly bin: string,
    private readonly configFile: string,
    private readonly port: number,
    logDir: string,
  ) {
    this.logFile = path.join(logDir, `temporal-${service}.log`);
  }

  get up(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Spawns the service and waits until its gRPC port accepts connections. A service that exits before it listens
   * (seen once in CI: the frontend, started beside the others) is started again, up to `attempts` times in all.
   */
  async start(timeoutMs = 60_000, attempts = 3): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.startOnce(timeoutMs);
      } catch (err) {
        if (this.up || attempt >= attempts) throw err;
        fs.appendFileSync(this.logFile, `\n==== exited before listening (attempt ${attempt} of ${attempts}); starting again\n`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private async startOnce(timeoutMs: number): Promise<void> {
    if (this.up) return;
    fs.appendFileSync(this.logFile, `\n==== ${new Date().toISOString()} start ${this.service}\n`);
    const fd = fs.openSync(this.logFile, 'a');
    const child = spawn(this.bin, ['--config-file', this.configFile, '--allow-no-auth', 'start', '--service', this.service], {
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    this.child = child;
    const deadline = Date.now() + timeoutMs;
    while (!(await portOpen(this.port))) {
      if (!this.up) throw new Error(`temporal ${this.service} exited at start; log tail:\n${logTail(this.logFile)}`);
      if (Date.now() > deadline)
        throw new Error(`temporal ${this.service} did not open port ${this.port} within ${timeoutMs} ms; see ${this.logFile}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** SIGTERM (a graceful stop) or SIGKILL; resolves once the process is gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child || !this.up) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(signal);
    const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await gone;
    clearTimeout(t);
  }
}

/**
 * The Temporal Web UI for a server of our own: the UI server's Go module (the CLI embeds the same one, but its
 * UI serves only the CLI's dev server). This version's dependencies are all on the Go module proxy; newer ones
 * need modules the proxy here lacks. TEMPORAL_UI_SERVER_PATH → cache → `go install` (~30 s) → undefined.
 */
export const TEMPORAL_UI_VERSION = '2.54.1';
const UI_CACHE_DIR = path.join(ROOT, '.cache', 'temporal-ui', `v${TEMPORAL_UI_VERSION}`);

export function locateTemporalUi(opts: { log?: Log; install?: boolean } = {}): string | undefined {
  const log = opts.log ?? (() => undefined);
  const explicit = process.env.TEMPORAL_UI_SERVER_PATH;
  if (explicit) return versionOf(explicit) ? explicit : undefined;
  const bin = path.join(UI_CACHE_DIR, 'bin', 'server');
  if (versionOf(bin)) return bin;
  const go = goBinary(process.env.GO_BIN);
  if (!go || opts.install === false) return undefined;
  log(`building the Temporal UI server ${TEMPORAL_UI_VERSION} from the Go module proxy (about a minute, once) ...`);
  const r = spawnSync(go, ['install', `github.com/temporalio/ui-server/v2/cmd/server@v${TEMPORAL_UI_VERSION}`], {
    env: { ...process.env, GOTOOLCHAIN: TEMPORAL_SERVER_GO_TOOLCHAIN, GOBIN: path.dirname(bin) },
    encoding: 'utf8',
  });
  if (r.status !== 0) log(`the Temporal UI server did not build: ${r.stderr.trim().split('\n').slice(-2).join(' ')}`);
  return versionOf(bin) ? bin : undefined;
}

/** Starts the UI server on `port` against the frontend at `frontend`; resolves once it serves. */
export async function startTemporalUi(opts: {
  bin: string;
  dir: string;
  port: number;
  frontend: string;
  namespace: string;
}): Promise<ChildProcess> {
  const configDir = path.join(opts.dir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  fs.writeFileSync(
    path.join(configDir, 'development.yaml'),
    YAML.stringify({
      temporalGrpcAddress: opts.frontend,
      host: '127.0.0.1',
      port: opts.port,
      enableUi: true,
      defaultNamespace: opts.namespace,
      cors: { cookieInsecure: true, allowOrigins: [`http://127.0.0.1:${opts.port}`, `http://localhost:${opts.port}`] },
    }),
  );
  const fd = fs.openSync(path.join(opts.dir, 'temporal-ui.log'), 'a');
  const child = spawn(opts.bin, ['--root', opts.dir, '--config', 'config', '--env', 'development', 'start'], { stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const deadline = Date.now() + 30_000;
  while (!(await portOpen(opts.port))) {
    if (child.exitCode !== null) throw new Error(`the Temporal UI server exited at start; see ${path.join(opts.dir, 'temporal-ui.log')}`);
    if (Date.now() > deadline) throw new Error(`the Temporal UI server did not open port ${opts.port}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return child;
}

// `npx tsx stack/temporal-server.ts` prints the binaries it would use (building them if needed).
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  try {
    const bins = locateTemporalServer({ log: (m) => console.error(m) });
    console.log(`${bins.server}\n${bins.sqlTool}\n${bins.schemaDir}`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
