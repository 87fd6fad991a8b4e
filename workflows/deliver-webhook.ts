/**
 * deliverWebhook: one webhook delivery (docs/PROTOCOL.md "Scheduled turns and webhooks"). Each attempt is one activity execution, so
 * Temporal owns the backoff (doubling from WEBHOOK_RETRY_INITIAL_MS up to WEBHOOK_RETRY_MAX_INTERVAL_MS, for
 * WEBHOOK_RETRY_FOR_MS) and a worker restart loses no delivery; the payload stays in PostgreSQL, history holds an id.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { WebhookActivities } from '../activities/webhooks.js';
import { WEBHOOK_REFUSED, type DeliverWebhookInput } from './automation-definitions.js';

const book = proxyActivities<WebhookActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
  scheduleToCloseTimeout: '1 hour',
});

export async function deliverWebhook(input: DeliverWebhookInput): Promise<'succeeded' | 'failed' | 'refused'> {
  const { retry } = input;
  const attempt = proxyActivities<WebhookActivities>({
    // Connect to full response is bounded by WEBHOOK_TIMEOUT_MS inside the attempt.
    startToCloseTimeout: '2 minutes',
    scheduleToCloseTimeout: retry.retryForMs,
    retry: {
      initialInterval: retry.initialIntervalMs,
      backoffCoefficient: 2,
      maximumInterval: retry.maximumIntervalMs,
      nonRetryableErrorTypes: [WEBHOOK_REFUSED],
    },
  });
  try {
    await attempt.attemptWebhookDelivery({ deliveryId: input.deliveryId });
    return 'succeeded';
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const refused = cause instanceof ApplicationFailure && cause.type === WEBHOOK_REFUSED;
    // Out of retries (or refused): the log row says so; the attempts already recorded their errors.
    await book.finishWebhookDelivery({ deliveryId: input.deliveryId, status: refused ? 'refused' : 'failed' });
    return refused ? 'refused' : 'failed';
  }
}
