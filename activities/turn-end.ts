/** Small steps around a turn: publishing a failure, stopping it, releasing the conversation's one-turn lock. */
import type { Prisma } from '../core/platform/db.js';
import { appendEvents } from '../core/protocol/event-log.js';
import type { ErrorCode } from '../core/protocol/error-codes.js';
import type { Usage } from '../core/protocol/run.js';
import type { ActivityDeps } from './deps.js';
import { turnCitations } from './citations.js';
import { errorEvents, finalAnswerEvents } from './final-events.js';
import { ledgerUsage, usageColumns } from './ledger-usage.js';
import { releaseTurnLock } from '../core/domain/turn/turn-lock.js';

/** The backend run id recorded for a message, if a run was created. */
async function backendRunOf(tx: Pick<Prisma.TransactionClient, 'agentBackendRun'>, messageId: string): Promise<string | null> {
  const run = await tx.agentBackendRun.findUnique({ where: { message_id: messageId }, select: { backend_run_id: true } });
  return run?.backend_run_id ?? null;
}

export function createFailTurn({ db }: ActivityDeps) {
  /** Marks the message failed and publishes the client `error` event (idempotent by source key). */
  return async function failTurn(input: { messageId: string; code: ErrorCode; status: number; message: string }): Promise<void> {
    const msg = await db.message.findUniqueOrThrow({ where: { id: input.messageId } });
    await db.$transaction(async (tx) => {
      // The run may have made (and been billed for) model calls before the step failed: the ledger's figures.
      const usage = await ledgerUsage(tx, await backendRunOf(tx, msg.id));
      const n = await tx.message.updateMany({
        where: { id: msg.id, status: { in: ['pending', 'running'] } },
        data: { status: 'failed', error: input.message, error_code: input.code, ...usageColumns(usage) },
      });
      await releaseTurnLock(tx, msg.conversation_id, msg.id);
      // Already ended (a retried step, or runAgent's own terminal): its terminal event stands, no second one.
      if (n.count === 1) await appendEvents(tx, msg.id, errorEvents(msg, input, usage));
    });
  };
}

export function createReleaseTurn({ db }: ActivityDeps) {
  /** Frees the conversation for its next turn (only if this message still holds it). */
  return async function releaseTurn(input: { conversationId: string; messageId: string }): Promise<void> {
    // In a transaction of its own: releaseTurnLock's `select … for update` must hold the row until its update runs. On
    // the bare client each statement commits alone, so the lock ended with the select and the update's snapshot (taken
    // while it waited for a follow-up's queueing transaction) missed that queued message and freed the conversation.
    await db.$transaction((tx) => releaseTurnLock(tx, input.conversationId, input.messageId));
  };
}

export function createStopTurn({ db }: ActivityDeps) {
  /**
   * Ends a turn stopped before (or without) the agent run's own cleanup: status stopped, partial answer
   * kept, `message` + `message_end` published once. A no-op when runAgent already ended the turn.
   */
  return async function stopTurn(input: { messageId: string }): Promise<void> {
    await db.$transaction(async (tx) => {
      const n = await tx.message.updateMany({
        where: { id: input.messageId, status: { in: ['pending', 'running'] } },
        data: { status: 'stopped' },
      });
      if (n.count === 0) return;
      let msg = await tx.message.findUniqueOrThrow({ where: { id: input.messageId } });
      // No terminal usage: the run's ledger rows (what its model calls were billed), on the message and message_end.
      let usage = msg.usage as Usage | null;
      if (!usage) {
        usage = await ledgerUsage(tx, await backendRunOf(tx, msg.id));
        msg = await tx.message.update({ where: { id: msg.id }, data: usageColumns(usage) });
      }
      await releaseTurnLock(tx, msg.conversation_id, msg.id);
      await appendEvents(
        tx,
        msg.id,
        finalAnswerEvents(msg, { answer: msg.answer, usage, retrieverResources: await turnCitations(tx, msg) }),
      );
    });
  };
}
