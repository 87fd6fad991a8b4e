/**
 * The activities of `deliverWebhook` (workflows/deliver-webhook.ts): one signed POST per attempt through the tools'
 * SSRF guard (core/platform/net/ssrf.ts: the address checked is the address connected to, redirects not followed),
 * each attempt written to the delivery log (attempts, response code, last error) before Temporal retries it.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { AddressRefusedError, createGuardedFetch, readCapped, type Lookup } from '../core/platform/net/ssrf.js';
import { decryptWebhookSecret } from '../core/domain/webhooks/secret.js';
import { SIGNATURE_HEADER, signatureHeader } from '../core/domain/webhooks/signature.js';
import { WEBHOOK_REFUSED } from '../core/protocol/workflow-contract.js';

export interface WebhookActivityDeps {
  db: Db;
  config: Pick<Config, 'ENCRYPTION_KEY' | 'WEBHOOK_ALLOW_PRIVATE_NETWORK' | 'WEBHOOK_TIMEOUT_MS'>;
  logger: Logger;
  lookup?: Lookup;
}

const ERROR_BODY_BYTES = 512;

export function createWebhookActivities({ db, config, logger, lookup }: WebhookActivityDeps) {
  const guarded = createGuardedFetch({ allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_NETWORK, ...(lookup ? { lookup } : {}) });

  async function attemptWebhookDelivery({ deliveryId }: { deliveryId: string }): Promise<void> {
    const delivery = await db.webhookDelivery.findUnique({ where: { id: deliveryId }, include: { webhook: true } });
    if (!delivery)
      throw ApplicationFailure.create({ type: WEBHOOK_REFUSED, message: 'the delivery or its webhook was deleted', nonRetryable: true });
    // The success was recorded but the activity's completion was lost: nothing left to do.
    if (delivery.status === 'succeeded') return;
    if (!delivery.webhook.enabled) {
      await db.webhookDelivery.update({ where: { id: deliveryId }, data: { status: 'refused', last_error: 'webhook disabled' } });
      throw ApplicationFailure.create({ type: WEBHOOK_REFUSED, message: 'webhook disabled', nonRetryable: true });
    }
    await db.webhookDelivery.update({ where: { id: deliveryId }, data: { attempts: { increment: 1 } } });
    const body = JSON.stringify(delivery.payload);
    const t = Math.floor(Date.now() / 1000);
    const secret = decryptWebhookSecret(config.ENCRYPTION_KEY, delivery.webhook.encrypted_secret);
    let res: Response;
    try {
      res = await guarded(delivery.webhook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Dify-Agent-Webhooks/1',
          [SIGNATURE_HEADER]: signatureHeader(secret, body, t),
          'Dify-Event': delivery.event,
          'Dify-Event-Id': delivery.event_id,
          'Dify-Delivery': delivery.id,
        },
        body,
        signal: AbortSignal.timeout(config.WEBHOOK_TIMEOUT_MS),
      });
    } catch (err) {
      const message = (err as Error).message || String(err);
      if (err instanceof AddressRefusedError) {
        await db.webhookDelivery.update({
          where: { id: deliveryId },
          data: { status: 'refused', last_error: `refused: ${message}`, response_code: null },
        });
        logger.warn({ delivery_id: deliveryId, err: message }, 'webhook delivery refused by the SSRF guard');
        throw ApplicationFailure.create({ type: WEBHOOK_REFUSED, message, nonRetryable: true });
      }
      await db.webhookDelivery.update({ where: { id: deliveryId }, data: { last_error: message, response_code: null } });
      throw ApplicationFailure.create({ type: 'WebhookDeliveryFailed', message });
    }
    const { text } = await readCapped(res, ERROR_BODY_BYTES).catch(() => ({ text: '' }));
    if (res.status >= 200 && res.status < 300) {
      await db.webhookDelivery.update({
        where: { id: deliveryId },
        data: { status: 'succeeded', response_code: res.status, last_error: null, delivered_at: new Date() },
      });
      return;
    }
    const message = `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`;
    await db.webhookDelivery.update({ where: { id: deliveryId }, data: { response_code: res.status, last_error: message } });
    throw ApplicationFailure.create({ type: 'WebhookDeliveryFailed', message });
  }

  async function finishWebhookDelivery({ deliveryId, status }: { deliveryId: string; status: 'failed' | 'refused' }): Promise<void> {
    await db.webhookDelivery.updateMany({ where: { id: deliveryId, status: 'pending' }, data: { status } });
  }

  return { attemptWebhookDelivery, finishWebhookDelivery };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
