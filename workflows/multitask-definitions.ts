/**
 * Multitask strategies (issue 35; LangGraph Platform's `multitask_strategy`): what a message sent while its
 * conversation's turn runs does. Names and payloads shared by the api, the sweeper and `conversationQueue`, so they
 * cannot drift. Payloads are ids only: the queue itself (which messages wait, in which order) lives in PostgreSQL.
 */
import { defineSignal } from '@temporalio/workflow';

export const MULTITASK_STRATEGIES = ['reject', 'enqueue', 'interrupt', 'rollback'] as const;
export type MultitaskStrategy = (typeof MULTITASK_STRATEGIES)[number];

export const CONVERSATION_QUEUE_WORKFLOW = 'conversationQueue';

export interface ConversationQueueInput {
  conversationId: string;
}

/** "A message was queued": wakes the coordinator; it reads what to run from the database. */
export const turnQueuedSignal = defineSignal<[]>('turnQueued');

/** One coordinator per conversation: signal-with-start on this id starts it or wakes the running one. */
export function conversationQueueWorkflowId(conversationId: string): string {
  return `conversation-queue-${conversationId}`;
}
