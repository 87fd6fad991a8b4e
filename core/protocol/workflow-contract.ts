/**
 * The workflow contract: the names, inputs and ids of the workflows that their starters, activities and the workflows
 * themselves share — the turn (`agentTurn`: the api starts it, the queue's and schedule's activities start it as a
 * child), a conversation's queue (`conversationQueue`: core/domain/turn/queue.ts starts or wakes it), a scheduled run's
 * turn request, a webhook delivery (`deliverWebhook`: started by the dispatcher and the console's redeliver, its
 * activity throws WEBHOOK_REFUSED) — and the search attributes every turn carries. Plain names and types, no I/O (the
 * workflow bundle takes this file; signals and queries are defined in workflows/ on these names): api, activities,
 * worker and core take them here, so nothing climbs into workflows/.
 */
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { InvokeFrom } from './run.js';

export type { InvokeFrom };

export const AGENT_TURN_WORKFLOW = 'agentTurn';

export interface AgentTurnInput {
  tenantId: string;
  appId: string;
  agentId: string;
  conversationId: string;
  messageId: string;
  invokeFrom: InvokeFrom;
  /** Set when this turn continues a paused one (ask_human): input guards are skipped. */
  resumeOfMessageId?: string;
}

export function workflowIdForMessage(messageId: string): string {
  return `agent-turn-${messageId}`;
}

export const DELIVER_WEBHOOK_WORKFLOW = 'deliverWebhook';

export interface DeliverWebhookInput {
  deliveryId: string;
  /** The deployment's WEBHOOK_RETRY_* settings when the delivery was started (a workflow reads no config). */
  retry: { initialIntervalMs: number; maximumIntervalMs: number; retryForMs: number };
}

/** The workflow of one delivery: started at most once per row, whoever dispatches it. */
export function workflowIdForDelivery(deliveryId: string): string {
  return `webhook-delivery-${deliveryId}`;
}

/** Thrown by a webhook delivery attempt that must not be retried (SSRF refusal, webhook deleted). */
export const WEBHOOK_REFUSED = 'WebhookRefused';

/**
 * Multitask strategies (issue 35; LangGraph Platform's `multitask_strategy`): what a message sent while its
 * conversation's turn runs does. Payloads are ids only: the queue itself (which messages wait, in which order) lives
 * in PostgreSQL.
 */
export const MULTITASK_STRATEGIES = ['reject', 'enqueue', 'interrupt', 'rollback'] as const;
export type MultitaskStrategy = (typeof MULTITASK_STRATEGIES)[number];

export const CONVERSATION_QUEUE_WORKFLOW = 'conversationQueue';

export interface ConversationQueueInput {
  conversationId: string;
}

/** The name of "a message was queued" (workflows/multitask-definitions.ts defines the signal on it). */
export const TURN_QUEUED_SIGNAL = 'turnQueued';

/** One coordinator per conversation: signal-with-start on this id starts it or wakes the running one. */
export function conversationQueueWorkflowId(conversationId: string): string {
  return `conversation-queue-${conversationId}`;
}

/** The metadata a queued message carries (`multitask`): how it was sent and, for a rollback, which turn it undoes. */
export interface MultitaskMetadata {
  strategy: 'enqueue' | 'interrupt' | 'rollback';
  /** rollback: the turn it rolled back. */
  rollback_of?: string;
  /** On the rolled-back message: when its pre-turn snapshot went back on the binding (done once). */
  snapshot_restored_at?: string;
}

/** One scheduled run's turn request: what a chat request of the schedule's user would carry. */
export interface ScheduledTurnRequest {
  app: { tenantId: string; appId: string; agentId: string | null; appName: string };
  query: string;
  inputs: unknown;
  user: string;
  /** The schedule's one conversation (conversation_mode `single`), or null for a new one. */
  conversationId: string | null;
  /** Deterministic per run (the workflow's), so a retried attempt finds its own rows. */
  messageId: string;
  metadata: Record<string, string>;
}

/** Creates the turn's rows as a chat request would, or says why a chat request would have been refused. */
export type CreateScheduledTurn = (
  request: ScheduledTurnRequest,
) => Promise<{ kind: 'created'; conversationId: string; input: AgentTurnInput } | { kind: 'refused'; error: string }>;

/** What `startScheduledTurn` answers the `scheduledTurn` workflow. */
export type StartedScheduledTurn =
  { kind: 'started'; input: AgentTurnInput; summary: string; details: string } | { kind: 'refused'; error: string };

/**
 * The search attributes every turn workflow carries, defined once: the api sets them at start, the dev
 * server and the cluster register them (stack/temporal.ts, docker-compose.yml), ops query by them.
 */
export const TURN_SEARCH_ATTRIBUTES = {
  TenantId: defineSearchAttributeKey('TenantId', SearchAttributeType.KEYWORD),
  AppId: defineSearchAttributeKey('AppId', SearchAttributeType.KEYWORD),
  AgentId: defineSearchAttributeKey('AgentId', SearchAttributeType.KEYWORD),
  ConversationId: defineSearchAttributeKey('ConversationId', SearchAttributeType.KEYWORD),
  MessageId: defineSearchAttributeKey('MessageId', SearchAttributeType.KEYWORD),
  InvokeFrom: defineSearchAttributeKey('InvokeFrom', SearchAttributeType.KEYWORD),
  /** Every message the turn worked on: its own, then each ask_human continuation's (MessageId is the first). */
  MessageIds: defineSearchAttributeKey('MessageIds', SearchAttributeType.KEYWORD_LIST),
  /**
   * The turn's outcome, for ops (docs/operations.md): `running` from the start, then `waiting_for_human`, `succeeded`,
   * `answered_by_guard`, `failed` or `stopped`. A failed turn's workflow still completes (its result says failed: the
   * turn ended as designed, the message carries the error), so `ExecutionStatus = 'Failed'` does not find it — this does.
   */
  TurnStatus: defineSearchAttributeKey('TurnStatus', SearchAttributeType.KEYWORD),
  /** A failed turn's error code (the message's error_code: `model_rate_limited`, `backend_restarted`, …). */
  ErrorCode: defineSearchAttributeKey('ErrorCode', SearchAttributeType.KEYWORD),
} as const;

export type TurnSearchAttributeName = keyof typeof TURN_SEARCH_ATTRIBUTES;

/** Their names, in registration order. */
export const TURN_SEARCH_ATTRIBUTE_NAMES = Object.keys(TURN_SEARCH_ATTRIBUTES) as TurnSearchAttributeName[];

/** `Name=Type` as the Temporal CLI takes them (`--search-attribute`, `operator search-attribute create`). */
export const TURN_SEARCH_ATTRIBUTE_SPECS = TURN_SEARCH_ATTRIBUTE_NAMES.map(
  (n) => `${n}=${TURN_SEARCH_ATTRIBUTES[n].type === SearchAttributeType.KEYWORD_LIST ? 'KeywordList' : 'Keyword'}`,
);

/** What a turn workflow starts with (the api's start, the schedule's and the conversation queue's child starts). */
export function turnStartSearchAttributes(turn: AgentTurnInput): SearchAttributePair[] {
  const SA = TURN_SEARCH_ATTRIBUTES;
  return [
    { key: SA.TenantId, value: turn.tenantId },
    { key: SA.AppId, value: turn.appId },
    { key: SA.AgentId, value: turn.agentId },
    { key: SA.ConversationId, value: turn.conversationId },
    { key: SA.MessageId, value: turn.messageId },
    { key: SA.MessageIds, value: [turn.messageId] },
    { key: SA.InvokeFrom, value: turn.invokeFrom },
    // The workflow updates it as the turn ends (TurnStatus, ErrorCode: docs/operations.md).
    { key: SA.TurnStatus, value: 'running' },
  ];
}
