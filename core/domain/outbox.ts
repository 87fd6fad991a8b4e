/**
 * The transactional outbox of what the api owes Temporal: a submitted form's `formSubmitted` signal, a
 * stop's or a deleted conversation's workflow cancel. The state change and its `temporal_outbox` row commit
 * in ONE transaction; the request then delivers at once (fast path), and a dispatcher in every api and
 * worker process delivers whatever is still pending — after a Temporal outage, or after the process that
 * accepted the request died. No leader: rows are claimed with `FOR UPDATE SKIP LOCKED` and a lease (the
 * claim pushes `next_attempt_at` forward), so a dead claimant's rows come due again by themselves.
 *
 * Delivering twice is harmless, which is what makes a lease (instead of exactly-once bookkeeping) enough:
 * the workflow's `formSubmitted` handler keeps one submission per form id (a duplicate sets the same value,
 * a submission for another form is ignored), and cancelling a workflow whose cancel was already requested
 * is a no-op on the server. A workflow that is gone or already closed (`WorkflowNotFoundError`) is
 * final: the row is marked delivered with that as its last error.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { z } from 'zod';
import type { Db, Prisma } from '../platform/db.js';
import type { Logger } from '../platform/logger.js';
import { PollingLoop } from '../platform/polling-loop.js';

/** How long the claimant of a row (or the request that just wrote it) has before another dispatcher may retry it. */
export const OUTBOX_LEASE_MS = 15_000;
/** One delivery attempt's deadline (well inside the lease). */
const DELIVERY_DEADLINE_MS = 5_000;
const MAX_BACKOFF_MS = 5_000;
const BATCH = 20;
/** Delivered rows are kept this long (who signalled what, when), then pruned. */
const RETENTION_DAYS = 7;

export const OutboxMessage = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('signal'),
    workflowId: z.string().min(1),
    signalName: z.string().min(1),
    /** The signal's single argument: ids and small values only. */
    payload: z.record(z.string(), z.unknown()),
  }),
  z.object({ kind: z.literal('cancel'), workflowId: z.string().min(1) }),
]);
export type OutboxMessage = z.infer<typeof OutboxMessage>;

/** A row as written or claimed: what to deliver, and its id. */
export type OutboxEntry = OutboxMessage & { id: string; attempts: number };

const ClaimedRow = z.object({
  id: z.string(),
  kind: z.enum(['signal', 'cancel']),
  workflow_id: z.string(),
  signal_name: z.string().nullable(),
  payload: z.unknown(),
  attempts: z.number().int(),
});

function toEntry(row: z.infer<typeof ClaimedRow>): OutboxEntry {
  const msg = OutboxMessage.parse(
    row.kind === 'signal'
      ? { kind: 'signal', workflowId: row.workflow_id, signalName: row.signal_name, payload: row.payload }
      : { kind: 'cancel', workflowId: row.workflow_id },
  );
  return { ...msg, id: row.id, attempts: row.attempts };
}

/**
 * Writes the delivery row inside the caller's transaction. The row is born leased to the writer (attempt 1
 * is its fast path); if the writer dies before delivering, the row comes due for every dispatcher after
 * the lease.
 */
export async function enqueueOutbox(tx: Prisma.TransactionClient | Db, message: OutboxMessage): Promise<OutboxEntry> {
  const m = OutboxMessage.parse(message);
  const rows = await tx.$queryRaw<{ id: string }[]>`
    insert into temporal_outbox (id, kind, workflow_id, signal_name, payload, attempts, next_attempt_at)
    values (gen_random_uuid(), ${m.kind}, ${m.workflowId}, ${m.kind === 'signal' ? m.signalName : null},
            ${JSON.stringify(m.kind === 'signal' ? m.payload : {})}::jsonb, 1, now() + make_interval(secs => ${OUTBOX_LEASE_MS / 1000}::float8))
    returning id::text as id`;
  return { ...m, id: rows[0]!.id, attempts: 1 };
}

export type DeliveryResult = 'delivered' | 'gone' | 'pending';

export interface OutboxDispatcherOptions {
  db: Db;
  /** The Temporal client to deliver with; null while this process has none yet (a worker still connecting). */
  temporal: () => Client | null;
  logger: Logger;
  /** Idle poll interval. */
  pollMs?: number;
}

export class OutboxDispatcher extends PollingLoop {
  private readonly db: Db;
  private readonly logger: Logger;
  private lastPrune = 0;

  constructor(private readonly opts: OutboxDispatcherOptions) {
    const logger = opts.logger.child({ component: 'temporal-outbox' });
    super({ name: 'outbox', logger, pollMs: opts.pollMs ?? 1000, batch: BATCH });
    this.db = opts.db;
    this.logger = logger;
  }

  protected override afterDrain(): Promise<void> {
    return this.prune();
  }

  /**
   * The fast path, right after the transaction that wrote `entry` committed: one attempt now, so latency
   * is unchanged while Temporal is up. Never throws: on failure the row is rescheduled and a dispatcher
   * (this one or any other) delivers it later.
   */
  async deliverNow(entry: OutboxEntry): Promise<DeliveryResult> {
    return this.attempt(entry);
  }

  /**
   * Claims due rows and delivers them; returns how many were claimed, or null without a Temporal client
   * yet (nothing claimed). Throws if the database is unreachable.
   */
  async drainOnce(): Promise<number | null> {
    const client = this.opts.temporal();
    if (!client) return null;
    const rows = await this.db.$queryRaw<unknown[]>`
      update temporal_outbox o
         set next_attempt_at = now() + make_interval(secs => ${OUTBOX_LEASE_MS / 1000}::float8), attempts = o.attempts + 1
       where o.id in (select id from temporal_outbox
                       where delivered_at is null and next_attempt_at <= now()
                       order by next_attempt_at limit ${BATCH}
                       for update skip locked)
      returning o.id::text as id, o.kind, o.workflow_id, o.signal_name, o.payload, o.attempts`;
    const entries = rows.map((r) => toEntry(ClaimedRow.parse(r)));
    await Promise.all(entries.map((e) => this.attempt(e)));
    return entries.length;
  }

  private async attempt(entry: OutboxEntry): Promise<DeliveryResult> {
    const client = this.opts.temporal();
    const log = { outbox_id: entry.id, kind: entry.kind, workflow_id: entry.workflowId, attempt: entry.attempts };
    let result: DeliveryResult;
    let error: string | null = null;
    try {
      if (!client) throw new Error('no Temporal connection yet');
      await client.withDeadline(Date.now() + DELIVERY_DEADLINE_MS, () => send(client, entry));
      result = 'delivered';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) {
        // Closed or never started: nothing will ever take this delivery (a stop after the turn ended, a
        // submission racing the form's expiry, which then finds the submission itself).
        result = 'gone';
        error = `workflow not found or already closed: ${err.message}`;
        // A cancel for a finished turn is routine; a signal nobody waits for anymore deserves a look.
        this.logger[entry.kind === 'signal' ? 'warn' : 'info'](log, 'outbox: workflow already closed; delivery dropped');
      } else {
        result = 'pending';
        error = (err as Error).message ?? String(err);
        const level = entry.attempts === 1 || entry.attempts % 20 === 0 ? 'warn' : 'debug';
        this.logger[level]({ ...log, err: error }, 'outbox: delivery failed; will retry');
      }
    }
    try {
      if (result === 'pending') {
        const backoffMs = Math.round(Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.max(0, entry.attempts - 1)) * (0.8 + Math.random() * 0.4));
        await this.db.$executeRaw`
          update temporal_outbox set next_attempt_at = now() + make_interval(secs => ${backoffMs / 1000}::float8), last_error = ${error}
           where id = ${entry.id}::uuid and delivered_at is null`;
      } else {
        await this.db.$executeRaw`
          update temporal_outbox set delivered_at = now(), last_error = ${error} where id = ${entry.id}::uuid and delivered_at is null`;
        if (result === 'delivered' && entry.attempts > 1) this.logger.info(log, 'outbox: delivered after retries');
      }
    } catch (err) {
      // The row keeps its lease and comes due again: at worst it is delivered once more (harmless, see above).
      this.logger.warn({ ...log, err: (err as Error).message }, 'outbox: could not record the delivery outcome');
    }
    return result;
  }

  private async prune(): Promise<void> {
    if (Date.now() - this.lastPrune < 3_600_000) return;
    this.lastPrune = Date.now();
    await this.db.$executeRaw`delete from temporal_outbox where delivered_at < now() - make_interval(days => ${RETENTION_DAYS}::int)`;
  }
}

function send(client: Client, entry: OutboxEntry): Promise<void> {
  const handle = client.workflow.getHandle(entry.workflowId);
  if (entry.kind === 'signal') return handle.signal(entry.signalName, entry.payload);
  return handle.cancel().then(() => undefined);
}
