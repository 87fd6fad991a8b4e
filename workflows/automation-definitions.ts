/**
 * Names and payloads of the workflows around turns (issue 35): `scheduledTurn`, the action of an app's Temporal
 * schedule, and `deliverWebhook`, one webhook delivery. Ids and small settings only, like definitions.ts.
 */
export const SCHEDULED_TURN_WORKFLOW = 'scheduledTurn';

export interface ScheduledTurnInput {
  scheduleId: string;
}

export interface ScheduledTurnResult {
  scheduleId: string;
  /** The turn's message, or null when no turn could be started (the schedule's last_run_error says why). */
  messageId: string | null;
  status: string;
}

/** The Temporal schedule of an `app_schedules` row. */
export function scheduleIdForRow(rowId: string): string {
  return `app-schedule-${rowId}`;
}

// A delivery's workflow name, input, id and refusal type are shared with its starters and activity (core/protocol/workflow-contract.ts).
export {
  DELIVER_WEBHOOK_WORKFLOW,
  WEBHOOK_REFUSED,
  workflowIdForDelivery,
  type DeliverWebhookInput,
} from '../core/protocol/workflow-contract.js';
