/** One-shot SQL for tests that look at rows outside Prisma (the agent backend's schema, or a process under test). */
import pg from 'pg';

/** Runs one statement on a short-lived connection (safe across a PostgreSQL restart) and returns its rows. */
export async function query<T extends pg.QueryResultRow>(databaseUrl: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

/** How many backend runs exist for a message's idempotency key (exactly one, whatever was killed). */
export async function backendRunsOf(databaseUrl: string, messageId: string): Promise<number> {
  const rows = await query<{ n: number }>(databaseUrl, `select count(*)::int as n from agent_backend.runs where idempotency_key = $1`, [
    `message-${messageId}`,
  ]);
  return rows[0]!.n;
}

/** Words of an answer. */
export const wordCount = (s: string | undefined) => (s ?? '').trim().split(/\s+/).filter(Boolean).length;
