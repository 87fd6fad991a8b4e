/**
 * The webhook delivery rate (issue 47: each run fans out to every webhook, +372 deliveries in 15 s with 31 webhooks):
 * at most WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP deliveries start per window of WEBHOOK_DELIVERY_RATE_WINDOW_S (60 s) for
 * one app, and WEBHOOK_DELIVERIES_PER_MINUTE_PER_TENANT for one tenant. A delivery over the rate is delayed, never
 * dropped: its row waits (dispatch_after) until the window that refused it ends and is started then, so a receiver still
 * gets every event, later. Fixed windows in the shared `rate_limits` counters (core/platform/rate-counters.ts), taken in
 * one statement for a whole batch, so every worker's dispatcher (and the console's redeliver) shares one count.
 */
import type { Config } from '../../platform/config.js';
import type { Db } from '../../platform/db.js';
import { returnPoints, upsertCounters } from '../../platform/rate-counters.js';

export type DeliveryRateConfig = Pick<
  Config,
  'WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP' | 'WEBHOOK_DELIVERIES_PER_MINUTE_PER_TENANT' | 'WEBHOOK_DELIVERY_RATE_WINDOW_S'
>;

/** A delivery about to start, with who it counts against. */
export interface DueDelivery {
  id: string;
  appId: string;
  tenantId: string;
}

/**
 * Which of `due` (in order: earlier ones first) may start now. The others get `dispatch_after` at the end of the window
 * that is full, and are left to the dispatcher (they stay undispatched). Points taken for deliveries that were not
 * admitted are given back.
 */
export async function admitDeliveries(db: Db, config: DeliveryRateConfig, due: DueDelivery[]): Promise<string[]> {
  if (due.length === 0) return [];
  const windowS = config.WEBHOOK_DELIVERY_RATE_WINDOW_S;
  const scopes = [
    { prefix: 'webhook_deliveries_app', limit: config.WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP, of: (d: DueDelivery) => d.appId },
    { prefix: 'webhook_deliveries_tenant', limit: config.WEBHOOK_DELIVERIES_PER_MINUTE_PER_TENANT, of: (d: DueDelivery) => d.tenantId },
  ].filter((s) => s.limit > 0);
  if (scopes.length === 0) return due.map((d) => d.id);

  // Each counter takes one point per delivery of the batch it covers, in one statement.
  const keysOf = (d: DueDelivery) => scopes.map((s) => `${s.prefix}:${s.of(d)}`);
  const counters = new Map<string, { limit: number; wanted: number; room: number; used: number; until: number }>();
  for (const d of due)
    scopes.forEach((s, i) => {
      const key = keysOf(d)[i]!;
      const c = counters.get(key) ?? { limit: s.limit, wanted: 0, room: 0, used: 0, until: 0 };
      c.wanted += 1;
      counters.set(key, c);
    });
  const after = await upsertCounters(
    db,
    [...counters].map(([key, c]) => ({ key, points: c.wanted, durationS: windowS })),
  );
  // The room each had for this batch: its limit minus what others took in this window before it.
  for (const [key, c] of counters) {
    const row = after.get(key)!;
    c.room = Math.max(0, Math.min(c.wanted, c.limit - (row.points - c.wanted)));
    c.until = row.expire ?? Date.now() + windowS * 1000;
  }
  const admitted: string[] = [];
  const delayed: { id: string; at: Date }[] = [];
  for (const d of due) {
    const mine = keysOf(d).map((k) => counters.get(k)!);
    const full = mine.filter((c) => c.used >= c.room);
    if (full.length === 0) {
      for (const c of mine) c.used += 1;
      admitted.push(d.id);
    } else delayed.push({ id: d.id, at: new Date(Math.max(...full.map((c) => c.until))) });
  }
  // The points of deliveries that did not start go back.
  await returnPoints(
    db,
    [...counters].map(([key, c]) => ({ key, points: c.wanted - c.used })).filter((s) => s.points > 0),
  );
  if (delayed.length)
    await db.$executeRaw`
      update webhook_deliveries d set dispatch_after = x.at
        from unnest(${delayed.map((x) => x.id)}::uuid[], ${delayed.map((x) => x.at)}::timestamptz[]) as x(id, at)
       where d.id = x.id and d.dispatched_at is null`;
  return admitted;
}
