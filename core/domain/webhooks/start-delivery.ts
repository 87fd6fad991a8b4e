/**
 * Starts one webhook delivery's `deliverWebhook` workflow (idempotent: the workflow id is derived from the row, so a
 * second start of the same row is WorkflowExecutionAlreadyStartedError, counted as done). Used by every worker's
 * dispatcher (worker/webhook-dispatcher.ts) and by the console's redeliver (api/console/webhooks.ts).
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Config } from '../../platform/config.js';
import { DELIVER_WEBHOOK_WORKFLOW, workflowIdForDelivery, type DeliverWebhookInput } from '../../protocol/workflow-contract.js';

export type WebhookDispatchConfig = Pick<
  Config,
  'TEMPORAL_TASK_QUEUE' | 'WEBHOOK_RETRY_INITIAL_MS' | 'WEBHOOK_RETRY_MAX_INTERVAL_MS' | 'WEBHOOK_RETRY_FOR_MS' | 'WEBHOOK_DISPATCH_POLL_MS'
>;

export async function startDelivery(client: Client, config: WebhookDispatchConfig, deliveryId: string): Promise<void> {
  const input: DeliverWebhookInput = {
    deliveryId,
    retry: {
      initialIntervalMs: config.WEBHOOK_RETRY_INITIAL_MS,
      maximumIntervalMs: config.WEBHOOK_RETRY_MAX_INTERVAL_MS,
      retryForMs: config.WEBHOOK_RETRY_FOR_MS,
    },
  };
  try {
    await client.workflow.start(DELIVER_WEBHOOK_WORKFLOW, {
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowId: workflowIdForDelivery(deliveryId),
      args: [input],
      staticSummary: `Webhook delivery \`${deliveryId}\``,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
