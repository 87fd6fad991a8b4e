/**
 * The production process layout on one machine, each part a separate OS process that a test can kill and
 * start again at a chosen moment: embedded PostgreSQL (crashed with an immediate shutdown, restarted on the
 * same data dir and port), the Temporal dev server (SIGKILLed, restarted on the same SQLite file and port),
 * and the api, the worker and the agent backend, each `node --import tsx <entry>` configured through
 * core/platform/config.ts's variables, logging to files under the stack's data dir.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection, Client } from '@temporalio/client';
import { startEmbeddedPg, type EmbeddedPg } from '../../core/platform/embedded-pg.js';
import { createDb } from '../../core/platform/db.js';
import { applyMigrations } from '../../core/platform/migrate.js';
import { ensureDemoData, type DemoData } from '../../core/domain/seed.js';
import { stablePort } from '../../stack/ports.js';
import { healthzReady, ipcReady, ServiceProcess, sleep, waitFor } from '../../stack/service-process.js';
import { locateTemporal, portOpen, startTemporalDevServer, type DevServer } from '../../stack/temporal.js';
import { FailoverFront, PgProxy } from './pg-proxy.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RUN_DIR = path.join(ROOT, '.data', `faults-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);

const t0 = Date.now();
/** Timestamped progress on stderr: when a fault test is slow or fails, the log says which step. */
export function step(what: string): void {
  process.stderr.write(`[faults +${((Date.now() - t0) / 1000).toFixed(1)}s] ${what}\n`);
}

// The stack's own poll helpers (stack/service-process.ts), for the fault tests that import them from here.
export { sleep, waitFor };

export { ServiceProcess };

export interface FaultStackOptions {
  /** Extra configuration for every Node service (core/platform/config.ts variables). */
  env?: Record<string, string>;
  /** The agent backend reaches PostgreSQL through a TCP proxy the test can cut (`stack.backendPg`, pg-proxy.ts). */
  backendPgProxy?: boolean;
  /**
   * A second agent backend replica (`stack.backendPeer`, its own port) behind one front address with the first
   * (`FailoverFront`: the first replica while it accepts connections): the api and the worker use the front.
   */
  backendPeer?: boolean;
}

/** PostgreSQL, Temporal, api, worker and agent backend as separate processes on fixed ports. */
export class FaultStack {
  readonly dir: string;
  readonly taskQueue = 'agent-turns-faults';
  pgPort = 0;
  temporalPort = 0;
  temporalUiPort = 0;
  apiPort = 0;
  backendPort = 0;
  demo!: DemoData;
  private pg: EmbeddedPg | null = null;
  private temporalServer: DevServer | null = null;
  private temporalBin = '';
  api!: ServiceProcess;
  worker!: ServiceProcess;
  backend!: ServiceProcess;
  /** With `backendPgProxy`: the agent backend's way to PostgreSQL. */
  backendPg: PgProxy | null = null;
  /** With `backendPeer`: the second replica, and the front both are reached through. */
  backendPeer: ServiceProcess | null = null;
  private backendFront: FailoverFront | null = null;
  backendPeerPort = 0;

  private constructor(
    readonly name: string,
    private readonly opts: FaultStackOptions,
  ) {
    this.dir = path.join(RUN_DIR, name);
  }

  get databaseUrl(): string {
    return `postgresql://postgres:postgres@127.0.0.1:${this.pgPort}/dify_agent`;
  }
  get temporalAddress(): string {
    return `127.0.0.1:${this.temporalPort}`;
  }
  get apiUrl(): string {
    return `http://127.0.0.1:${this.apiPort}`;
  }
  get backendUrl(): string {
    return `http://127.0.0.1:${this.backendPort}`;
  }
  get key(): string {
    return this.demo.apiKey;
  }

  static async start(name: string, opts: FaultStackOptions = {}): Promise<FaultStack> {
    const s = new FaultStack(name, opts);
    fs.rmSync(s.dir, { recursive: true, force: true });
    fs.mkdirSync(s.dir, { recursive: true });
    // Not ephemeral ports: every part restarts on its port, and a freed ephemeral port can be taken meanwhile.
    s.pgPort = await stablePort();
    s.temporalPort = await stablePort();
    s.temporalUiPort = await stablePort();
    s.apiPort = await stablePort();
    s.backendPort = await stablePort();
    s.temporalBin = await locateTemporal({
      explicit: process.env.TEMPORAL_CLI_PATH,
    });
    // Never leave processes behind if the test runner dies (the dev server has its own hook).
    process.once('exit', () => s.killAllNow());
    const envFor = (extra: Record<string, string>) => () => ({
      ...s.baseEnv(),
      ...extra,
      ...(s.opts.env ?? {}),
    });
    s.api = new ServiceProcess('api', ['--import', 'tsx', 'api/main.ts'], envFor({}), healthzReady(s.apiUrl, 'api'), s.dir);
    if (opts.backendPgProxy) {
      s.backendPg = new PgProxy(() => s.pgPort);
      await s.backendPg.start(await stablePort());
    }
    const backendEnv: Record<string, string> = s.backendPg
      ? {
          DATABASE_URL: `postgresql://postgres:postgres@127.0.0.1:${s.backendPg.port}/dify_agent`,
        }
      : {};
    if (opts.backendPeer) {
      s.backendPeerPort = await stablePort();
      s.backendFront = new FailoverFront(() => [s.backendPort, s.backendPeerPort]);
      await s.backendFront.start(await stablePort());
      const peerUrl = `http://127.0.0.1:${s.backendPeerPort}`;
      s.backendPeer = new ServiceProcess(
        'agent-backend-peer',
        ['--import', 'tsx', 'agent-backend/main.ts'],
        envFor({ AGENT_BACKEND_PORT: String(s.backendPeerPort) }),
        healthzReady(peerUrl, 'agent backend peer'),
        s.dir,
      );
    }
    s.backend = new ServiceProcess(
      'agent-backend',
      ['--import', 'tsx', 'agent-backend/main.ts'],
      envFor(backendEnv),
      healthzReady(s.backendUrl, 'agent backend'),
      s.dir,
    );
    s.worker = new ServiceProcess('worker', ['--import', 'tsx', 'worker.ts'], envFor({}), ipcReady('worker-ready', 90_000), s.dir);
    try {
      step(`${name}: starting PostgreSQL on ${s.pgPort}`);
      await s.startPg();
      await s.pg!.ensureDatabase('dify_agent');
      await applyMigrations(s.databaseUrl);
      const db = createDb(s.databaseUrl, { max: 2 });
      try {
        s.demo = await ensureDemoData(db, { dataDir: s.dir });
      } finally {
        await db.$disconnect();
      }
      step(`${name}: starting Temporal on ${s.temporalPort}`);
      await s.startTemporal();
      step(`${name}: starting agent backend, api, worker`);
      await Promise.all([s.backend.start(), s.api.start(), s.worker.start(), ...(s.backendPeer ? [s.backendPeer.start()] : [])]);
      step(`${name}: stack up (logs in ${s.dir})`);
    } catch (err) {
      await s.stop();
      throw err;
    }
    return s;
  }

  /** This stack's own secrets (production refuses the public dev defaults), the same across restarts. */
  private readonly secrets = {
    INNER_API_KEY: crypto.randomBytes(24).toString('hex'),
    AGENT_BACKEND_TOKEN: crypto.randomBytes(24).toString('hex'),
    ENCRYPTION_KEY: crypto.randomBytes(32).toString('hex'),
    EXECUTION_CONTEXT_SIGNING_KEY: crypto.randomBytes(24).toString('hex'),
  };

  /** One of this stack's secrets (a test that calls the inner API or signs an execution context itself). */
  secret(name: keyof FaultStack['secrets']): string {
    return this.secrets[name];
  }

  /** The environment every Node service reads (core/platform/config.ts). */
  private baseEnv(): Record<string, string> {
    return {
      ...this.secrets,
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      NODE_ENV: 'production',
      LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'info',
      DATA_DIR: this.dir,
      DATABASE_URL: this.databaseUrl,
      TEMPORAL_ADDRESS: this.temporalAddress,
      TEMPORAL_TASK_QUEUE: this.taskQueue,
      API_HOST: '127.0.0.1',
      API_PORT: String(this.apiPort),
      API_INTERNAL_URL: this.apiUrl,
      AGENT_BACKEND_HOST: '127.0.0.1',
      AGENT_BACKEND_PORT: String(this.backendPort),
      AGENT_BACKEND_URL: this.backendFront ? `http://127.0.0.1:${this.backendFront.port}` : this.backendUrl,
      DEMO_MODEL_TOKEN_DELAY_MS: '5',
    };
  }

  // --- PostgreSQL ---------------------------------------------------------------------------------

  get pgUp(): boolean {
    return this.pg !== null;
  }

  async startPg(): Promise<void> {
    if (this.pg) throw new Error('PostgreSQL is already running');
    const log = fs.createWriteStream(path.join(this.dir, 'postgres.log'), {
      flags: 'a',
    });
    // Durable like production: a crash must lose nothing that was committed.
    this.pg = await startEmbeddedPg({
      dir: path.join(this.dir, 'pg'),
      port: this.pgPort,
      durable: true,
      log: (l) => log.write(l + '\n'),
    });
  }

  /**
   * Takes PostgreSQL down the way a crash or a failover does: an immediate shutdown (SIGQUIT to the
   * postmaster) ends every backend at once, without a checkpoint; the next start runs crash recovery.
   */
  async crashPg(): Promise<void> {
    if (!this.pg) return;
    const pidFile = path.join(this.dir, 'pg', 'postmaster.pid');
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGQUIT');
    await waitFor('postgres to exit', async () => (alive(pid) ? undefined : true), 30_000, 50);
    this.pg = null;
  }

  // --- Temporal -----------------------------------------------------------------------------------

  get temporalUp(): boolean {
    return this.temporalServer !== null;
  }

  async startTemporal(): Promise<void> {
    if (this.temporalServer) throw new Error('Temporal is already running');
    this.temporalServer = await startTemporalDevServer({
      bin: this.temporalBin,
      dataDir: this.dir,
      port: this.temporalPort,
      uiPort: this.temporalUiPort,
      headless: true,
    });
  }

  /** Sends a signal to the Temporal dev server: SIGSTOP freezes it (requests hang, nothing is answered), SIGCONT resumes. */
  signalTemporal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.temporalServer?.process.kill(signal);
  }

  /** SIGKILLs the Temporal dev server (its SQLite state stays on disk). */
  async killTemporal(): Promise<void> {
    const srv = this.temporalServer;
    if (!srv) return;
    this.temporalServer = null;
    if (srv.process.exitCode === null && srv.process.signalCode === null) {
      const gone = new Promise<void>((r) => srv.process.once('exit', () => r()));
      srv.process.kill('SIGKILL');
      await gone;
    }
    await waitFor(
      `Temporal port ${this.temporalPort} to close`,
      async () => ((await portOpen(this.temporalPort)) ? undefined : true),
      10_000,
      100,
    );
  }

  /** A fresh Temporal client (a new connection: after a restart an old channel may sit in its backoff). */
  async withTemporal<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    const connection = await Connection.connect({
      address: this.temporalAddress,
      connectTimeout: '5 seconds',
    });
    try {
      return await fn(new Client({ connection }));
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  // --- all ----------------------------------------------------------------------------------------

  /** Brings every part that is down back up (after a test that failed half-way through its fault). */
  async heal(): Promise<void> {
    if (!this.pgUp) await this.startPg();
    if (!this.temporalUp) await this.startTemporal();
    const starts: Promise<void>[] = [];
    if (!this.backend.up) starts.push(this.backend.start());
    if (this.backendPeer && !this.backendPeer.up) starts.push(this.backendPeer.start());
    if (!this.api.up) starts.push(this.api.start());
    if (!this.worker.up) starts.push(this.worker.start());
    await Promise.all(starts);
  }

  /** Synchronous last resort on exit: SIGKILL the services, immediate shutdown of PostgreSQL. */
  private killAllNow(): void {
    for (const svc of [this.api, this.worker, this.backend, this.backendPeer]) if (svc?.up) svc.child!.kill('SIGKILL');
    if (this.pg) {
      try {
        process.kill(Number(fs.readFileSync(path.join(this.dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGQUIT');
      } catch {
        /* already gone */
      }
    }
  }

  async stop(): Promise<void> {
    for (const svc of [this.api, this.worker, this.backend, this.backendPeer]) await svc?.kill('SIGTERM').catch(() => undefined);
    await this.backendPg?.stop();
    await this.backendFront?.stop();
    await this.temporalServer?.stop().catch(() => undefined);
    this.temporalServer = null;
    await this.pg?.stop().catch(() => undefined);
    this.pg = null;
    if (!process.env.KEEP_TEST_DATA) {
      fs.rmSync(this.dir, { recursive: true, force: true });
      if (fs.existsSync(RUN_DIR) && fs.readdirSync(RUN_DIR).length === 0) fs.rmdirSync(RUN_DIR);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
