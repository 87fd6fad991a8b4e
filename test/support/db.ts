/** Per-test-file databases on the shared embedded PostgreSQL. */
import pg from 'pg';
import { inject } from 'vitest';
import { applyMigrations } from '../../core/platform/migrate.js';

export function pgUrl(database: string): string {
  return `postgresql://postgres:postgres@127.0.0.1:${inject('pgPort')}/${database}`;
}

/**
 * Creates a fresh, migrated database and returns its URL: a copy of the run's migrated template (global-setup.ts), then
 * applyMigrations on the copy (a no-op that still checks every migration is applied with its checksum).
 */
export async function freshDatabase(name: string): Promise<string> {
  const db = `t_${name.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: pgUrl('postgres') });
  await admin.connect();
  try {
    await admin.query(`drop database if exists "${db}" with (force)`);
    const template = inject('pgTemplate');
    await admin.query(template ? `create database "${db}" template "${template}"` : `create database "${db}"`);
  } finally {
    await admin.end();
  }
  const url = pgUrl(db);
  await applyMigrations(url);
  return url;
}
