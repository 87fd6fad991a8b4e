/**
 * Admission control (issue 21): a deployment-wide cap on turns in flight, so that beyond capacity a new turn is
 * refused at once with 503 `server_busy` + Retry-After instead of being started and timing out (the c=64 overload
 * of bench/README.md: client timeouts, metering transactions at their 5 s timeout, workflow tasks over 5 s).
 *
 * Counted from the messages themselves (status pending or running, every app): every api replica sees the same
 * number, and nothing can leak the way a counter left by a crashed replica would. A turn waiting for a human is
 * `paused` and holds no worker slot, so it does not count. The count reads a range of `messages(status)`, i.e. only
 * the in-flight entries: 0.15 ms in PostgreSQL (~1.7 ms round trip through Prisma) with 300k messages over 5,000
 * apps, where the `(app_id, status)` index took 8–20 ms (migration 20261204100000).
 *
 * The check is not a lock: replicas starting turns at the same instant may overshoot the cap by as many turns as
 * they start together. That is the price of not serialising every turn start on one row; the cap exists to shed a
 * flood, which it does.
 *
 * Why 503 and not 429: 429 says "you sent too many" (RFC 6585) — the per-key and per-user limits of
 * api/rate-limit.ts answer it. This refusal is the server's condition, whoever asks (RFC 9110 §15.6.4: "temporarily
 * unable to handle the request due to a temporary overload"), so a well-behaved client retries after Retry-After
 * instead of concluding that its own key is throttled.
 */
import { maxTurnsInFlight, type Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { HttpError } from '../errors.js';

export type AdmissionConfig = Pick<Config, 'MAX_TURNS_IN_FLIGHT' | 'WORKER_COUNT' | 'WORKER_MAX_CONCURRENT_ACTIVITIES'>;

/** Turns in flight across the deployment (one query). */
export async function turnsInFlight(db: Db): Promise<number> {
  return db.message.count({ where: { status: { in: ['pending', 'running'] } } });
}

/** Throws 503 `server_busy` (the error handler adds Retry-After) when the deployment is at its cap; call before any write. */
export async function admitTurn(db: Db, config: AdmissionConfig): Promise<void> {
  const cap = maxTurnsInFlight(config);
  if (cap === 0) return;
  if ((await turnsInFlight(db)) < cap) return;
  throw new HttpError(503, 'server_busy', 'The server is at capacity for turns in progress; retry after the Retry-After seconds.');
}
