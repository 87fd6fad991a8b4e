/** Small steps around a turn: publishing a failure, releasing the conversation's one-turn lock. */
import { turnEventBase } from '../core/client-events.js';
import { appendEvents } from '../core/event-log.js';
import { emptyUsage, type Usage } from '../core/protocol/run.js';
import type { ActivityDeps } from '../turn/deps.js';

export function createFailTurn({ db }: ActivityDeps) {
  /** Marks the message failed and publishes the client `error` event (idempotent by source key). */
  return async function failTurn(input: { messageId: string; code: string; status: number; message: string }): Promise<void> {
    const msg = await db.message.findUniqueOrThrow({ where: { id: input.messageId } });
    await db.$transaction(async (tx) => {
      await tx.message.updateMany({
        where: { id: msg.id, status: { in: ['pending', 'running'] } },
        data: { status: 'failed', error: input.message, error_code: input.code },
      });
      await tx.conversation.updateMany({ where: { id: msg.conversation_id, active_message_id: msg.id }, data: { active_message_id: null } });
      await appendEvents(tx, msg.id, [
        {
          event: 'error',
          sourceKey: 'terminal:error',
          data: {
            ...turnEventBase(msg),
            event: 'error',
            status: input.status,
            code: input.code,
            message: input.message,
          },
        },
      ]);
    });
  };
}

export function createReleaseTurn({ db }: ActivityDeps) {
  /** Frees the conversation for its next turn (only if this message still holds it). */
  return async function releaseTurn(input: { conversationId: string; messageId: string }): Promise<void> {
    await db.conversation.updateMany({
      where: { id: input.conversationId, active_message_id: input.messageId },
      data: { active_message_id: null },
    });
  };
}

export function createStopTurn({ db }: ActivityDeps) {
  /**
   * Ends a turn stopped before (or without) the agent run's own cleanup: status stopped, partial answer
   * kept, `message` + `message_end` published once. A no-op when runAgent already ended the turn.
   */
  return async function stopTurn(input: { messageId: string }): Promise<void> {
    await db.$transaction(async (tx) => {
      const n = await tx.message.updateMany({ where: { id: input.messageId, status: { in: ['pending', 'running'] } }, data: { status: 'stopped' } });
      if (n.count === 0) return;
      const msg = await tx.message.findUniqueOrThrow({ where: { id: input.messageId } });
      const base = turnEventBase(msg);
      await tx.conversation.updateMany({ where: { id: msg.conversation_id, active_message_id: msg.id }, data: { active_message_id: null } });
      await appendEvents(tx, msg.id, [
        { event: 'message', sourceKey: 'terminal:message', data: { ...base, event: 'message', id: msg.id, answer: msg.answer } },
        { event: 'message_end', sourceKey: 'terminal:message_end', data: { ...base, event: 'message_end', id: msg.id, metadata: { usage: (msg.usage as Usage | null) ?? emptyUsage() } } },
      ]);
    });
  };
}
