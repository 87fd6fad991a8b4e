/**
 * The one-turn-per-conversation lock: `conversations.active_message_id` names the turn in flight (running,
 * or paused waiting for a human). Taken atomically when a turn starts, so of two racing messages exactly one
 * wins; released in the same transaction as the turn's terminal event, and only by the message holding it.
 * (An ask_human resume hands the lock from the paused message to its continuation: core/human-input.ts.)
 */
import type { Prisma } from '../core/db.js';

type Tx = Pick<Prisma.TransactionClient, 'conversation'>;

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

/** Frees the conversation for its next turn, only if this message still holds it; false otherwise. */
export async function releaseTurnLock(tx: Tx, conversationId: string, messageId: string): Promise<boolean> {
  const n = await tx.conversation.updateMany({
    where: { id: conversationId, active_message_id: messageId },
    data: { active_message_id: null, updated_at: new Date() },
  });
  return n.count === 1;
}

/** A turn that ended paused (ask_human) keeps the lock: the form holds the conversation; only its time moves. */
export async function keepTurnLock(tx: Tx, conversationId: string, messageId: string): Promise<boolean> {
  const n = await tx.conversation.updateMany({
    where: { id: conversationId, active_message_id: messageId },
    data: { updated_at: new Date() },
  });
  return n.count === 1;
}
