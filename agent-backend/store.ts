/**
 * Run store: runs and their events in PostgreSQL, in the backend's own schema `agent_backend`, so any
 * replica can serve any run. Events are numbered per run by a counter on the run row, and the append
 * is one statement that also checks the run is still running: the first terminal event wins and
 * nothing is appended after it. Live fan-out uses LISTEN/NOTIFY on one connection per process.
 *
 * PostgreSQL outages (a restart, a failover: 10–60 s) are expected, not fatal. Every query goes
 * through `q()`, which turns a connection-class failure into `StoreUnavailableError` (routes answer
 * 503 + Retry-After, the emitter retries) and tracks whether this process can reach the database:
 * `reachableForMs()` feeds the reaper's "owner gone" judgement, and `onReconnect` callbacks (the
 * owner's heartbeat, the followers' catch-up read) run when the database answers again. The pool
 * discards connections a restart killed (pg destroys a client released with an error, and idle
 * ones that error are dropped), so it recovers by itself.
 *
 * Why one file: it is the backend's whole storage contract over one schema (each method one statement), and the
 * liveness and LISTEN rules below need the same connection state.
 *
 * What a run produced is stored with NUL and lone surrogates replaced by U+FFFD (core/platform/storable-text.ts): a
 * shell command that prints a NUL byte must not fail its run; the returned events hold what was stored.
 */
import pg from 'pg';
import { isDependencyUnavailable } from '../core/platform/dependency-errors.js';
import type { Logger } from '../core/platform/logger.js';
import type { RunStatus } from '../core/protocol/run.js';
import { storableJson, storableJsonText, storableText } from '../core/platform/storable-text.js';

const { Pool, Client } = pg;

export const SCHEMA = 'agent_backend';
const EVENTS_CHANNEL = 'agent_backend_events';
const CANCEL_CHANNEL = 'agent_backend_cancel';

export interface RunRow {
  run_id: string;
  idempotency_key: string | null;
  status: RunStatus;
  purpose: string;
  request: unknown;
  error: string | null;
  error_type: string | null;
  owner_id: string;
  /** Events appended so far (0: the run never started). */
  last_seq: number;
  cancel_requested: boolean;
  cancel_reason: string | null;
  cancel_message: string | null;
  created_at: string;
  updated_at: string;
}

export interface StoredEvent {
  id: string;
  run_id: string;
  type: string;
  data: unknown;
  created_at: string;
}

export interface TerminalUpdate {
  status: Exclude<RunStatus, 'running'>;
  error?: string | null;
  error_type?: string | null;
}

/** One owner append of a group commit (`appendOwnedEvents`). */
export interface OwnedAppend {
  runId: string;
  type: string;
  data: unknown;
  terminal?: TerminalUpdate;
  expectedSeq: number;
}

export type CancelOutcome =
  { kind: 'requested'; run: RunRow } | { kind: 'already_cancelled'; run: RunRow } | { kind: 'ended'; run: RunRow } | { kind: 'not_found' };

export interface StoreListener {
  onEvents(runId: string, seq?: number): void;
  onCancel(runId: string): void;
  /**
   * The LISTEN connection was re-established after a loss: notifications sent meanwhile are gone, so
   * every follower and every running run's cancel check must re-read from its cursor.
   */
  onReconnect?(): void;
}

/** The database could not be reached (connection refused/reset, shutting down, starting up, timeout). */
export class StoreUnavailableError extends Error {
  constructor(readonly cause: unknown) {
    super(`PostgreSQL is unreachable: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'StoreUnavailableError';
  }
}

/** True when `err` says "the database could not be reached", not "the statement was wrong" (one rule with the api's). */
export function isConnectionError(err: unknown): boolean {
  return err instanceof StoreUnavailableError || isDependencyUnavailable(err);
}

const DDL = `
create schema if not exists ${SCHEMA};
create table if not exists ${SCHEMA}.runs (
  run_id text primary key,
  idempotency_key text unique,
  status text not null,
  purpose text not null,
  request jsonb not null,
  error text,
  error_type text,
  last_seq bigint not null default 0,
  owner_id text not null,
  heartbeat_at timestamptz not null default now(),
  cancel_requested_at timestamptz,
  cancel_reason text,
  cancel_message text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists runs_running_heartbeat_idx on ${SCHEMA}.runs (heartbeat_at) where status = 'running';
create index if not exists runs_created_at_idx on ${SCHEMA}.runs (created_at);
create table if not exists ${SCHEMA}.events (
  run_id text not null references ${SCHEMA}.runs (run_id) on delete cascade,
  seq bigint not null,
  type text not null,
  data jsonb not null,
  created_at timestamptz not null default now(),
  primary key (run_id, seq)
);
`;

const RUN_COLUMNS = `run_id, idempotency_key, status, purpose, request, error, error_type, owner_id, last_seq::int as last_seq,
  cancel_requested_at is not null as cancel_requested, cancel_reason, cancel_message, created_at, updated_at`;

export class PgRunStore {
  private readonly pool: pg.Pool;
  private listenClient: pg.Client | null = null;
  private listener: StoreListener | null = null;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  /** Whether the last query failed for lack of a connection. */
  private down = false;
  /** When queries started succeeding again after the last outage this process saw (null: none seen). */
  private upSince: number | null = null;
  private readonly reconnectHooks: Array<() => void> = [];
  private listenerLost = false;

  /**
   * The lease's own connection (heartbeats): a renewal never queues behind the runs' writes for a pooled connection,
   * so a busy backend (every connection streaming events) keeps its runs' leases fresh (issue 30: a lease of seconds).
   */
  private readonly leasePool: pg.Pool;

  constructor(
    private readonly connectionString: string,
    private readonly logger: Logger,
    poolSize = 10,
  ) {
    const pools = (max: number, connectionTimeoutMillis: number) =>
      new Pool({
        connectionString,
        max,
        // A dead server must fail a checkout, not queue it forever (a blackholed host would never refuse).
        connectionTimeoutMillis,
        idleTimeoutMillis: 10_000,
        keepAlive: true,
      });
    this.pool = pools(poolSize, 5_000);
    this.leasePool = pools(1, 2_000);
    // An idle client losing its connection (e.g. a PostgreSQL restart) must not crash the process; pg
    // drops that client from the pool, and the next checkout opens a fresh connection.
    for (const p of [this.pool, this.leasePool])
      p.on('error', (err) => this.logger.warn({ err }, 'agent backend store: idle connection error'));
  }

  /**
   * How long this process has been able to reach the database without interruption: Infinity when it
   * has never seen an outage, 0 while it cannot reach it.
   */
  reachableForMs(): number {
    if (this.down) return 0;
    return this.upSince === null ? Infinity : Date.now() - this.upSince;
  }

  /** Called (without awaiting) whenever queries succeed again after an outage. */
  onReconnect(hook: () => void): void {
    this.reconnectHooks.push(hook);
  }

  /** One round trip (readiness: GET /readyz). */
  async ping(): Promise<void> {
    await this.q('select 1');
  }

  /** Every query of the store: classifies connection failures and tracks reachability. */
  private async q(text: string, params?: unknown[], pool = this.pool): Promise<pg.QueryResult> {
    let r: pg.QueryResult;
    try {
      r = await pool.query(text, params);
    } catch (err) {
      throw this.failed(err);
    }
    this.reached();
    return r;
  }

  /** A failure: connection-class ones mark the database unreachable and become StoreUnavailableError. */
  private failed(err: unknown): unknown {
    if (!isConnectionError(err)) return err;
    if (!this.down) this.logger.warn({ err }, 'agent backend store: PostgreSQL unreachable');
    this.down = true;
    this.upSince = null;
    return err instanceof StoreUnavailableError ? err : new StoreUnavailableError(err);
  }

  private reached(): void {
    if (!this.down) return;
    this.down = false;
    this.upSince = Date.now();
    this.logger.info('agent backend store: PostgreSQL reachable again');
    for (const hook of this.reconnectHooks) hook();
  }

  /** Creates the schema idempotently; an advisory lock keeps concurrently starting replicas apart. */
  async init(): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.failed(err);
    }
    try {
      await client.query(`select pg_advisory_lock(hashtext('agent_backend.schema'))`);
      try {
        await client.query(DDL);
      } finally {
        await client.query(`select pg_advisory_unlock(hashtext('agent_backend.schema'))`);
      }
      this.reached();
    } catch (err) {
      throw this.failed(err);
    } finally {
      client.release();
    }
  }

  /** Inserts a run, or returns the existing one for the same idempotency key (race-safe). */
  async createRun(input: {
    runId: string;
    idempotencyKey: string | null;
    purpose: string;
    request: unknown;
    ownerId: string;
  }): Promise<{ run: RunRow; created: boolean }> {
    const inserted = await this.q(
      `insert into ${SCHEMA}.runs (run_id, idempotency_key, status, purpose, request, owner_id)
       values ($1, $2, 'running', $3, $4::jsonb, $5)
       on conflict (idempotency_key) do nothing
       returning ${RUN_COLUMNS}`,
      [input.runId, input.idempotencyKey, input.purpose, JSON.stringify(input.request), input.ownerId],
    );
    if (inserted.rowCount === 1) return { run: toRun(inserted.rows[0]), created: true };
    const existing = await this.q(`select ${RUN_COLUMNS} from ${SCHEMA}.runs where idempotency_key = $1`, [input.idempotencyKey]);
    if (existing.rowCount !== 1) throw new Error('idempotent run create: conflicting run vanished');
    return { run: toRun(existing.rows[0]), created: false };
  }

  /**
   * Takes over a run that never started (no event yet: its creator's insert committed but the answer was lost, so no
   * process executes it): owned by `ownerId` itself (the caller checked it is not running it), or by an owner whose lease
   * lapsed — judged as the reaper judges (the database up for the whole grace). Fenced against the reaper and a second
   * adopter: exactly one of them changes the row. Returns the run when this caller now owns it.
   */
  async adoptUnstartedRun(runId: string, ownerId: string, staleAfterMs: number): Promise<RunRow | null> {
    const r = await this.q(
      `update ${SCHEMA}.runs set owner_id = $2, heartbeat_at = now(), updated_at = now()
        where run_id = $1 and status = 'running' and last_seq = 0
          and (owner_id = $2 or (heartbeat_at < now() - make_interval(secs => $3::double precision / 1000)
                                 and pg_postmaster_start_time() < now() - make_interval(secs => $3::double precision / 1000)))
        returning ${RUN_COLUMNS}`,
      [runId, ownerId, staleAfterMs],
    );
    return r.rowCount === 1 ? toRun(r.rows[0]) : null;
  }

  /** The run created under an idempotency key, if any (a retried create while the backend is at capacity). */
  async findRunByIdempotencyKey(key: string): Promise<RunRow | null> {
    const r = await this.q(`select ${RUN_COLUMNS} from ${SCHEMA}.runs where idempotency_key = $1`, [key]);
    return r.rowCount === 1 ? toRun(r.rows[0]) : null;
  }

  async getRun(runId: string): Promise<RunRow | null> {
    const r = await this.q(`select ${RUN_COLUMNS} from ${SCHEMA}.runs where run_id = $1`, [runId]);
    return r.rowCount === 1 ? toRun(r.rows[0]) : null;
  }

  /**
   * Appends one event while the run is running; a terminal event also ends the run. Returns null when
   * the run has already ended (or, with `staleAfterMs`, when its owner heartbeat is fresh).
   *
   * `expectedSeq` (the owner's appends) makes a retried append idempotent: the statement only applies
   * while `last_seq = expectedSeq - 1`. When a connection died after the commit but before the answer,
   * the retry finds its own event at `expectedSeq` (same type and data) and returns it instead of
   * writing it twice.
   */
  async appendEvent(
    runId: string,
    type: string,
    data: unknown,
    terminal?: TerminalUpdate,
    opts: { staleAfterMs?: number; expectedSeq?: number } = {},
  ): Promise<StoredEvent | null> {
    const raw = JSON.stringify(data) ?? 'null';
    const json = storableJsonText(raw);
    const err = (v: string | null | undefined) => (v == null ? null : storableText(v));
    const params: unknown[] = [runId, type, json, terminal?.status ?? null, err(terminal?.error), err(terminal?.error_type)];
    let extra = '';
    if (opts.staleAfterMs !== undefined) {
      params.push(opts.staleAfterMs);
      // Stale, and the database itself has been up for the whole grace (see findStaleRuns).
      const grace = `make_interval(secs => $${params.length}::double precision / 1000)`;
      extra += ` and heartbeat_at < now() - ${grace} and pg_postmaster_start_time() < now() - ${grace}`;
    }
    if (opts.expectedSeq !== undefined) {
      params.push(opts.expectedSeq);
      extra += ` and last_seq = $${params.length}::bigint - 1`;
    }
    const r = await this.q(
      `with r as (
         update ${SCHEMA}.runs
            set last_seq = last_seq + 1,
                updated_at = now(),
                status = coalesce($4, status),
                error = case when $4::text is null then error else $5 end,
                error_type = case when $4::text is null then error_type else $6 end
          where run_id = $1 and status = 'running'${extra}
          returning last_seq
       ), ins as (
         insert into ${SCHEMA}.events (run_id, seq, type, data)
         select $1, last_seq, $2, $3::jsonb from r
         returning seq, created_at
       )
       select ins.seq::text as seq, ins.created_at, pg_notify('${EVENTS_CHANNEL}', $1 || ':' || ins.seq) from ins`,
      params,
    );
    if (r.rowCount === 1)
      return {
        id: r.rows[0].seq,
        run_id: runId,
        type,
        data: json === raw ? data : JSON.parse(json),
        created_at: iso(r.rows[0].created_at),
      };
    if (opts.expectedSeq === undefined) return null;
    // Nothing applied: either an earlier attempt of this very append committed, or the run moved on
    // without us (ended elsewhere).
    return this.findOwnAppend(runId, opts.expectedSeq, type, data);
  }

  /**
   * Group commit (docs/decisions/0014): the owners' appends of several runs — at most one per run, each with its
   * `expectedSeq` — as ONE statement, with the same rules as `appendEvent` row by row. Returns, per entry in order, the
   * stored event, or null when that run's append did not apply (then, like `appendEvent`, an earlier attempt of the same
   * append may have committed: that event is looked up and returned). A connection failure fails every entry; none of
   * them is then known to be stored, and each is retried by its emitter (idempotent through `expectedSeq`).
   */
  async appendOwnedEvents(entries: OwnedAppend[]): Promise<Array<StoredEvent | null>> {
    if (new Set(entries.map((e) => e.runId)).size !== entries.length) throw new Error('appendOwnedEvents: one entry per run');
    const raw = JSON.stringify(
      entries.map((e, ord) => ({
        ord,
        run_id: e.runId,
        type: e.type,
        data: e.data ?? null,
        expected: e.expectedSeq,
        status: e.terminal?.status ?? null,
        error: e.terminal?.error ?? null,
        error_type: e.terminal?.error_type ?? null,
      })),
    );
    const batch = storableJsonText(raw);
    // The rows are locked in run id order first (lock), so two batches (or a batch and the heartbeat) cannot deadlock.
    const r = await this.q(
      `with b as (
         select * from jsonb_to_recordset($1::jsonb)
           as x(ord int, run_id text, type text, data jsonb, expected bigint, status text, error text, error_type text)
       ), lock as (
         select runs.run_id from ${SCHEMA}.runs runs join b using (run_id)
          where runs.status = 'running' and runs.last_seq = b.expected - 1
          order by runs.run_id for update of runs
       ), r as (
         update ${SCHEMA}.runs runs
            set last_seq = runs.last_seq + 1,
                updated_at = now(),
                status = coalesce(b.status, runs.status),
                error = case when b.status is null then runs.error else b.error end,
                error_type = case when b.status is null then runs.error_type else b.error_type end
           from b
          where runs.run_id = b.run_id and runs.run_id in (select run_id from lock)
            and runs.status = 'running' and runs.last_seq = b.expected - 1
          returning b.ord, runs.last_seq
       ), ins as (
         insert into ${SCHEMA}.events (run_id, seq, type, data)
         select b.run_id, r.last_seq, b.type, coalesce(b.data, 'null'::jsonb) from r join b using (ord)
         returning run_id, seq, created_at
       )
       select b.ord, ins.seq::text as seq, ins.created_at, pg_notify('${EVENTS_CHANNEL}', ins.run_id || ':' || ins.seq)
         from ins join b on b.run_id = ins.run_id`,
      [batch],
    );
    const out: Array<StoredEvent | null> = entries.map(() => null);
    for (const row of r.rows as Array<{ ord: number; seq: string; created_at: unknown }>) {
      const e = entries[row.ord]!;
      out[row.ord] = {
        id: row.seq,
        run_id: e.runId,
        type: e.type,
        data: batch === raw ? e.data : asStored(e.data),
        created_at: iso(row.created_at),
      };
    }
    // Not applied: an earlier attempt of this very append may have committed (its answer lost), or the run moved on.
    for (const [i, e] of entries.entries()) if (!out[i]) out[i] = await this.findOwnAppend(e.runId, e.expectedSeq, e.type, e.data);
    return out;
  }

  private async findOwnAppend(runId: string, seq: number, type: string, data: unknown): Promise<StoredEvent | null> {
    const raw = JSON.stringify(data) ?? 'null';
    const json = storableJsonText(raw);
    const mine = await this.q(
      `select seq::text as seq, created_at from ${SCHEMA}.events
        where run_id = $1 and seq = $2 and type = $3 and data = $4::jsonb`,
      [runId, seq, type, json],
    );
    if (mine.rowCount !== 1) return null;
    return {
      id: mine.rows[0].seq,
      run_id: runId,
      type,
      data: json === raw ? data : JSON.parse(json),
      created_at: iso(mine.rows[0].created_at),
    };
  }

  /** Events after the exclusive cursor, ordered. */
  async listEvents(runId: string, after: number, limit: number): Promise<StoredEvent[]> {
    const r = await this.q(
      `select seq::text as seq, type, data, created_at from ${SCHEMA}.events
        where run_id = $1 and seq > $2 order by events.seq limit $3`,
      [runId, after, limit],
    );
    return r.rows.map((row) => ({ id: row.seq, run_id: runId, type: row.type, data: row.data, created_at: iso(row.created_at) }));
  }

  /** Records a cancel intent; the owning process is woken through NOTIFY (and its heartbeat poll). */
  async requestCancel(runId: string, reason: string | null, message: string | null): Promise<CancelOutcome> {
    const r = await this.q(
      `with u as (
         update ${SCHEMA}.runs
            set cancel_requested_at = coalesce(cancel_requested_at, now()),
                cancel_reason = coalesce(cancel_reason, $2),
                cancel_message = coalesce(cancel_message, $3),
                updated_at = now()
          where run_id = $1 and status = 'running'
          returning ${RUN_COLUMNS}
       )
       select u.*, pg_notify('${CANCEL_CHANNEL}', $1) from u`,
      [runId, reason, message],
    );
    if (r.rowCount === 1) return { kind: 'requested', run: toRun(r.rows[0]) };
    const run = await this.getRun(runId);
    if (!run) return { kind: 'not_found' };
    if (run.status === 'cancelled') return { kind: 'already_cancelled', run };
    if (run.status === 'running') return this.requestCancel(runId, reason, message); // raced a create
    return { kind: 'ended', run };
  }

  /**
   * Refreshes the heartbeat of the runs this process is executing (not merely owns: a run whose task
   * vanished must go stale); reports which of them should cancel.
   */
  async heartbeat(ownerId: string, runIds: string[]): Promise<Array<{ runId: string; cancelRequested: boolean }>> {
    if (runIds.length === 0) return [];
    const r = await this.q(
      `update ${SCHEMA}.runs set heartbeat_at = now()
        where owner_id = $1 and status = 'running' and run_id = any($2::text[])
        returning run_id, cancel_requested_at is not null as cancel_requested`,
      [ownerId, runIds],
      this.leasePool,
    );
    return r.rows.map((row) => ({ runId: row.run_id, cancelRequested: row.cancel_requested }));
  }

  /**
   * Running runs nobody has heartbeated for `staleAfterMs` (owner gone, or its task vanished), judged
   * only over time the database was up: a run is not stale while PostgreSQL itself has been running
   * for less than the grace (after a restart or failover every owner gets a full grace to heartbeat
   * again). The caller adds its own side of the rule (RunManager.reapStale: its own uninterrupted
   * reachability).
   */
  async findStaleRuns(staleAfterMs: number): Promise<string[]> {
    const r = await this.q(
      `select run_id from ${SCHEMA}.runs
        where status = 'running'
          and heartbeat_at < now() - make_interval(secs => $1::double precision / 1000)
          and pg_postmaster_start_time() < now() - make_interval(secs => $1::double precision / 1000)
        order by created_at limit 100`,
      [staleAfterMs],
    );
    return r.rows.map((row) => row.run_id);
  }

  /** Deletes ended runs (and their events) older than the retention window. */
  async deleteExpired(retentionHours: number): Promise<number> {
    const r = await this.q(
      `delete from ${SCHEMA}.runs
        where status <> 'running' and created_at < now() - make_interval(hours => $1)`,
      [retentionHours],
    );
    return r.rowCount ?? 0;
  }

  /** Starts the one LISTEN connection of this process; reconnects on loss (callers also poll). */
  async listen(listener: StoreListener): Promise<void> {
    this.listener = listener;
    await this.connectListener();
  }

  private async connectListener(): Promise<void> {
    if (this.closed || !this.listener) return;
    const client = new Client({ connectionString: this.connectionString, connectionTimeoutMillis: 5_000, keepAlive: true });
    const retry = (err?: unknown) => {
      if (!this.listenerLost && !this.closed) this.logger.warn({ err }, 'agent backend store: LISTEN connection lost, reconnecting');
      this.listenerLost = true;
      if (this.listenClient === client) this.listenClient = null;
      client.removeAllListeners();
      client.on('error', () => undefined);
      client.end().catch(() => undefined);
      if (!this.closed && !this.reconnectTimer) {
        this.reconnectTimer = setTimeout(() => {
          this.reconnectTimer = null;
          void this.connectListener();
        }, 1000);
        this.reconnectTimer.unref();
      }
    };
    client.on('error', retry);
    client.on('end', () => retry());
    client.on('notification', (msg) => {
      if (!msg.payload) return;
      if (msg.channel === EVENTS_CHANNEL) {
        // `<run id>:<seq>` (a backend of an older version sends the run id alone: a wake without a seq).
        const [runId, seq] = msg.payload.split(':');
        this.listener?.onEvents(runId!, seq ? Number(seq) : undefined);
      } else if (msg.channel === CANCEL_CHANNEL) this.listener?.onCancel(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${EVENTS_CHANNEL}; listen ${CANCEL_CHANNEL}`);
      this.listenClient = client;
      if (this.listenerLost) {
        // Re-subscribed: whatever was notified while we were away is lost, so everyone re-reads.
        this.listenerLost = false;
        this.logger.info('agent backend store: LISTEN re-subscribed, catching up');
        this.listener?.onReconnect?.();
      }
    } catch (err) {
      retry(err);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const c = this.listenClient;
    this.listenClient = null;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      await c.end().catch(() => undefined);
    }
    await this.pool.end().catch(() => undefined);
    await this.leasePool.end().catch(() => undefined);
  }
}

/** An event's data as it was stored: the value itself, or, when characters were replaced, the stored JSON's value. */
function asStored(data: unknown): unknown {
  return JSON.parse(storableJson(data));
}

function iso(v: unknown): string {
  return v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString();
}

function toRun(row: Record<string, unknown>): RunRow {
  return {
    run_id: row.run_id as string,
    idempotency_key: (row.idempotency_key as string | null) ?? null,
    status: row.status as RunStatus,
    purpose: row.purpose as string,
    request: row.request,
    error: (row.error as string | null) ?? null,
    error_type: (row.error_type as string | null) ?? null,
    owner_id: row.owner_id as string,
    last_seq: Number(row.last_seq ?? 0),
    cancel_requested: Boolean(row.cancel_requested),
    cancel_reason: (row.cancel_reason as string | null) ?? null,
    cancel_message: (row.cancel_message as string | null) ?? null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}
