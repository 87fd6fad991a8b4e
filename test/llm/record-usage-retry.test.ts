/**
 * The gateway at the end of a model call while PostgreSQL is away: the answer has streamed, recording
 * its usage fails for a moment (connection lost). The call still finishes with its usage and is
 * charged once, instead of failing an answer the caller already has.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../core/platform/db.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { createLogger } from '../../core/platform/logger.js';
import { answerOf, createTenant, invokeBody, post, readChunks, serveRouter, startTestDb, type Served, type TestDb } from './helpers.js';

let tdb: TestDb;
let api: Served;
/** How many of the next usage recordings fail as if the database connection had been cut. */
let failNext = 0;

beforeAll(async () => {
  tdb = await startTestDb();
  // The real database, except that recording usage (its one statement, or a transaction) fails while `failNext` > 0.
  const records = (prop: string | symbol, args: unknown[]) =>
    prop === '$transaction' || (prop === '$queryRaw' && (args[0] as readonly string[]).join('?').includes('INSERT INTO credit_ledger'));
  const flaky = new Proxy(tdb.db, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown;
      if (prop === '$transaction' || prop === '$queryRaw') {
        return (...args: unknown[]) => {
          if (failNext > 0 && records(prop, args)) {
            failNext--;
            return Promise.reject(Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }));
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as Db;
  const providers = createDefaultProviders({
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: undefined,
    OPENAI_COMPATIBLE_API_KEY: undefined,
    OPENAI_COMPATIBLE_MODEL: undefined,
  } as never);
  api = await serveRouter({ db: flaky, logger: createLogger('record-retry-test', 'silent'), providers });
}, 180_000);

afterAll(async () => {
  await api?.close();
  await tdb?.close();
});

describe('recording usage while the database is briefly away', () => {
  it('is retried: the call ends with its usage, one ledger row, charged once', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant);
    failNext = 2;
    const chunks = await readChunks(await post(api.url, body));
    expect(failNext).toBe(0);
    expect(chunks.filter((c) => c.code !== 0)).toEqual([]);
    expect(answerOf(chunks)).toContain('hello there');
    const usage = chunks.at(-1)!.data.delta.usage;
    expect(usage).toMatchObject({ model_requests: 1 });

    const rows = await tdb.db.creditLedger.findMany({ where: { billing_request_id: `${body.caller.invocation_id}:0` } });
    expect(rows).toHaveLength(1);
    expect(rows[0].completion_tokens).toBe(usage.completion_tokens);
    const pool = await tdb.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenant } });
    expect(pool.quota_used).toBe(rows[0].credits);
  });
});
