/**
 * Applies prisma/migrations/<name>/migration.sql in order and keeps Prisma's `_prisma_migrations`
 * bookkeeping (same table, same sha256 checksums), so `prisma migrate status/deploy` agree wherever the
 * schema engine exists. Concurrent appliers (api replicas, workers) serialise on an advisory lock.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { projectRoot } from './project-root.js';

export const MIGRATIONS_DIR = path.join(projectRoot(import.meta.url), 'prisma', 'migrations');
const LOCK_ID = 72707369; // arbitrary, constant

export interface MigrationResult {
  applied: string[];
  skipped: string[];
}

export async function applyMigrations(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<MigrationResult> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const result: MigrationResult = { applied: [], skipped: [] };
  try {
    await client.query('select pg_advisory_lock($1)', [LOCK_ID]);
    await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL,
      "checksum" VARCHAR(64) NOT NULL,
      "finished_at" TIMESTAMPTZ,
      "migration_name" VARCHAR(255) NOT NULL,
      "logs" TEXT,
      "rolled_back_at" TIMESTAMPTZ,
      "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
      "applied_steps_count" INTEGER NOT NULL DEFAULT 0
    )`);
    const names = fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
      .map((d) => d.name)
      .sort();
    const done = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      'select migration_name, checksum, finished_at from "_prisma_migrations" where rolled_back_at is null',
    );
    const byName = new Map(done.rows.map((r) => [r.migration_name, r]));
    for (const name of names) {
      const sql = fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8');
      const checksum = crypto.createHash('sha256').update(sql).digest('hex');
      const prev = byName.get(name);
      if (prev?.finished_at) {
        if (prev.checksum !== checksum) {
          throw new Error(`Migration ${name} was modified after it was applied (checksum mismatch). Add a new migration instead.`);
        }
        result.skipped.push(name);
        continue;
      }
      if (prev && !prev.finished_at) {
        throw new Error(`Migration ${name} failed earlier and needs manual resolution (see _prisma_migrations.logs).`);
      }
      const id = crypto.randomUUID();
      await client.query('begin');
      try {
        await client.query('insert into "_prisma_migrations" (id, checksum, migration_name, started_at) values ($1, $2, $3, now())', [
          id,
          checksum,
          name,
        ]);
        await client.query(sql);
        await client.query('update "_prisma_migrations" set finished_at = now(), applied_steps_count = 1 where id = $1', [id]);
        await client.query('commit');
        result.applied.push(name);
      } catch (err) {
        await client.query('rollback');
        throw new Error(`Migration ${name} failed: ${(err as Error).message}`);
      }
    }
    return result;
  } finally {
    await client.query('select pg_advisory_unlock($1)', [LOCK_ID]).catch(() => undefined);
    await client.end();
  }
}
