/**
 * Retention of the webhook delivery log (issue 35 item 4): a finished delivery (succeeded, failed, refused) older than
 * WEBHOOK_DELIVERY_RETENTION_DAYS is deleted; a pending one (still retrying, WEBHOOK_RETRY_FOR_MS) is kept whatever
 * its age. The webhook dispatcher's loop (worker/webhook-dispatcher.ts) runs it at most once an hour per worker, in
 * batches so one pass never holds many row locks; a redelivery keeps its `redelivery_of` id after the original is gone.
 */
import type { Db } from '../../platform/db.js';

/** Days a finished delivery stays in the log (a constant: the console's delivery log is for recent trouble). */
export const WEBHOOK_DELIVERY_RETENTION_DAYS = 30;
/** How often a dispatcher prunes. */
export const WEBHOOK_PRUNE_INTERVAL_MS = 3_600_000;
const PRUNE_BATCH = 1000;

/** Deletes finished deliveries created more than `days` ago; returns how many. */
export async function pruneWebhookDeliveries(db: Db, days = WEBHOOK_DELIVERY_RETENTION_DAYS): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await db.$executeRaw`
      delete from webhook_deliveries where id in (
        select id from webhook_deliveries
         where created_at < now() - make_interval(days => ${days}::int) and status <> 'pending'
         limit ${PRUNE_BATCH} for update skip locked)`;
    total += n;
    if (n < PRUNE_BATCH) return total;
  }
}
