/**
 * The one-turn-per-conversation lock: `conversations.active_message_id` names the turn in flight (running,
 * or paused waiting for a human). Taken atomically when a turn starts, so of two racing messages exactly one
 * wins; released in the same transaction as the turn's terminal event, and only by the message holding it.
 * An ask_human resume hands the lock from the paused message to its continuation (`handTurnLock`, called by
 * core/domain/human-input.ts). Shared by the api (start, queue), the activities (turn ends) and the sweeper.
 */
import type { Prisma } from '../../platform/db.js';

type Tx = Pick<Prisma.TransactionClient, 'conversation' | '$executeRaw'>;

/** Takes the free lock for a new turn, counting the dialogue; false when another turn holds it. */
export async function takeTurnLock(tx: Tx, conversationId: string, messageId: string): Promise<boolean> {
  const n = await tx.conversation.updateMany({
    where: { id: conversationId, active_message_id: null },
    data: { active_message_id: messageId, dialogue_count: { increment: 1 } },
  });
  return n.count === 1;
}

/** The lock fields of a conversation created by its first turn: born held (nobody else knows its id yet). */
export function heldByFirstTurn(messageId: string): { active_message_id: string; dialogue_count: number } {
  return { active_message_id: messageId, dialogue_count: 1 };
}

/**
 * Frees the conversation for its next turn, only if this message still holds it; false otherwise. A message waiting
 * in the conversation's queue (multitask strategies) gets the lock straight away, so no request jumps the queue in
 * between; its coordinator (workflows/conversation-queue.ts) starts its turn.
 */
export async function releaseTurnLock(tx: Tx, conversationId: string, messageId: string): Promise<boolean> {
  // The row lock first, in a statement of its own: a follow-up being queued holds it (core/domain/turn/queue.ts) until its
  // queued message commits, and the update below then reads with a snapshot taken after that commit. One statement
  // that waited for the lock keeps its older snapshot: its sub-select would miss that message and free the lock.
  await tx.$executeRaw`select 1 from conversations where id = ${conversationId}::uuid for update`;
  const n = await tx.$executeRaw`
    update conversations c
       set active_message_id = (select m.id from messages m
                                 where m.conversation_id = c.id and m.status = 'queued' and m.id <> ${messageId}::uuid
                                 order by m.queue_position, m.created_at limit 1),
           updated_at = now()
     where c.id = ${conversationId}::uuid and c.active_message_id = ${messageId}::uuid`;
  return n === 1;
}

/** A turn that ended paused (ask_human) keeps the lock: the form holds the conversation; only its time moves. */
export async function keepTurnLock(tx: Tx, conversationId: string, messageId: string): Promise<boolean> {
  const n = await tx.conversation.updateMany({
    where: { id: conversationId, active_message_id: messageId },
    data: { updated_at: new Date() },
  });
  return n.count === 1;
}

/** An ask_human resume: the lock passes from the paused message to its continuation, only if the paused one holds it. */
export async function handTurnLock(
  tx: {
    conversation: {
      updateMany: (a: {
        where: { id: string; active_message_id: string };
        data: { active_message_id: string };
      }) => Promise<{ count: number }>;
    };
  },
  conversationId: string,
  from: string,
  to: string,
): Promise<boolean> {
  const n = await tx.conversation.updateMany({
    where: { id: conversationId, active_message_id: from },
    data: { active_message_id: to },
  });
  return n.count === 1;
}
