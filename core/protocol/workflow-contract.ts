/**
 * The names, inputs and ids of the workflows that their starters, activities and the workflows themselves share: the
 * turn (`agentTurn`: the api starts it, the queue's and schedule's activities start it as a child) and a webhook
 * delivery (`deliverWebhook`: started by the dispatcher and the console's redeliver, its activity throws
 * WEBHOOK_REFUSED). Plain names and types, no I/O: the workflow bundle takes them through workflows/definitions.ts
 * and workflows/automation-definitions.ts; activities and core take them here, so nothing climbs into workflows/.
 */
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
