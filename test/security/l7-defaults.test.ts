/**
 * Issue 17 L7: no silent defaults. Production refuses the development secrets (and a signing key equal to
 * the inner API key), and the embedded PostgreSQL of `npm start` gets a generated password kept in
 * DATA_DIR instead of postgres/postgres — also for a cluster created before, on its next start.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { startEmbeddedPg, type EmbeddedPg } from '../../core/platform/embedded-pg.js';
import { freePort } from '../../stack/ports.js';

const own = {
  INNER_API_KEY: 'prod-inner-key-0123456789',
  AGENT_BACKEND_TOKEN: 'prod-backend-token-0123456789',
  ENCRYPTION_KEY: 'a'.repeat(64),
  EXECUTION_CONTEXT_SIGNING_KEY: 'prod-signing-key-0123456789',
};

describe('L7: production refuses the development default secrets', () => {
  it('names every secret left at its default', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(
      /INNER_API_KEY, AGENT_BACKEND_TOKEN, ENCRYPTION_KEY, EXECUTION_CONTEXT_SIGNING_KEY/,
    );
    expect(() => loadConfig({ NODE_ENV: 'production', ...own, ENCRYPTION_KEY: undefined })).toThrow(/ENCRYPTION_KEY/);
  });

  it('refuses a signing key equal to the inner API key, and starts with secrets of its own', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', ...own, EXECUTION_CONTEXT_SIGNING_KEY: own.INNER_API_KEY })).toThrow(/must differ/);
    expect(loadConfig({ NODE_ENV: 'production', ...own }).INNER_API_KEY).toBe(own.INNER_API_KEY);
    expect(loadConfig({}).NODE_ENV).toBe('development'); // development keeps working with the defaults
  });
});

const clusters: EmbeddedPg[] = [];
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sec-l7-'));
afterAll(async () => {
  for (const c of clusters) await c.stop().catch(() => undefined);
  fs.rmSync(root, { recursive: true, force: true });
});

async function canConnect(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url });
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

const legacyUrl = (port: number) => `postgresql://postgres:postgres@127.0.0.1:${port}/postgres`;

describe('L7: embedded PostgreSQL has a generated password kept in DATA_DIR', () => {
  it('a new cluster: random password in a 0600 file; postgres/postgres is refused', async () => {
    const dataDir = path.join(root, 'fresh');
    const passwordFile = path.join(dataDir, 'pg-password');
    const port = await freePort();
    const cluster = await startEmbeddedPg({ dir: path.join(dataDir, 'pg'), port, durable: false, passwordFile });
    clusters.push(cluster);
    const password = fs.readFileSync(passwordFile, 'utf8').trim();
    expect(password).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    expect(fs.statSync(passwordFile).mode & 0o777).toBe(0o600);
    expect(cluster.url('postgres')).toContain(encodeURIComponent(password));
    expect(await canConnect(cluster.url('postgres'))).toBe(true);
    expect(await canConnect(legacyUrl(port))).toBe(false);
    await cluster.stop();
  }, 120_000);

  it('a cluster made with postgres/postgres is switched to a generated password on its next start', async () => {
    const dataDir = path.join(root, 'legacy');
    const port = await freePort();
    const before = await startEmbeddedPg({ dir: path.join(dataDir, 'pg'), port, durable: false });
    clusters.push(before);
    expect(await canConnect(legacyUrl(port))).toBe(true);
    await before.stop();

    const after = await startEmbeddedPg({
      dir: path.join(dataDir, 'pg'),
      port,
      durable: false,
      passwordFile: path.join(dataDir, 'pg-password'),
    });
    clusters.push(after);
    expect(await canConnect(after.url('postgres'))).toBe(true);
    expect(await canConnect(legacyUrl(port))).toBe(false);
    await after.stop();
  }, 120_000);
});
