/**
 * A conversation's queue (issue 35; docs/ARCHITECTURE.md "Multitask strategies"): what `POST /v1/chat-messages` does
 * with a message for a conversation whose turn is in flight. `reject` is Dify's 409 `conversation_busy`; `enqueue`
 * queues the message behind the turn (and behind the messages already waiting); `interrupt` stops the turn as a user
 * stop would and runs the message next; `rollback` does the same and hides the stopped turn (its usage stays billed,
 * its session snapshot is put back before the message runs). A queued message is a Message row in status `queued`
 * with its `queue_position` and its `multitask` metadata; `conversationQueue` (one workflow per conversation) runs
 * them in order. The api queues (api/turns/start.ts) and the turn sweeper wakes a queue left without its coordinator.
 */
import type { Client } from '@temporalio/client';
import type { Config } from '../../platform/config.js';
import type { Prisma } from '../../platform/db.js';
import type { Logger } from '../../platform/logger.js';
import { CodedError } from '../../protocol/error-codes.js';
import { TURN_SEARCH_ATTRIBUTES as SA } from '../../protocol/workflow-contract.js';
import {
  CONVERSATION_QUEUE_WORKFLOW,
  conversationQueueWorkflowId,
  TURN_QUEUED_SIGNAL,
  type ConversationQueueInput,
  type InvokeFrom,
  type MultitaskMetadata,
  type MultitaskStrategy,
} from '../../protocol/workflow-contract.js';
import { enqueueOutbox, type OutboxEntry } from '../outbox.js';
import { createMessageFiles, type PreparedMessageFile } from '../uploads.js';
import { takeTurnLock } from './turn-lock.js';

type Tx = Prisma.TransactionClient;

/** A message put in its conversation's queue, and what the request still owes once its transaction committed. */
export interface QueuedTurn {
  kind: 'queued';
  strategy: Exclude<MultitaskStrategy, 'reject'>;
  position: number;
  createdAt: Date;
  /** interrupt / rollback: the cancel of the turn in flight (an outbox row written with the message). */
  stop: { entry: OutboxEntry; messageId: string } | null;
}

export type QueueDecision = QueuedTurn | { kind: 'lock_taken' } | { kind: 'reject' };

export interface QueueRequest {
  appId: string;
  tenantId: string;
  conversationId: string;
  messageId: string;
  workflowId: string;
  owner: { end_user_id: string } | { account_id: string | null };
  invokeFrom: InvokeFrom;
  /** The app API key that sent it (messages.api_token_id). */
  apiTokenId?: string | null;
  query: string;
  inputs: object;
  files: PreparedMessageFile[];
  metadata: Record<string, unknown>;
  /** The request's strategy, or the app's default (read only now: the conversation is busy). */
  strategy: MultitaskStrategy | 'app_default';
  limit: number;
}

/**
 * Inside createTurnRecords' transaction, after the lock was found taken: under the conversation's row lock (so
 * concurrent follow-ups get distinct, ordered positions and the limit holds), either the lock is free after all
 * (`lock_taken`: the caller goes on as for a free conversation), the strategy is `reject` (the caller's 409s), or
 * the message is queued — and, for interrupt / rollback, the turn in flight is stopped through the outbox.
 */
export async function queueBehindTurn(tx: Tx, q: QueueRequest): Promise<QueueDecision> {
  const strategy =
    q.strategy === 'app_default'
      ? (await tx.app.findUniqueOrThrow({ where: { id: q.appId }, select: { multitask_strategy: true } })).multitask_strategy
      : q.strategy;
  if (strategy === 'reject') return { kind: 'reject' };
  await tx.$queryRaw`select 1 from conversations where id = ${q.conversationId}::uuid for update`;
  const waiting = await tx.message.count({ where: { conversation_id: q.conversationId, status: 'queued' } });
  // The turn in flight may have ended while we waited for the row (and nothing waits to go first).
  if (waiting === 0 && (await takeTurnLock(tx, q.conversationId, q.messageId))) return { kind: 'lock_taken' };
  const conv = await tx.conversation.findUniqueOrThrow({ where: { id: q.conversationId }, select: { active_message_id: true } });
  const holder = conv.active_message_id ? await tx.message.findUnique({ where: { id: conv.active_message_id } }) : null;
  // A turn waiting for a human holds the conversation for as long as its form lives (hours): nothing queues behind
  // it; interrupt and rollback stop it as a user stop would (the form is cancelled).
  if (strategy === 'enqueue' && holder?.status === 'paused') return { kind: 'reject' };
  if (waiting >= q.limit) {
    throw new CodedError('conversation_queue_full', `${waiting} messages already wait in this conversation's queue; try again later.`, {
      limit: q.limit,
      task_id: conv.active_message_id,
    });
  }
  const [range] = await tx.$queryRaw<{ hi: bigint | null }[]>`
    select max(queue_position) as hi from messages where conversation_id = ${q.conversationId}::uuid`;
  // Every strategy queues at the end: messages sent earlier keep their turn; interrupt and rollback stop only the
  // turn in flight (what already waits is usually nothing, and it was sent first).
  const position = Number(range?.hi ?? 0n) + 1;
  // The turn in flight to stop: one that runs (or waits for a human), not a queued message the lock was just handed to.
  const running = holder && strategy !== 'enqueue' && ['pending', 'running', 'paused'].includes(holder.status) ? holder : null;
  const rollbackOf = strategy === 'rollback' && running && !running.rolled_back_at ? running : null;
  const multitask: MultitaskMetadata = { strategy, ...(rollbackOf ? { rollback_of: rollbackOf.id } : {}) };
  // The thread (parent_message_id): a queued message follows the last one queued, else the turn in flight — or, when
  // it rolls that turn back, the turn's parent; the rolled-back turn's followers are moved up to its parent too.
  const last = await tx.message.findFirst({
    where: { conversation_id: q.conversationId, status: 'queued' },
    orderBy: { queue_position: 'desc' },
    select: { id: true },
  });
  if (rollbackOf) {
    await tx.message.update({ where: { id: rollbackOf.id }, data: { rolled_back_at: new Date() } });
    await tx.message.updateMany({
      where: { conversation_id: q.conversationId, parent_message_id: rollbackOf.id },
      data: { parent_message_id: rollbackOf.parent_message_id },
    });
  }
  const parent = last?.id ?? (rollbackOf ? rollbackOf.parent_message_id : holder?.id);
  // created_at after the row lock: the history lists queued messages in the order they were accepted.
  const createdAt = new Date();
  await tx.message.create({
    data: {
      id: q.messageId,
      ...(parent ? { parent_message_id: parent } : {}),
      tenant_id: q.tenantId,
      app_id: q.appId,
      conversation_id: q.conversationId,
      ...q.owner,
      invoke_from: q.invokeFrom,
      api_token_id: q.apiTokenId ?? null,
      query: q.query,
      inputs: q.inputs,
      workflow_id: q.workflowId,
      status: 'queued',
      queue_position: position,
      metadata: { ...q.metadata, multitask } as unknown as Prisma.InputJsonValue,
      created_at: createdAt,
    },
  });
  await createMessageFiles(tx, q.messageId, q.files);
  let stop: QueuedTurn['stop'] = null;
  if (running) {
    // Written with the message: if this process dies now, any dispatcher still delivers the stop.
    stop = { entry: await enqueueOutbox(tx, { kind: 'cancel', workflowId: running.workflow_id }), messageId: running.id };
  }
  return { kind: 'queued', strategy, position, createdAt, stop };
}

/**
 * Starts the conversation's coordinator or wakes the running one (signal-with-start on its deterministic id). Best
 * effort: the message is committed already, and the turn sweeper wakes a conversation whose queued messages wait
 * with no coordinator (worker/sweeper.ts), so a failure here delays the turn, it never loses it.
 */
export async function wakeConversationQueue(
  deps: { temporal: Client; config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>; logger: Logger },
  conv: { conversationId: string; tenantId: string; appId: string },
): Promise<boolean> {
  const input: ConversationQueueInput = { conversationId: conv.conversationId };
  try {
    await deps.temporal.withDeadline(Date.now() + 10_000, () =>
      deps.temporal.workflow.signalWithStart(CONVERSATION_QUEUE_WORKFLOW, {
        taskQueue: deps.config.TEMPORAL_TASK_QUEUE,
        workflowId: conversationQueueWorkflowId(conv.conversationId),
        args: [input],
        signal: TURN_QUEUED_SIGNAL,
        signalArgs: [],
        typedSearchAttributes: [
          { key: SA.TenantId, value: conv.tenantId },
          { key: SA.AppId, value: conv.appId },
          { key: SA.ConversationId, value: conv.conversationId },
        ],
        staticSummary: 'Conversation queue',
        staticDetails: `conversation \`${conv.conversationId}\``,
      }),
    );
    return true;
  } catch (err) {
    deps.logger.warn(
      { err: (err as Error).message, conversation_id: conv.conversationId },
      'could not wake the conversation queue; the turn sweeper will',
    );
    return false;
  }
}
