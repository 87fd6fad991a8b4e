/**
 * Statements a client sends, counted on that client alone: every `query` of every connection its pool opens (a
 * transaction's BEGIN and COMMIT included), so the count is the number of round trips. Nothing process-wide is
 * patched, so a file using it may share its vitest process with others.
 */
import type pg from 'pg';
import { createDb, poolOf, type Db } from '../../core/platform/db.js';

export interface CountingDb {
  db: Db;
  /** Statements sent so far. */
  statements: () => number;
  /** The statements `fn` sends (nothing else may use this client meanwhile). */
  count: (fn: () => Promise<unknown>) => Promise<number>;
}

export function countingDb(url: string, opts: Parameters<typeof createDb>[1] = {}): CountingDb {
  const db = createDb(url, opts);
  let n = 0;
  poolOf(db).pool.on('connect', (client: pg.PoolClient) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      n += 1;
      return query(...args);
    };
  });
  return {
    db,
    statements: () => n,
    count: async (fn) => {
      const before = n;
      await fn();
      return n - before;
    },
  };
}
