/**
 * Counters of the `rate_limits` table (rate-limiter-flexible's RateLimiterPostgres layout: `key`, `points`, `expire` in
 * ms since the epoch), shared by every process through PostgreSQL: the public API's request and stream limits
 * (api/rate-limit.ts) and the webhook delivery rate (core/domain/webhooks/delivery-rate.ts).
 */
import type { Db } from './db.js';

/** One counter of a round: its row key (`<prefix>:<key>`, rate-limiter-flexible's), the points to add, its window. */
export interface CounterStep {
  key: string;
  points: number;
  durationS: number;
}

/**
 * RateLimiterPostgres's upsert for several counters in ONE statement (issue 33: the public API's round took one per
 * counter, four for a chat request, and two more when its stream closed): the same rows and the same arithmetic — a
 * row whose window ended starts again at the points given with a new expiry, otherwise the points are added under its
 * expiry. Returns each row's points and expiry (ms since the epoch) after the statement. The keys must differ.
 */
export async function upsertCounters(db: Db, steps: CounterStep[]): Promise<Map<string, { points: number; expire: number | null }>> {
  const now = Date.now();
  const rows = await db.$queryRaw<{ key: string; points: number; expire: bigint | null }[]>`
    INSERT INTO rate_limits (key, points, expire)
    SELECT * FROM unnest(${steps.map((s) => s.key)}::text[], ${steps.map((s) => s.points)}::int[],
                         ${steps.map((s) => String(now + s.durationS * 1000))}::bigint[])
    ON CONFLICT (key) DO UPDATE SET
      points = CASE WHEN rate_limits.expire <= ${String(now)}::bigint THEN EXCLUDED.points ELSE rate_limits.points + EXCLUDED.points END,
      expire = CASE WHEN rate_limits.expire <= ${String(now)}::bigint THEN EXCLUDED.expire ELSE rate_limits.expire END
    RETURNING key, points, expire`;
  return new Map(rows.map((r) => [r.key, { points: Number(r.points), expire: r.expire === null ? null : Number(r.expire) }]));
}

/**
 * Gives points back to counters whose window is still running (a take that was not used), never below 0; a window
 * that ended meanwhile is left alone (its next take starts it again). One statement.
 */
export async function returnPoints(db: Db, steps: { key: string; points: number }[]): Promise<void> {
  if (steps.length === 0) return;
  await db.$executeRaw`
    UPDATE rate_limits r SET points = greatest(r.points - s.points, 0)
      FROM unnest(${steps.map((s) => s.key)}::text[], ${steps.map((s) => s.points)}::int[]) AS s(key, points)
     WHERE r.key = s.key AND r.expire > ${String(Date.now())}::bigint`;
}
