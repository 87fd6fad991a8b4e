/**
 * What a cell costs outside the client's stopwatch: database writes (rows per table, write
 * transactions, WAL bytes — all exact, no statistics lag) and CPU / memory of the processes of the stack
 * (this process: api + agent backend + load generator [+ in-process worker]; the worker child; PostgreSQL;
 * the Temporal dev server), read from /proc (Linux; elsewhere these figures are null).
 *
 * Why one file: each probe is a small reader of /proc or the catalogue; they are used together per cell.
 */
import fs from 'node:fs';
import os from 'node:os';
import pg from 'pg';

// ---- database ----------------------------------------------------------------------------------

export interface DbCounters {
  /** Row count per table, `schema.table`. */
  rows: Record<string, number>;
  /** Next transaction id: the difference is the number of write transactions in between. */
  nextXid: number;
  /** WAL insert position, bytes. */
  walLsn: number;
}

export interface DbDelta {
  /** Rows added per table (only tables that changed). */
  rows: Record<string, number>;
  rowsTotal: number;
  writeTransactions: number;
  walBytes: number;
}

/** The tables the issue asks about come first in reports; any other table that grows is listed too. */
export const KEY_TABLES = [
  'public.messages',
  'public.message_events',
  'public.message_agent_thoughts',
  'public.agent_backend_runs',
  'public.credit_ledger',
  'agent_backend.runs',
  'agent_backend.events',
];

export class DbProbe {
  private tables: string[] = [];
  private constructor(private readonly client: pg.Client) {}

  static async connect(databaseUrl: string): Promise<DbProbe> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const probe = new DbProbe(client);
    const r = await client.query<{ t: string }>(
      `select table_schema || '.' || table_name as t from information_schema.tables
        where table_schema in ('public', 'agent_backend') and table_type = 'BASE TABLE' and table_name <> '_prisma_migrations'
        order by 1`,
    );
    probe.tables = r.rows.map((x) => x.t);
    return probe;
  }

  async read(): Promise<DbCounters> {
    const counts = this.tables
      .map(
        (t) =>
          `(select count(*) from ${t
            .split('.')
            .map((p) => `"${p}"`)
            .join('.')})::bigint as "${t}"`,
      )
      .join(', ');
    const r = await this.client.query<Record<string, string>>(`select ${counts}`);
    const rows: Record<string, number> = {};
    for (const t of this.tables) rows[t] = Number(r.rows[0]![t]);
    // Read last: the counting statement above assigns no transaction id (read-only).
    const x = await this.client.query<{ xid: string; lsn: string }>(
      `select pg_snapshot_xmax(pg_current_snapshot())::text as xid, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text as lsn`,
    );
    return { rows, nextXid: Number(x.rows[0]!.xid), walLsn: Number(x.rows[0]!.lsn) };
  }

  /** Rows of the turn timeline (see timeline.ts). */
  query<T extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<T>> {
    return this.client.query<T>(sql, params);
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

export function dbDelta(before: DbCounters, after: DbCounters): DbDelta {
  const rows: Record<string, number> = {};
  let rowsTotal = 0;
  for (const [t, n] of Object.entries(after.rows)) {
    const d = n - (before.rows[t] ?? 0);
    if (d !== 0) rows[t] = d;
    rowsTotal += d;
  }
  return { rows, rowsTotal, writeTransactions: after.nextXid - before.nextXid, walBytes: after.walLsn - before.walLsn };
}

// ---- statements ---------------------------------------------------------------------------------

let statements = 0;
let counting = false;

/**
 * Counts SQL statements sent by every `pg` client of this process (Prisma's adapter, the agent backend's
 * store, the event notifier), one increment per `Client#query` — each is a round trip and a write
 * syscall. A worker child process is not counted.
 */
export function statementCounter(): () => number {
  if (!counting) {
    counting = true;
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    proto.query = function (this: unknown, ...args: unknown[]) {
      statements += 1;
      return original.apply(this, args);
    };
  }
  return () => statements;
}

// ---- processes ---------------------------------------------------------------------------------

export type Component = 'main' | 'worker' | 'postgres' | 'temporal' | 'peer' | 'other';

interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  cpuTicks: number;
  rssBytes: number;
}

const PAGE = 4096;
const HZ = 100; // USER_HZ: 100 on every Linux we run on (getconf CLK_TCK)
const hasProc = os.platform() === 'linux' && fs.existsSync('/proc/self/stat');

function readStat(pid: number): ProcStat | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = s.lastIndexOf(')');
    const comm = s.slice(s.indexOf('(') + 1, close);
    const f = s.slice(close + 2).split(' ');
    // fields after comm: state(0) ppid(1) ... utime(11) stime(12) ... rss(21)
    return { pid, comm, ppid: Number(f[1]), cpuTicks: Number(f[11]) + Number(f[12]), rssBytes: Number(f[21]) * PAGE };
  } catch {
    return null;
  }
}

/** This process and all its descendants (PostgreSQL and Temporal are started by the stack). */
function processTree(root: number): ProcStat[] {
  if (!hasProc) return [];
  const all: ProcStat[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = readStat(Number(d));
    if (st) all.push(st);
  }
  const children = new Map<number, ProcStat[]>();
  for (const p of all) {
    const list = children.get(p.ppid) ?? [];
    list.push(p);
    children.set(p.ppid, list);
  }
  const out: ProcStat[] = [];
  const self = all.find((p) => p.pid === root);
  const stack = self ? [self] : [];
  while (stack.length) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(children.get(p.pid) ?? []));
  }
  return out;
}

export type CpuSnapshot = Map<number, { component: Component; ticks: number }>;

export class ProcessProbe {
  constructor(
    private readonly workerPid: () => number | undefined,
    /** The peer's server process (bench/peer.ts), counted apart. */
    private readonly peerPid: () => number | undefined = () => undefined,
  ) {}

  get available(): boolean {
    return hasProc;
  }

  private classify(p: ProcStat): Component {
    if (p.pid === process.pid) return 'main';
    if (p.pid === this.workerPid()) return 'worker';
    if (p.pid === this.peerPid()) return 'peer';
    if (p.comm.startsWith('postgres')) return 'postgres';
    if (p.comm.startsWith('temporal')) return 'temporal';
    return 'other';
  }

  cpu(): CpuSnapshot {
    const snap: CpuSnapshot = new Map();
    for (const p of processTree(process.pid)) snap.set(p.pid, { component: this.classify(p), ticks: p.cpuTicks });
    return snap;
  }

  /** CPU ms per component between two snapshots (processes that exited in between are not counted). */
  static cpuDelta(before: CpuSnapshot, after: CpuSnapshot): Record<Component, number> {
    const out: Record<Component, number> = { main: 0, worker: 0, postgres: 0, temporal: 0, peer: 0, other: 0 };
    for (const [pid, a] of after) {
      const b = before.get(pid)?.ticks ?? 0;
      out[a.component] += ((a.ticks - b) * 1000) / HZ;
    }
    return out;
  }

  /** Current RSS of this process and of the worker child, bytes. */
  rss(): { main: number; worker: number | null } {
    const pid = this.workerPid();
    return { main: process.memoryUsage.rss(), worker: pid && hasProc ? (readStat(pid)?.rssBytes ?? null) : null };
  }

  /** VmHWM (peak RSS over the process lifetime) from /proc/<pid>/status, bytes. */
  static hwm(pid: number): number | null {
    if (!hasProc) return null;
    try {
      const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : null;
    } catch {
      return null;
    }
  }
}

/** Samples RSS every `everyMs` while running; reports the peaks. */
export class RssSampler {
  private timer: NodeJS.Timeout | null = null;
  peakMain = 0;
  peakWorker: number | null = null;

  constructor(
    private readonly probe: ProcessProbe,
    private readonly everyMs = 100,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.everyMs);
  }

  stop(): void {
    this.sample();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private sample(): void {
    const r = this.probe.rss();
    this.peakMain = Math.max(this.peakMain, r.main);
    if (r.worker !== null) this.peakWorker = Math.max(this.peakWorker ?? 0, r.worker);
  }
}

// ---- machine -----------------------------------------------------------------------------------

export interface Machine {
  cpu: string;
  cores: number;
  ramGiB: number;
  node: string;
  os: string;
}

export function describeMachine(): Machine {
  const cpus = os.cpus();
  let osName = `${os.type()} ${os.release()}`;
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]+)"?/m.exec(fs.readFileSync('/etc/os-release', 'utf8'));
    if (pretty) osName = `${pretty[1]} (${os.type()} ${os.release()}, ${os.arch()})`;
  } catch {
    /* not Linux */
  }
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: os.availableParallelism?.() ?? cpus.length,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: osName,
  };
}

// ---- commit times ------------------------------------------------------------------------------

/**
 * Listens on the stack's own NOTIFY channels and records when each notification arrives. PostgreSQL
 * delivers a NOTIFY at commit (one per transaction and payload), so for a message (payload = message id)
 * or a backend run (payload = run id, with `:<seq>` after it) the arrivals are its commit times as this process sees them — the
 * api's listener sits on the same event loop. Row times are transaction starts; the two together split
 * "write" from "fan-out".
 */
export class CommitRecorder {
  private readonly arrivals = new Map<string, number[]>();
  private constructor(private readonly client: pg.Client) {}

  static async start(databaseUrl: string, now: () => number): Promise<CommitRecorder> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const rec = new CommitRecorder(client);
    client.on('notification', (n) => {
      if (!n.payload) return;
      const at = now();
      // A backend event's payload is `<run id>:<seq>`: keyed by the run, like a message's by its id.
      const key = n.payload.split(':')[0]!;
      const list = rec.arrivals.get(key);
      if (list) list.push(at);
      else rec.arrivals.set(key, [at]);
    });
    await client.query('listen message_events; listen agent_backend_events');
    return rec;
  }

  /** The first commit of `key` seen at or after `from` (epoch ms), if any. */
  commitAfter(key: string, from: number): number | null {
    // Row times have ms precision (timestamptz(3)); allow for the rounding.
    for (const at of this.arrivals.get(key) ?? []) if (at >= from - 1) return at;
    return null;
  }

  clear(): void {
    this.arrivals.clear();
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}
