/**
 * Starts a `deliverWebhook` workflow for every delivery row not yet dispatched (rows are written by
 * enqueue_webhook_event inside the transaction that committed the event: migration 20261208000000). Runs in every
 * worker; no leader: a claim is `FOR UPDATE SKIP LOCKED` with a lease (dispatch_after moves forward), and the
 * workflow id is derived from the row id, so two dispatchers starting the same row start one workflow
 * (WorkflowExecutionAlreadyStartedError counts as done). Claimed rows start only within the delivery rate of their
 * app and tenant (core/domain/webhooks/delivery-rate.ts); the others wait, claimed again when their window ends. After a
 * pass, at most once an hour, it prunes finished deliveries past their retention (core/domain/webhooks/retention.ts).
 */
import type { Client } from '@temporalio/client';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { PollingLoop } from '../core/platform/polling-loop.js';
import { startDelivery, type WebhookDispatchConfig } from '../core/domain/webhooks/start-delivery.js';
import { admitDeliveries, type DeliveryRateConfig } from '../core/domain/webhooks/delivery-rate.js';
import { pruneWebhookDeliveries, WEBHOOK_PRUNE_INTERVAL_MS } from '../core/domain/webhooks/retention.js';

export type { WebhookDispatchConfig };
export type WebhookDispatcherConfig = WebhookDispatchConfig & DeliveryRateConfig;

const LEASE_S = 30;
const BATCH = 20;

export class WebhookDispatcher extends PollingLoop {
  private lastPrune = 0;

  constructor(private readonly opts: { db: Db; client: Client; config: WebhookDispatcherConfig; logger: Logger }) {
    super({ name: 'webhook dispatcher', logger: opts.logger, pollMs: opts.config.WEBHOOK_DISPATCH_POLL_MS, batch: BATCH });
  }

  protected override afterDrain(): Promise<void> {
    return this.prune();
  }

  /** Claims due rows and starts their workflows; returns how many were claimed. */
  async drainOnce(): Promise<number> {
    const { db, client, config, logger } = this.opts;
    const rows = await db.$queryRaw<{ id: string; app_id: string; tenant_id: string; created_at: Date }[]>`
      update webhook_deliveries d set dispatch_after = now() + make_interval(secs => ${LEASE_S}::float8)
        from apps a
       where a.id = d.app_id and d.id in (select id from webhook_deliveries
                       where dispatched_at is null and dispatch_after <= now()
                       order by dispatch_after, created_at limit ${BATCH} for update skip locked)
      returning d.id::text as id, d.app_id::text as app_id, a.tenant_id::text as tenant_id, d.created_at`;
    // Oldest first within the rate; the rest wait for their window (delayed, not dropped).
    rows.sort((x, y) => x.created_at.getTime() - y.created_at.getTime());
    const admitted = await admitDeliveries(
      db,
      config,
      rows.map((r) => ({ id: r.id, appId: r.app_id, tenantId: r.tenant_id })),
    );
    await Promise.all(
      admitted.map(async (id) => {
        try {
          await startDelivery(client, config, id);
          await db.$executeRaw`update webhook_deliveries set dispatched_at = now() where id = ${id}::uuid`;
        } catch (err) {
          // The lease brings the row back; Temporal is probably down.
          logger.warn({ delivery_id: id, err: (err as Error).message }, 'webhook delivery could not be started; will retry');
        }
      }),
    );
    return rows.length;
  }

  private async prune(): Promise<void> {
    if (Date.now() - this.lastPrune < WEBHOOK_PRUNE_INTERVAL_MS) return;
    this.lastPrune = Date.now();
    const n = await pruneWebhookDeliveries(this.opts.db);
    if (n) this.opts.logger.info({ deleted: n }, 'webhook dispatcher: pruned old deliveries');
  }
}
