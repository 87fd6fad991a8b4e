/**
 * The turn sweeper (issue 30): what an outage can leave behind that no workflow will ever clean up, found and ended
 * with the outcome recorded. Runs in every standalone worker (worker.ts), every TURN_SWEEP_INTERVAL_MS (core/platform/config.ts); concurrent sweepers
 * are harmless (every write is conditional on the state it read).
 *
 * - A message `pending` or `running` whose workflow does not exist (the api's transaction committed, then Temporal
 *   refused the start and PostgreSQL was down for the rollback, or the api died between the two) or has closed without
 *   ending it (terminated by an operator): marked failed, its `error` event published, its usage from the ledger, the
 *   conversation's lock released — one transaction, as every other terminal. `runAgent` refuses such a message if its
 *   workflow starts after all (activities/run-agent/index.ts).
 * - A conversation lock held by a message that already ended (its workflow died between the terminal and its
 *   `releaseTurn`, or a release met an outage): released, and the release noted on the message.
 *
 * - Workspace copies and removals a crash interrupted (`.partial-*`, `.trash-*` in WORKSPACES_DIR) older than an hour:
 *   removed by descriptor (core/domain/workspace-tree.ts sweepLeftovers).
 *
 * - The inspector's model inputs older than MODEL_INPUT_RETENTION_DAYS: deleted, at most once an hour per worker
 *   (core/domain/llm/model-input-retention.ts); needs no Temporal.
 *
 * Only rows untouched for TURN_SWEEP_MIN_AGE_MS are judged, TURN_SWEEP_BATCH of each kind a pass: a turn start in flight (bounded at 10 s, api/turns/start.ts) is never
 * mistaken for an orphan. Temporal unreachable: the pass stops (nothing can be judged without it).
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { EnvSchema, type Env } from '../core/platform/config.js';
import type { Db, Prisma } from '../core/platform/db.js';
import { isDependencyUnavailable } from '../core/platform/dependency-errors.js';
import type { TurnErrorDetails } from '../activities/errors.js';
import { appendEvents } from '../core/protocol/event-log.js';
import type { Logger } from '../core/platform/logger.js';
import { bucketOf, type BucketConfig, type GcReport, type WorkspaceBucket } from '../core/domain/workspace-bucket.js';
import { errorEvents } from '../activities/final-events.js';
import { ledgerUsage, usageColumns } from '../activities/ledger-usage.js';
import { releaseTurnLock } from '../core/domain/turn/turn-lock.js';
import { wakeConversationQueue } from '../core/domain/turn/queue.js';
import { conversationQueueWorkflowId } from '../core/protocol/workflow-contract.js';
import { sweepLeftovers } from '../core/domain/workspace-tree.js';
import { MODEL_INPUT_PRUNE_INTERVAL_MS, pruneModelInputs } from '../core/domain/llm/model-input-retention.js';

/** Unset options: the settings' documented defaults (the worker and the stack pass the configured ones). */
const DEFAULTS = EnvSchema.parse({});

export interface SweepResult {
  /** Messages ended by the sweeper (no workflow, or a closed one). */
  failed: string[];
  /** Conversations whose lock a terminal message held. */
  released: string[];
  /** Conversations with queued messages and no coordinator running, whose coordinator was (re)started. */
  woken?: string[];
  /** Interrupted workspace copies and removals removed from WORKSPACES_DIR. */
  leftovers?: string[];
  /** Model-input rows deleted past MODEL_INPUT_RETENTION_DAYS (0 on a pass that did not prune). */
  modelInputsPruned?: number;
  /** WORKSPACE_STORE=s3: what the bucket's GC deleted this pass. */
  bucket?: GcReport;
}

export interface TurnSweeperOptions {
  db: Db;
  /** The Temporal client once connected (null: not yet; the pass is skipped). */
  temporal: () => Client | null;
  logger: Logger;
  /** TURN_SWEEP_INTERVAL_MS. */
  everyMs?: number;
  /** TURN_SWEEP_MIN_AGE_MS. */
  graceMs?: number;
  /** TURN_SWEEP_BATCH. */
  batch?: number;
  /** TEMPORAL_TASK_QUEUE: where a conversation queue's coordinator is (re)started; unset, queues are not woken. */
  taskQueue?: string;
  /** WORKSPACES_DIR: where interrupted workspace copies and removals are swept; unset, none are. */
  workspacesDir?: string;
  /** MODEL_INPUT_RETENTION_DAYS. */
  modelInputRetentionDays?: number;
  /**
   * WORKSPACE_STORE=s3: the workspace bucket, whose unreferenced blobs and old manifest versions each pass deletes
   * (core/domain/workspace-bucket.ts gc); WORKSPACES_DIR is then not swept (the worker never uses it).
   */
  bucket?: { bucket: WorkspaceBucket; graceMs: number; keepVersions: number } | null;
}

/** The bucket GC of WORKSPACE_STORE=s3 (S3_GC_GRACE_MS, S3_KEEP_VERSIONS); null in posix mode. */
export function bucketSweep(c: BucketConfig & Pick<Env, 'S3_GC_GRACE_MS' | 'S3_KEEP_VERSIONS'>): TurnSweeperOptions['bucket'] {
  const bucket = bucketOf(c);
  return bucket ? { bucket, graceMs: c.S3_GC_GRACE_MS, keepVersions: c.S3_KEEP_VERSIONS } : null;
}

/** The sweeper's timings as configured (TURN_SWEEP_*). */
export function sweeperTimings(
  c: Pick<Env, 'TURN_SWEEP_INTERVAL_MS' | 'TURN_SWEEP_MIN_AGE_MS' | 'TURN_SWEEP_BATCH' | 'MODEL_INPUT_RETENTION_DAYS'>,
): Pick<TurnSweeperOptions, 'everyMs' | 'graceMs' | 'batch' | 'modelInputRetentionDays'> {
  return {
    everyMs: c.TURN_SWEEP_INTERVAL_MS,
    graceMs: c.TURN_SWEEP_MIN_AGE_MS,
    batch: c.TURN_SWEEP_BATCH,
    modelInputRetentionDays: c.MODEL_INPUT_RETENTION_DAYS,
  };
}

const NOT_STARTED: TurnErrorDetails = { code: 'temporal_unavailable', status: 503, message: 'The turn could not be started.' };
const ABANDONED: TurnErrorDetails = { code: 'internal_server_error', status: 500, message: 'The agent turn ended without finishing.' };

export class TurnSweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private readonly everyMs: number;
  private readonly graceMs: number;
  private readonly batch: number;
  private readonly modelInputRetentionDays: number;
  private lastModelInputPrune = 0;

  constructor(private readonly opts: TurnSweeperOptions) {
    this.everyMs = opts.everyMs ?? DEFAULTS.TURN_SWEEP_INTERVAL_MS;
    this.graceMs = opts.graceMs ?? DEFAULTS.TURN_SWEEP_MIN_AGE_MS;
    this.batch = opts.batch ?? DEFAULTS.TURN_SWEEP_BATCH;
    this.modelInputRetentionDays = opts.modelInputRetentionDays ?? DEFAULTS.MODEL_INPUT_RETENTION_DAYS;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.sweep()
        .catch((err) =>
          isDependencyUnavailable(err)
            ? this.opts.logger.debug({ err: (err as Error).message }, 'turn sweeper: a dependency is unreachable; next pass later')
            : this.opts.logger.warn({ err }, 'turn sweeper: pass failed'),
        )
        .finally(() => (this.running = null));
    }, this.everyMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass. */
  async sweep(): Promise<SweepResult> {
    const leftovers = this.opts.workspacesDir && !this.opts.bucket ? await this.workspaceLeftovers(this.opts.workspacesDir) : [];
    const modelInputsPruned = await this.expiredModelInputs();
    const gc = this.opts.bucket;
    const bucket = gc
      ? await gc.bucket.gc({ graceMs: gc.graceMs, keep: gc.keepVersions }).catch((err: unknown) => {
          this.opts.logger.warn({ err }, 'turn sweeper: the workspace bucket could not be swept');
          return undefined;
        })
      : undefined;
    const temporal = this.opts.temporal();
    if (!temporal) return { failed: [], released: [], leftovers, modelInputsPruned, bucket };
    const woken = new Set<string>();
    const failed = await this.unfinishedWithoutWorkflow(temporal, woken);
    const released = await this.locksOfEndedTurns();
    await this.queuesWithoutCoordinator(temporal, woken);
    return { failed, released, woken: [...woken], leftovers, modelInputsPruned, bucket };
  }

  private async expiredModelInputs(): Promise<number> {
    if (Date.now() - this.lastModelInputPrune < MODEL_INPUT_PRUNE_INTERVAL_MS) return 0;
    this.lastModelInputPrune = Date.now();
    const n = await pruneModelInputs(this.opts.db, this.modelInputRetentionDays);
    if (n) this.opts.logger.info({ deleted: n, days: this.modelInputRetentionDays }, 'turn sweeper: deleted expired model inputs');
    return n;
  }

  private async workspaceLeftovers(dir: string): Promise<string[]> {
    const removed = await sweepLeftovers(dir).catch((err: unknown) => {
      this.opts.logger.warn({ err, dir }, 'turn sweeper: interrupted workspace copies could not be swept');
      return [];
    });
    if (removed.length) this.opts.logger.info({ removed }, 'turn sweeper: removed interrupted workspace copies and removals');
    return removed;
  }

  private async unfinishedWithoutWorkflow(temporal: Client, woken: Set<string>): Promise<string[]> {
    const { db, logger } = this.opts;
    const candidates = await db.$queryRaw<{ id: string; workflow_id: string; status: string; conversation_id: string; queued: boolean }[]>`
      select id::text, workflow_id, status::text, conversation_id::text, queue_position is not null as queued from messages
       where status in ('pending', 'running') and updated_at < now() - make_interval(secs => ${this.graceMs / 1000}::float8)
       order by updated_at limit ${this.batch}`;
    const ended: string[] = [];
    for (const m of candidates) {
      let verdict: typeof NOT_STARTED | null;
      try {
        const d = await temporal.workflow.getHandle(m.workflow_id).describe();
        verdict = d.status.name === 'RUNNING' ? null : ABANDONED;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        verdict = NOT_STARTED;
      }
      if (!verdict) continue;
      // A queued message claimed by a coordinator that died before starting its turn (terminated): the coordinator,
      // woken, claims it again and starts it (activities/conversation-queue.ts) — it is not an orphan.
      if (verdict === NOT_STARTED && m.queued && m.status === 'pending' && this.opts.taskQueue) {
        if (!woken.has(m.conversation_id) && (await this.wake(temporal, m.conversation_id))) woken.add(m.conversation_id);
        continue;
      }
      if (await this.failMessage(m.id, verdict)) {
        ended.push(m.id);
        logger.warn(
          { message_id: m.id, workflow_id: m.workflow_id, was: m.status, code: verdict.code },
          'turn sweeper: ended a turn no workflow will finish',
        );
      }
    }
    return ended;
  }

  /** The failure as every terminal commits it: message, usage from the ledger, lock, `error` event; false if it moved on. */
  private async failMessage(messageId: string, err: typeof NOT_STARTED): Promise<boolean> {
    return this.opts.db.$transaction(async (tx) => {
      const msg = await tx.message.findUniqueOrThrow({ where: { id: messageId } });
      const run = await tx.agentBackendRun.findUnique({ where: { message_id: messageId }, select: { backend_run_id: true } });
      const usage = await ledgerUsage(tx, run?.backend_run_id);
      const metadata = { ...((msg.metadata ?? {}) as Record<string, unknown>), swept: { at: new Date().toISOString(), reason: err.code } };
      const n = await tx.message.updateMany({
        where: { id: messageId, status: { in: ['pending', 'running'] }, updated_at: msg.updated_at },
        data: {
          status: 'failed',
          error: err.message,
          error_code: err.code,
          metadata: metadata as Prisma.InputJsonValue,
          ...usageColumns(usage),
        },
      });
      if (n.count !== 1) return false;
      await releaseTurnLock(tx, msg.conversation_id, msg.id);
      await appendEvents(tx, msg.id, errorEvents(msg, err, usage));
      return true;
    });
  }

  /**
   * Queued messages waiting longer than the grace whose conversation has no coordinator running (the api died before
   * its signal-with-start, or Temporal refused it, or an operator terminated the coordinator): started again. A
   * running coordinator is left alone: it is waiting for the turn in flight.
   */
  private async queuesWithoutCoordinator(temporal: Client, woken: Set<string>): Promise<void> {
    if (!this.opts.taskQueue) return;
    const rows = await this.opts.db.$queryRaw<{ conversation_id: string }[]>`
      select distinct conversation_id::text from messages
       where status = 'queued' and updated_at < now() - make_interval(secs => ${this.graceMs / 1000}::float8)
       limit ${this.batch}`;
    for (const { conversation_id } of rows) {
      if (woken.has(conversation_id)) continue;
      try {
        const d = await temporal.workflow.getHandle(conversationQueueWorkflowId(conversation_id)).describe();
        if (d.status.name === 'RUNNING') continue;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      if (await this.wake(temporal, conversation_id)) woken.add(conversation_id);
    }
  }

  private async wake(temporal: Client, conversationId: string): Promise<boolean> {
    const conv = await this.opts.db.conversation.findUnique({ where: { id: conversationId }, select: { tenant_id: true, app_id: true } });
    if (!conv) return false;
    const ok = await wakeConversationQueue(
      { temporal, config: { TEMPORAL_TASK_QUEUE: this.opts.taskQueue! }, logger: this.opts.logger },
      { conversationId, tenantId: conv.tenant_id, appId: conv.app_id },
    );
    if (ok) this.opts.logger.warn({ conversation_id: conversationId }, 'turn sweeper: woke a conversation queue with no coordinator');
    return ok;
  }

  private async locksOfEndedTurns(): Promise<string[]> {
    const { db, logger } = this.opts;
    const held = await db.$queryRaw<{ conversation_id: string; message_id: string; status: string }[]>`
      select c.id::text as conversation_id, m.id::text as message_id, m.status::text as status
        from conversations c join messages m on m.id = c.active_message_id
       where m.status in ('succeeded', 'failed', 'stopped')
         and m.updated_at < now() - make_interval(secs => ${this.graceMs / 1000}::float8)
       limit ${this.batch}`;
    const released: string[] = [];
    for (const h of held) {
      const ok = await db.$transaction(async (tx) => {
        if (!(await releaseTurnLock(tx, h.conversation_id, h.message_id))) return false;
        await tx.$executeRaw`update messages
            set metadata = coalesce(metadata, '{}'::jsonb) || jsonb_build_object('lock_released_by_sweeper_at', now())
          where id = ${h.message_id}::uuid`;
        return true;
      });
      if (!ok) continue;
      released.push(h.conversation_id);
      logger.warn(
        { conversation_id: h.conversation_id, message_id: h.message_id, status: h.status },
        'turn sweeper: released the lock of an ended turn',
      );
    }
    return released;
  }
}
