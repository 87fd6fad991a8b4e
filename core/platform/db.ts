/** Prisma client over node-postgres (Rust-free at run time). */
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../generated/prisma/client.js';

export type Db = PrismaClient;
export { PrismaClient };
export { Prisma } from '../generated/prisma/client.js';

/**
 * The pool rides through a PostgreSQL restart: a connection that dies while idle is dropped from the pool
 * (the adapter listens for its error), the next query opens a fresh one, so the first request after the
 * database is back succeeds. Idle connections are closed after 10 s (fewer dead ones to find after a
 * failover), and obtaining a connection gives up after 10 s instead of waiting forever on an unreachable
 * host — the request then fails as "dependency unavailable" (503 + Retry-After in the api).
 */
export function createDb(databaseUrl: string, opts: { max?: number } = {}): Db {
  const adapter = new PrismaPg({
    connectionString: databaseUrl,
    max: opts.max ?? 10,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  return new PrismaClient({ adapter });
}
