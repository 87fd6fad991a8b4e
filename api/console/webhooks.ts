/**
 * Webhooks (issue 35 item 4), under /console/api with the console key: an app's webhooks — a URL and the events it
 * wants, with a signing secret shown once at creation and stored encrypted (core/domain/webhooks/secret.ts) — and each
 * webhook's delivery log (status, attempts, last error, response code) with a redeliver action. Payload and signature:
 * docs/PROTOCOL.md "Scheduled turns and webhooks".
 */
import type { Client } from '@temporalio/client';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { AppWebhook, WebhookDelivery } from '../../core/generated/prisma/client.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { unixSeconds } from '../../core/platform/time.js';
import { startDelivery } from '../../core/domain/webhooks/start-delivery.js';
import { encryptWebhookSecret } from '../../core/domain/webhooks/secret.js';
import { newWebhookSecret } from '../../core/domain/webhooks/signature.js';
import { checkWebhookUrl, WebhookUrlError } from '../../core/domain/webhooks/url.js';
import { withoutUserinfo } from '../../core/domain/tools/providers.js';
import { consoleApp, consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { pageJson, pageOf } from '../pagination.js';
import { Uuid } from '../schemas.js';
import { createWithinQuota } from '../../core/domain/automation-quota.js';
import { admitDeliveries } from '../../core/domain/webhooks/delivery-rate.js';

export const WEBHOOK_EVENTS = [
  'turn.succeeded',
  'turn.failed',
  'turn.stopped',
  'turn.human_input_required',
  'schedule.run_completed',
  'schedule.run_failed',
] as const;

const WebhookUrl = z
  .string()
  .trim()
  .max(2048)
  .url()
  .refine((u) => /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL');

export const CreateWebhookBody = z
  .object({
    url: WebhookUrl,
    /** Default: every event. */
    events: z.array(z.enum(WEBHOOK_EVENTS)).min(1).max(WEBHOOK_EVENTS.length).optional(),
    enabled: z.boolean().default(true),
  })
  .strict();

export const UpdateWebhookBody = z
  .object({
    url: WebhookUrl.optional(),
    events: z.array(z.enum(WEBHOOK_EVENTS)).min(1).max(WEBHOOK_EVENTS.length).optional(),
    enabled: z.boolean().optional(),
  })
  .strict();

/** Every event a webhook can ask for, as the studio's event checkboxes read it (GET /console/api/webhook-events). */
export const WebhookEventListResponse = z.object({
  data: z
    .array(z.enum(WEBHOOK_EVENTS))
    .describe('The event names, in the order the studio lists them; a new webhook gets all of them by default.'),
});

/** A webhook as the console shows it (the userinfo of a row saved before it was refused, masked). */
export function webhookView(row: AppWebhook) {
  return { id: row.id, url: withoutUserinfo(row.url), events: row.events, enabled: row.enabled, created_at: unixSeconds(row.created_at) };
}

export function deliveryView(row: WebhookDelivery) {
  return {
    id: row.id,
    webhook_id: row.webhook_id,
    event: row.event,
    event_id: row.event_id,
    status: row.status,
    attempts: row.attempts,
    last_error: row.last_error,
    response_code: row.response_code,
    redelivery_of: row.redelivery_of,
    created_at: unixSeconds(row.created_at),
    delivered_at: row.delivered_at ? unixSeconds(row.delivered_at) : null,
  };
}

export function webhookRoutes(deps: { db: Db; temporal: Client; config: Config; logger: Logger }): Router {
  const { db, temporal, config, logger } = deps;
  const r = Router();
  const auth = consoleAuth(db);
  const body: RequestHandler[] = jsonBody({ limit: '16kb', maxDepth: config.JSON_MAX_DEPTH, rejectNul: true });

  /** The delivery guard, at save time (core/domain/webhooks/url.ts): 400 `invalid_webhook_url` saying why. */
  async function assertDeliverable(url: string): Promise<void> {
    try {
      await checkWebhookUrl(url, { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_NETWORK });
    } catch (err) {
      if (err instanceof WebhookUrlError) throw new HttpError(400, 'invalid_webhook_url', `url: ${err.message}.`);
      throw err;
    }
  }

  async function webhookOf(req: Request) {
    const { app } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.webhook_id, 'webhook_id');
    const row = await db.appWebhook.findFirst({ where: { id, app_id: app.id } });
    if (!row) throw new HttpError(404, 'webhook_not_found', 'No such webhook for this app.');
    return row;
  }

  async function deliveryOf(req: Request) {
    const hook = await webhookOf(req);
    const id = parseOr400(Uuid, req.params.delivery_id, 'delivery_id');
    const row = await db.webhookDelivery.findFirst({ where: { id, webhook_id: hook.id } });
    if (!row) throw new HttpError(404, 'webhook_delivery_not_found', 'No such delivery for this webhook.');
    return { hook, row };
  }

  // Not under an app: the same for every one. The studio makes its checkboxes from it, never from a list of its own.
  r.get('/webhook-events', auth, (_req, res) => {
    res.json(WebhookEventListResponse.parse({ data: [...WEBHOOK_EVENTS] }));
  });

  /** Newest first, a page at a time (api/pagination.ts), as every console list. */
  r.get('/apps/:app_id/webhooks', auth, async (req, res) => {
    const { app } = await consoleApp(db, req);
    const page = pageOf(req.query);
    const where = { app_id: app.id };
    const [total, rows] = await Promise.all([
      db.appWebhook.count({ where }),
      db.appWebhook.findMany({ where, orderBy: [{ created_at: 'desc' }, { id: 'asc' }], skip: page.skip, take: page.take }),
    ]);
    res.json(pageJson(page, total, rows.map(webhookView)));
  });

  /** The secret is in this response only; it is stored encrypted and never shown again. */
  r.post('/apps/:app_id/webhooks', auth, ...body, async (req: Request, res: Response) => {
    const { app } = await consoleApp(db, req);
    const b = parseOr400(CreateWebhookBody, req.body ?? {});
    await assertDeliverable(b.url);
    const secret = newWebhookSecret();
    const outcome = await createWithinQuota(
      db,
      'webhook',
      { perApp: config.WEBHOOKS_PER_APP, perTenant: config.WEBHOOKS_PER_TENANT },
      { tenantId: app.tenant_id, appId: app.id },
      (tx) =>
        tx.appWebhook.create({
          data: {
            tenant_id: app.tenant_id,
            app_id: app.id,
            url: b.url,
            events: b.events ? [...new Set(b.events)] : [...WEBHOOK_EVENTS],
            enabled: b.enabled,
            encrypted_secret: encryptWebhookSecret(config.ENCRYPTION_KEY, secret),
          },
        }),
    );
    if ('refused' in outcome) {
      const { scope, limit } = outcome.refused;
      throw new HttpError(
        403,
        'webhook_quota_exceeded',
        `This ${scope === 'app' ? 'app' : 'workspace'} has ${limit} webhooks, the most it may hold (WEBHOOKS_PER_${scope === 'app' ? 'APP' : 'TENANT'}); delete one first.`,
      );
    }
    res.status(201).json({ ...webhookView(outcome.created), secret });
  });

  r.patch('/apps/:app_id/webhooks/:webhook_id', auth, ...body, async (req: Request, res: Response) => {
    const hook = await webhookOf(req);
    const b = parseOr400(UpdateWebhookBody, req.body ?? {});
    if (b.url) await assertDeliverable(b.url);
    const row = await db.appWebhook.update({
      where: { id: hook.id },
      data: {
        ...(b.url ? { url: b.url } : {}),
        ...(b.events ? { events: [...new Set(b.events)] } : {}),
        ...(b.enabled !== undefined ? { enabled: b.enabled } : {}),
      },
    });
    res.json(webhookView(row));
  });

  /** Deletes the webhook and its log; deliveries in flight find it gone and stop. */
  r.delete('/apps/:app_id/webhooks/:webhook_id', auth, async (req, res) => {
    const hook = await webhookOf(req);
    await db.appWebhook.delete({ where: { id: hook.id } });
    res.status(204).end();
  });

  r.get('/apps/:app_id/webhooks/:webhook_id/deliveries', auth, async (req, res) => {
    const hook = await webhookOf(req);
    const page = pageOf(req.query);
    const where = { webhook_id: hook.id };
    const [total, rows] = await Promise.all([
      db.webhookDelivery.count({ where }),
      db.webhookDelivery.findMany({ where, orderBy: [{ created_at: 'desc' }, { id: 'asc' }], skip: page.skip, take: page.take }),
    ]);
    res.json(pageJson(page, total, rows.map(deliveryView)));
  });

  r.get('/apps/:app_id/webhooks/:webhook_id/deliveries/:delivery_id', auth, async (req, res) => {
    const { row } = await deliveryOf(req);
    res.json({ ...deliveryView(row), payload: row.payload });
  });

  /** A new delivery of the same event (same payload and event id, so receivers can deduplicate), started at once. */
  r.post('/apps/:app_id/webhooks/:webhook_id/deliveries/:delivery_id/redeliver', auth, async (req, res) => {
    const { hook, row: original } = await deliveryOf(req);
    const row = await db.webhookDelivery.create({
      data: {
        webhook_id: original.webhook_id,
        app_id: original.app_id,
        event: original.event,
        event_id: original.event_id,
        payload: original.payload as object,
        redelivery_of: original.id,
        // Leased to this request's fast path; the worker's dispatcher takes it if the start below fails.
        dispatch_after: new Date(Date.now() + 30_000),
      },
    });
    try {
      // Within the app's and tenant's delivery rate it starts now; over it, it waits for its window like any other.
      const [admitted] = await admitDeliveries(db, config, [{ id: row.id, appId: original.app_id, tenantId: hook.tenant_id }]);
      if (admitted) {
        await startDelivery(temporal, config, row.id);
        await db.webhookDelivery.update({ where: { id: row.id }, data: { dispatched_at: new Date() } });
      }
    } catch (err) {
      logger.warn({ delivery_id: row.id, err: (err as Error).message }, 'redelivery not started now; the dispatcher will');
    }
    res.status(202).json(deliveryView(row));
  });

  return r;
}
