/**
 * The activity of `conversationQueue` (workflows/conversation-queue.ts) and the queue's database steps
 * (docs/ARCHITECTURE.md "Multitask strategies"). A conversation's queue is its messages in status `queued`, ordered
 * by `queue_position`; the turn lock (`conversations.active_message_id`) passes from a turn that ends straight to
 * the queue's head (core/domain/turn/turn-lock.ts `releaseTurnLock`), so nothing jumps the queue in between.
 *
 * `claimQueuedTurn` waits, heartbeating, until the conversation's lock is free or handed to the head, then — in one
 * transaction under the conversation's row lock — takes it, moves the head `queued` → `pending` and, for a
 * `rollback`, puts the rolled-back turn's pre-turn session snapshot back on the binding. It is idempotent: a retried
 * attempt (the result was lost with a worker) finds its message `pending` and holding the lock, and returns it
 * again; the workflow's child start is what runs it, once. A stop that reached a claimed message before its child
 * existed (its cancel found no workflow: the outbox counts that delivered) is found by its outbox row: the next claim
 * ends such a message stopped instead of returning it, and the coordinator asks again right after a child's start
 * (`stopRequestedBeforeStart`) and cancels it then.
 */
import { Context } from '@temporalio/activity';
import type { Config } from '../core/platform/config.js';
import { Prisma, type Db } from '../core/platform/db.js';
import { appendEvents } from '../core/protocol/event-log.js';
import type { Logger } from '../core/platform/logger.js';
import { markdownText, conversationName } from '../core/domain/turn-text.js';
import type { AgentTurnInput, InvokeFrom, MultitaskMetadata } from '../core/protocol/workflow-contract.js';
import { finalAnswerEvents } from './final-events.js';
import { ledgerUsage } from './ledger-usage.js';
import { releaseTurnLock } from '../core/domain/turn/turn-lock.js';

export interface ConversationQueueDeps {
  db: Db;
  config: Pick<Config, 'CONVERSATION_QUEUE_POLL_MS'>;
  logger: Logger;
}

export type ClaimedTurn = { kind: 'turn'; input: AgentTurnInput; summary: string; details: string } | { kind: 'empty' };

type Tx = Prisma.TransactionClient;

function multitaskOf(metadata: unknown): MultitaskMetadata | undefined {
  const m = (metadata as Record<string, unknown> | null)?.multitask;
  return m && typeof m === 'object' ? (m as MultitaskMetadata) : undefined;
}

/**
 * Ends a message still waiting in the queue as stopped (a user stop, its conversation deleted): no run, zero usage,
 * `message` + `message_end` for a stream that waits on it. False when it is no longer queued (claimed meanwhile).
 */
export async function stopQueuedMessage(tx: Tx, messageId: string): Promise<boolean> {
  return endUnstarted(tx, messageId, 'queued');
}

/** A message whose turn never started (`queued`, or claimed `pending` with no workflow) ends stopped. */
async function endUnstarted(tx: Tx, messageId: string, from: 'queued' | 'pending'): Promise<boolean> {
  const n = await tx.message.updateMany({ where: { id: messageId, status: from }, data: { status: 'stopped' } });
  if (n.count === 0) return false;
  const msg = await tx.message.findUniqueOrThrow({ where: { id: messageId } });
  // A queued message the lock was handed to passes it on to the next one.
  await releaseTurnLock(tx, msg.conversation_id, msg.id);
  await appendEvents(tx, msg.id, finalAnswerEvents(msg, { answer: '', usage: await ledgerUsage(tx, null) }));
  return true;
}

/** Whether a cancel of this workflow was ever asked through the outbox (a stop, an interrupt or a rollback writes one). */
async function cancelAsked(tx: Tx | Db, workflowId: string): Promise<boolean> {
  const [row] = await tx.$queryRaw<{ asked: boolean }[]>`
    select exists(select 1 from temporal_outbox where workflow_id = ${workflowId} and kind = 'cancel') as asked`;
  return row?.asked ?? false;
}

/**
 * rollback: the binding's session snapshot goes back to what the rolled-back turn started from (its stored run
 * request's), so the next turn's model history has no trace of it; its pending ask_human call is dropped with it.
 * Once per rolled-back message (marked on it); a turn that never created a run changed no snapshot.
 */
async function restoreSnapshotBefore(tx: Tx, rolledBackId: string, logger: Logger): Promise<void> {
  const rolled = await tx.message.findUnique({ where: { id: rolledBackId } });
  if (!rolled) return;
  const mt = multitaskOf(rolled.metadata);
  if (mt?.snapshot_restored_at) return;
  const run = await tx.agentBackendRun.findUnique({ where: { message_id: rolledBackId }, select: { request: true, binding_id: true } });
  if (run?.binding_id) {
    const before = (run.request as { session_snapshot?: unknown } | null)?.session_snapshot ?? null;
    await tx.agentWorkspaceBinding.update({
      where: { id: run.binding_id },
      data: { session_snapshot: before === null ? Prisma.DbNull : (before as Prisma.InputJsonValue) },
    });
    await tx.agentWorkspaceBinding.updateMany({
      where: { id: run.binding_id, pending_message_id: rolledBackId },
      data: { pending_form_id: null, pending_tool_call_id: null, pending_message_id: null },
    });
  }
  const metadata = { ...((rolled.metadata ?? {}) as Record<string, unknown>) };
  metadata.multitask = { ...(mt ?? { strategy: 'enqueue' }), snapshot_restored_at: new Date().toISOString() };
  await tx.message.update({ where: { id: rolledBackId }, data: { metadata: metadata as Prisma.InputJsonValue } });
  logger.info({ message_id: rolledBackId, binding_id: run?.binding_id ?? null }, 'rollback: restored the session snapshot before the turn');
}

export function createConversationQueueActivities({ db, config, logger }: ConversationQueueDeps) {
  /** What the workflow needs to start the turn: ids, and the Temporal UI's summary and details. */
  async function describe(tx: Tx, messageId: string): Promise<ClaimedTurn> {
    const msg = await tx.message.findUniqueOrThrow({ where: { id: messageId } });
    const app = await tx.app.findUniqueOrThrow({ where: { id: msg.app_id }, include: { agent: { select: { id: true } } } });
    const input: AgentTurnInput = {
      tenantId: msg.tenant_id,
      appId: msg.app_id,
      // createTurnRecords refused the message had the app no agent; one removed since fails in the turn's preparation.
      agentId: app.agent?.id ?? '',
      conversationId: msg.conversation_id,
      messageId: msg.id,
      invokeFrom: msg.invoke_from as InvokeFrom,
    };
    const strategy = multitaskOf(msg.metadata)?.strategy ?? 'enqueue';
    return {
      kind: 'turn',
      input,
      summary: `Agent turn · ${markdownText(app.name)} · "${markdownText(conversationName(msg.query))}"`,
      details: `conversation \`${msg.conversation_id}\`\n\nmessage \`${msg.id}\`\n\nqueued (${strategy}) at position ${msg.queue_position ?? '?'}`,
    };
  }

  /** One look, under the conversation's row lock: a turn to start, `empty`, or null (another turn holds it: wait). */
  async function claimOnce(conversationId: string): Promise<ClaimedTurn | null> {
    return db.$transaction(async (tx) => {
      const [conv] = await tx.$queryRaw<{ active_message_id: string | null; deleted: boolean }[]>`
        select active_message_id::text, deleted_at is not null as deleted from conversations where id = ${conversationId}::uuid for update`;
      if (!conv) return { kind: 'empty' } as const;
      if (conv.deleted) {
        // Deleted with messages still waiting: each ends stopped (its stream gets its end), none runs.
        const waiting = await tx.message.findMany({ where: { conversation_id: conversationId, status: 'queued' }, select: { id: true } });
        for (const w of waiting) await stopQueuedMessage(tx, w.id);
        return { kind: 'empty' } as const;
      }
      let next: { id: string; metadata: unknown } | null = null;
      if (conv.active_message_id) {
        const holder = await tx.message.findUnique({ where: { id: conv.active_message_id } });
        // Claimed by an earlier attempt (or coordinator run) whose child never started: the same turn again (its start is
        // the workflow's) — unless a stop reached it meanwhile: its cancel found no workflow, so it ends here, as a stop
        // of a queued message does, and the lock goes on to the next one.
        if (holder?.status === 'pending' && holder.queue_position !== null) {
          if (!(await cancelAsked(tx, holder.workflow_id))) return describe(tx, holder.id);
          await endUnstarted(tx, holder.id, 'pending');
          logger.info({ conversation_id: conversationId, message_id: holder.id }, 'queued turn stopped before its start');
          return null;
        }
        // Handed over by the turn that ended (releaseTurnLock): ours to start. Anything else: a turn in flight.
        if (holder?.status !== 'queued') return null;
        next = holder;
      } else {
        next = await tx.message.findFirst({
          where: { conversation_id: conversationId, status: 'queued' },
          orderBy: [{ queue_position: 'asc' }, { created_at: 'asc' }],
          select: { id: true, metadata: true },
        });
        if (!next) return { kind: 'empty' } as const;
      }
      await tx.conversation.update({
        where: { id: conversationId },
        data: { active_message_id: next.id, dialogue_count: { increment: 1 }, updated_at: new Date() },
      });
      await tx.message.update({ where: { id: next.id }, data: { status: 'pending' } });
      const rollbackOf = multitaskOf(next.metadata)?.rollback_of;
      if (rollbackOf) await restoreSnapshotBefore(tx, rollbackOf, logger);
      return describe(tx, next.id);
    });
  }

  async function claimQueuedTurn(args: { conversationId: string }): Promise<ClaimedTurn> {
    const ctx = Context.current();
    for (;;) {
      const claimed = await claimOnce(args.conversationId);
      if (claimed) {
        if (claimed.kind === 'turn') {
          logger.info({ conversation_id: args.conversationId, message_id: claimed.input.messageId }, 'queued turn claimed');
        }
        return claimed;
      }
      ctx.heartbeat();
      // Rejects when the activity is cancelled (the coordinator terminated or reset).
      await ctx.sleep(config.CONVERSATION_QUEUE_POLL_MS);
    }
  }

  /**
   * After the coordinator started a claimed turn's child: whether a cancel of its workflow was asked through the
   * outbox. A row written before the start was delivered to no workflow (lost); one written after reaches the child
   * anyway, so the coordinator's second cancel is a no-op then.
   */
  async function stopRequestedBeforeStart(args: { workflowId: string }): Promise<boolean> {
    const asked = await cancelAsked(db, args.workflowId);
    if (asked) logger.info({ workflow_id: args.workflowId }, 'queued turn: a stop asked around its start, delivered again');
    return asked;
  }

  return { claimQueuedTurn, stopRequestedBeforeStart };
}

export type ConversationQueueActivities = ReturnType<typeof createConversationQueueActivities>;
