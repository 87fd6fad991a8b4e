/**
 * The public API's rate-limit round in one statement (api/rate-limit.ts upsertCounters): the rows and arithmetic of
 * rate-limiter-flexible's RateLimiterPostgres upsert, for several counters at once, on real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertCounters } from '../../api/rate-limit.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { freshDatabase } from '../support/db.js';

let db: Db;
beforeAll(async () => {
  db = createDb(await freshDatabase('rate_counters'));
}, 120_000);
afterAll(async () => {
  await db?.$disconnect();
});

const row = async (key: string) =>
  (await db.$queryRaw<{ points: number; expire: bigint | null }[]>`select points, expire from rate_limits where key = ${key}`)[0];

describe('upsertCounters', () => {
  it('starts new counters, adds to live ones under their expiry, and gives points back', async () => {
    const before = Date.now();
    const first = await upsertCounters(db, [
      { key: 'a:1', points: 1, durationS: 60 },
      { key: 'b:1', points: 1, durationS: 3600 },
    ]);
    expect(first.get('a:1')!.points).toBe(1);
    expect(first.get('a:1')!.expire).toBeGreaterThanOrEqual(before + 60_000);
    expect(first.get('b:1')!.expire).toBeGreaterThanOrEqual(before + 3_600_000);
    const expiry = first.get('a:1')!.expire;

    const second = await upsertCounters(db, [{ key: 'a:1', points: 1, durationS: 60 }]);
    expect(second.get('a:1')).toEqual({ points: 2, expire: expiry });

    const back = await upsertCounters(db, [{ key: 'b:1', points: -1, durationS: 3600 }]);
    expect(back.get('b:1')!.points).toBe(0);
    expect(Number((await row('a:1'))!.points)).toBe(2);
  });

  it('starts a counter whose window ended again at the given points with a new expiry', async () => {
    await upsertCounters(db, [{ key: 'c:1', points: 5, durationS: 60 }]);
    await db.$executeRaw`update rate_limits set expire = ${String(Date.now() - 1000)}::bigint where key = 'c:1'`;
    const before = Date.now();
    const again = await upsertCounters(db, [{ key: 'c:1', points: 1, durationS: 60 }]);
    expect(again.get('c:1')!.points).toBe(1);
    expect(again.get('c:1')!.expire).toBeGreaterThanOrEqual(before + 60_000);
  });
});
