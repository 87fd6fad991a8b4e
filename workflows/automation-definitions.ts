/**
 * Names and payloads of the workflows around turns (issue 35): `scheduledTurn`, the action of an app's Temporal
 * schedule, and `deliverWebhook`, one webhook delivery. Ids and small settings only, like definitions.ts.
 */
export const SCHEDULED_TURN_WORKFLOW = 'scheduledTurn';
export const DELIVER_WEBHOOK_WORKFLOW = 'deliverWebhook';

export interface ScheduledTurnInput {
  scheduleId: string;
}

export interface ScheduledTurnResult {
  scheduleId: string;
  /** The turn's message, or null when no turn could be started (the schedule's last_run_error says why). */
  messageId: string | null;
  status: string;
}

export interface DeliverWebhookInput {
  deliveryId: string;
  /** The deployment's WEBHOOK_RETRY_* settings when the delivery was started (a workflow reads no config). */
  retry: { initialIntervalMs: number; maximumIntervalMs: number; retryForMs: number };
}

/** The Temporal schedule of an `app_schedules` row. */
export function scheduleIdForRow(rowId: string): string {
  return `app-schedule-${rowId}`;
}

/** The workflow of one delivery: started at most once per row, whoever dispatches it. */
export function workflowIdForDelivery(deliveryId: string): string {
  return `webhook-delivery-${deliveryId}`;
}

/** Thrown by a delivery attempt that must not be retried (SSRF refusal, webhook deleted). */
export const WEBHOOK_REFUSED = 'WebhookRefused';
