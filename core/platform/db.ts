/** Prisma client over node-postgres (Rust-free at run time). */
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.js';

export type Db = PrismaClient;
export { PrismaClient };
export { Prisma } from '../generated/prisma/client.js';

/**
 * The node-postgres pool under each client createDb made, and whether its hot statements are named prepared ones:
 * the turn's hot statements use it directly (hot-sql.ts).
 */
const pools = new WeakMap<Db, { pool: pg.Pool; prepared: boolean }>();

/**
 * The pool rides through a PostgreSQL restart: a connection that dies while idle is dropped from the pool
 * (the adapter listens for its error), the next query opens a fresh one, so the first request after the
 * database is back succeeds. Idle connections are closed after 10 s (fewer dead ones to find after a
 * failover), and obtaining a connection gives up after 10 s instead of waiting forever on an unreachable
 * host — the request then fails as "dependency unavailable" (503 + Retry-After in the api).
 * The pool is ours, handed to the adapter (which ends it on `$disconnect`), so that hot-sql.ts shares its connections.
 */
export function createDb(databaseUrl: string, opts: { max?: number; preparedStatements?: boolean } = {}): Db {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: opts.max ?? 10,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  // A connection that dies idle is removed by the pool itself; the adapter logs it once Prisma connected, and before
  // that (only hot-sql.ts used the pool) an unheard 'error' event would end the process.
  pool.on('error', () => undefined);
  const db = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(db, { pool, prepared: opts.preparedStatements ?? true });
  return db;
}

/**
 * The pool under a client made by createDb, and whether hot statements may be named prepared statements
 * (`preparedStatements`, config HOT_SQL_PREPARED: off behind PgBouncer in transaction mode, where a statement prepared
 * on one server connection is not there on the next).
 */
export function poolOf(db: Db): { pool: pg.Pool; prepared: boolean } {
  const entry = pools.get(db);
  if (!entry) throw new Error('poolOf: this Prisma client was not made by createDb');
  return entry;
}
