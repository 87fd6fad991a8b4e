/**
 * The search attributes every turn workflow carries, defined once: the api sets them at start, the dev
 * server and the cluster register them (stack/temporal.ts, docker-compose.yml), ops query by them.
 */
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { AgentTurnInput } from './definitions.js';

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
