/**
 * The client event log (docs/ARCHITECTURE.md "Streaming"): one row per SSE event of a message, numbered per
 * message, unique on its source key so a replayed append stores nothing twice. Inserts fire
 * NOTIFY message_events (trigger in the init migration); readers wake up and read rows by seq, so any
 * api replica can serve any stream and a reconnect replays exactly from Last-Event-ID.
 *
 * Every writer stores its events' data and the answer text with NUL and lone surrogates replaced by U+FFFD
 * (core/platform/storable-text.ts): whatever a producer put in an event, its turn does not fail on storing it.
 */
import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Db } from '../platform/db.js';
import { readEventsAfter } from '../platform/hot-sql.js';
import { isDependencyUnavailable } from '../platform/dependency-errors.js';
import { storableJson, storableText } from '../platform/storable-text.js';
import { isTerminalClientEvent, TERMINAL_CLIENT_EVENTS, type NewClientEvent, type StoredClientEvent } from './client-events.js';
import type { Logger } from '../platform/logger.js';

type Tx = Pick<Db, '$queryRaw' | '$executeRaw'>;

/**
 * Appends events for one message, in the caller's transaction or alone, as ONE statement. Seq numbers
 * are dense per message: they are allocated by bumping `messages.event_seq`, whose row lock serialises
 * concurrent appenders and whose re-read after the lock gives each the latest committed value.
 * Duplicates (same source key, in the log or in the batch) are skipped and use no seq. (A duplicate
 * committed by a concurrent appender between this statement's snapshot and its lock would leave a gap;
 * appenders of one message are fenced by the run cursor, so that race needs two writers of the same event.)
 */
export async function appendEvents(tx: Tx, messageId: string, events: NewClientEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const batch = storableJson(events.map((e, ord) => ({ ord, event: e.event, data: e.data, source_key: e.sourceKey })));
  return tx.$executeRaw`
    with fresh as (
      select distinct on (source_key) ord, event, data, source_key
        from jsonb_to_recordset(${batch}::jsonb) as x(ord int, event text, data jsonb, source_key text)
       where not exists (select 1 from message_events e where e.message_id = ${messageId}::uuid and e.source_key = x.source_key)
       order by source_key, ord
    ), alloc as (
      update messages set event_seq = event_seq + (select count(*) from fresh)
       where id = ${messageId}::uuid and exists (select 1 from fresh)
      returning event_seq - (select count(*) from fresh) as base
    )
    insert into message_events (message_id, seq, event, data, source_key)
    select ${messageId}::uuid, alloc.base + row_number() over (order by f.ord), f.event, f.data, f.source_key
      from fresh f cross join alloc
    on conflict (message_id, source_key) do nothing`;
}

/**
 * The streaming hot path in one statement: move the run's consumption cursor (compare-and-set against
 * the expected one), append the answer text and publish it as one `agent_message` event. Returns false
 * when the cursor had moved (another attempt owns the run): then nothing was written.
 */
export async function commitAnswerText(
  db: Tx,
  p: { messageId: string; expectedCursor: string | null; newCursor: string; text: string; event: NewClientEvent },
): Promise<boolean> {
  const rows = await db.$queryRaw<{ seq: number }[]>`
    with cas as (
      update agent_backend_runs set cursor = ${p.newCursor}, updated_at = now()
       where message_id = ${p.messageId}::uuid and cursor is not distinct from ${p.expectedCursor}
      returning message_id
    ), msg as (
      update messages set answer = answer || ${storableText(p.text)}, event_seq = event_seq + 1, updated_at = now()
       where id = (select message_id from cas)
      returning event_seq
    )
    insert into message_events (message_id, seq, event, data, source_key)
    select ${p.messageId}::uuid, msg.event_seq, ${p.event.event}, ${storableJson(p.event.data)}::jsonb, ${p.event.sourceKey} from msg
    returning seq`;
  // No ON CONFLICT: the source key carries the new cursor, so it cannot exist while the cursor is behind
  // it; if it ever did, the unique violation undoes the whole statement rather than doubling the text.
  return rows.length > 0;
}

/** One message's text commit of a group (`commitAnswerTexts`): the arguments of `commitAnswerText`. */
export interface AnswerTextCommit {
  messageId: string;
  expectedCursor: string | null;
  newCursor: string;
  text: string;
  event: NewClientEvent;
}

/**
 * Group commit (docs/decisions/0014): `commitAnswerText` for several messages (at most one entry each) as ONE
 * statement, each entry under its own cursor compare-and-set. Returns, per entry in order, whether it applied (false:
 * that message's cursor had moved, and nothing of it was written). The cursor rows are locked in message id order
 * first, so two groups cannot deadlock.
 */
export async function commitAnswerTexts(db: Tx, entries: AnswerTextCommit[]): Promise<boolean[]> {
  if (new Set(entries.map((e) => e.messageId)).size !== entries.length) throw new Error('commitAnswerTexts: one entry per message');
  const batch = storableJson(
    entries.map((e) => ({
      message_id: e.messageId,
      expected: e.expectedCursor,
      new_cursor: e.newCursor,
      text: e.text,
      event: e.event.event,
      data: e.event.data,
      source_key: e.event.sourceKey,
    })),
  );
  const rows = await db.$queryRaw<{ message_id: string }[]>`
    with b as (
      select * from jsonb_to_recordset(${batch}::jsonb)
        as x(message_id uuid, expected text, new_cursor text, text text, event text, data jsonb, source_key text)
    ), lock as (
      select r.message_id from agent_backend_runs r join b using (message_id)
       where r.cursor is not distinct from b.expected
       order by r.message_id for update of r
    ), cas as (
      update agent_backend_runs r set cursor = b.new_cursor, updated_at = now()
        from b
       where r.message_id = b.message_id and r.message_id in (select message_id from lock) and r.cursor is not distinct from b.expected
      returning r.message_id
    ), msg as (
      update messages m set answer = m.answer || b.text, event_seq = m.event_seq + 1, updated_at = now()
        from b
       where m.id = b.message_id and m.id in (select message_id from cas)
      returning m.id, m.event_seq
    )
    insert into message_events (message_id, seq, event, data, source_key)
    select msg.id, msg.event_seq, b.event, b.data, b.source_key from msg join b on b.message_id = msg.id
    returning message_id::text`;
  const applied = new Set(rows.map((r) => r.message_id));
  return entries.map((e) => applied.has(e.messageId.toLowerCase()));
}

/**
 * A stream's read (`followEvents`): the events after `afterSeq` and, when there are none, the seq of the last terminal
 * event — one prepared statement on the pool (core/platform/hot-sql.ts), where Prisma sent two per empty wake-up.
 */
async function readBatch(db: Db, messageId: string, afterSeq: number, limit = 500) {
  const r = await readEventsAfter(db, messageId, afterSeq, limit, [...TERMINAL_CLIENT_EVENTS]);
  // Rows were written from NewClientEvent values only (appendEvents/commitAnswerText): the stored shape is trusted.
  return { events: r.events as StoredClientEvent[], terminalSeq: r.terminalSeq };
}

export async function readEvents(db: Db, messageId: string, afterSeq: number, limit = 500): Promise<StoredClientEvent[]> {
  return (await readBatch(db, messageId, afterSeq, limit)).events;
}

/**
 * One LISTEN connection per process, fanning notifications out by message id. Reconnects on error. Other channels
 * ride on the same connection (`onChannel`: the gateway cache's invalidations, core/domain/llm/gateway-cache.ts).
 */
export class EventNotifier {
  private readonly emitter = new EventEmitter();
  private client: pg.Client | null = null;
  private closed = false;
  /** Handlers of the other channels; `listened`: those the current connection has LISTENed to. */
  private readonly channels = new Map<string, Set<(payload?: string) => void>>();
  private listened = new Set<string>();

  constructor(
    private readonly databaseUrl: string,
    private readonly logger?: Logger,
    /** How long one connect may take (config PG_LISTEN_CONNECT_TIMEOUT_MS); past it the attempt is retried. */
    private readonly connectTimeoutMs = 10_000,
  ) {
    this.emitter.setMaxListeners(0);
  }

  /**
   * Starts listening. A database that cannot be reached now does not fail the start (issue 30: an api starts and
   * answers /readyz while PostgreSQL is down): the connection is retried with backoff, readers poll meanwhile, and
   * every reader is woken once it is up. Other errors (a bad URL, a refused login) still throw.
   */
  async start(): Promise<void> {
    try {
      await this.connect();
    } catch (err) {
      if (!isDependencyUnavailable(err)) throw err;
      this.logger?.warn({ err: (err as Error).message }, 'event notifier: PostgreSQL unreachable at start; retrying in the background');
      this.reconnect(500);
    }
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== null;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: this.connectTimeoutMs });
    client.on('notification', (n) => {
      if (n.channel !== 'message_events') for (const fn of this.channels.get(n.channel) ?? []) fn(n.payload);
      else if (n.payload) this.emitter.emit(n.payload);
    });
    client.on('error', (err) => {
      this.client = null;
      this.listened = new Set();
      if (this.closed) return;
      this.logger?.warn({ err: err.message }, 'event notifier connection lost; reconnecting');
      this.reconnect(500);
    });
    try {
      await client.connect();
      await client.query('LISTEN message_events');
      for (const channel of this.channels.keys()) await client.query(`LISTEN "${channel}"`);
    } catch (err) {
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.listened = new Set(this.channels.keys());
    // Wake everyone once after a reconnect: they re-read rows, so nothing is missed (a channel's handlers: no payload).
    for (const name of this.emitter.eventNames()) this.emitter.emit(name);
    for (const fns of this.channels.values()) for (const fn of fns) fn(undefined);
  }

  /** True while the connection is up and LISTENs to `channel` (until then its notifications may be missed). */
  listensTo(channel: string): boolean {
    return this.client !== null && this.listened.has(channel);
  }

  /**
   * Calls `fn` with each notification's payload on `channel` (a plain identifier), and with none once the channel is
   * listened to after a (re)connect: whatever was sent meanwhile may have been missed.
   */
  onChannel(channel: string, fn: (payload?: string) => void): () => void {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
    let fns = this.channels.get(channel);
    if (!fns) this.channels.set(channel, (fns = new Set()));
    fns.add(fn);
    const client = this.client;
    if (client && !this.listened.has(channel))
      client.query(`LISTEN "${channel}"`).then(
        () => {
          if (this.client !== client) return;
          this.listened.add(channel);
          for (const f of this.channels.get(channel) ?? []) f(undefined);
        },
        () => undefined, // the connection's error handler reconnects, and the reconnect LISTENs
      );
    return () => void fns.delete(fn);
  }

  private reconnecting = false;

  /** Retries start() with backoff until it works (a PostgreSQL restart or failover can take a minute). */
  private reconnect(delayMs: number): void {
    if (this.closed || this.reconnecting) return;
    this.reconnecting = true;
    setTimeout(() => {
      this.connect().then(
        () => {
          this.reconnecting = false;
          if (this.closed) void this.client?.end().catch(() => undefined);
          else this.logger?.info('event notifier reconnected');
        },
        () => {
          this.reconnecting = false;
          this.reconnect(Math.min(delayMs * 2, 5000));
        },
      );
    }, delayMs);
  }

  on(messageId: string, fn: () => void): () => void {
    this.emitter.on(messageId, fn);
    return () => this.emitter.off(messageId, fn);
  }

  async stop(): Promise<void> {
    this.closed = true;
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }
}

/**
 * Yields a message's events after `afterSeq`, live, until a terminal event (or abort).
 * Rows are the source of truth; notifications only wake the reader, with a poll as a safety net.
 */
export async function* followEvents(
  db: Db,
  notifier: EventNotifier,
  messageId: string,
  afterSeq: number,
  signal: AbortSignal,
  pollMs = 1000,
): AsyncGenerator<StoredClientEvent> {
  let last = afterSeq;
  let wake: (() => void) | null = null;
  let pending = false;
  const off = notifier.on(messageId, () => {
    pending = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  try {
    while (!signal.aborted) {
      pending = false;
      const read = await waitingOutDbOutage(() => readBatch(db, messageId, last), signal);
      if (read === undefined) return;
      const batch = read.events;
      for (const e of batch) {
        last = e.seq;
        yield e;
        if (isTerminalClientEvent(e.event)) return;
      }
      if (batch.length === 500 || pending) continue;
      // Nothing after the cursor: if the turn already ended at or before it (a re-attach at or past its end), close
      // now. The terminal seq comes from the same read (same snapshot), so a terminal past the cursor would have been
      // in the batch; should one ever be reported past it, loop and read it.
      if (batch.length === 0 && read.terminalSeq !== null) {
        if (read.terminalSeq <= last) return;
        continue;
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    off();
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs a read, waiting out a PostgreSQL outage (restart, failover) with backoff instead of failing: a
 * stream's connection stays open (its pings keep going) and resumes at its cursor. Resolves `undefined`
 * if the reader goes away meanwhile; any other error is thrown.
 */
async function waitingOutDbOutage<T>(read: () => Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!isDependencyUnavailable(err)) throw err;
      if (signal.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.min(2000, 250 * 2 ** attempt));
        signal.addEventListener('abort', done, { once: true });
        function done() {
          clearTimeout(t);
          signal.removeEventListener('abort', done);
          resolve();
        }
      });
      if (signal.aborted) return undefined;
    }
  }
}
