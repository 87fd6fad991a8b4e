/**
 * Production configuration (issue 15): secrets may come from files (`<NAME>_FILE`, Docker / Kubernetes secrets),
 * production still refuses the development defaults however they arrive, and the Temporal connection takes TLS,
 * mTLS and an API key from config (core/platform/temporal-connection.ts) — the options both the api's Connection and the
 * worker's NativeConnection are created with.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'pg-connection-string';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { temporalSecurity } from '../../core/platform/temporal-connection.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prod-config-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, content);
  return p;
}

const own = {
  INNER_API_KEY: 'prod-inner-key-0123456789',
  AGENT_BACKEND_TOKEN: 'prod-backend-token-0123456789',
  ENCRYPTION_KEY: 'a'.repeat(64),
  EXECUTION_CONTEXT_SIGNING_KEY: 'prod-signing-key-0123456789',
};

describe('secrets from files (<NAME>_FILE)', () => {
  it('reads the value from the file, without its trailing newline', () => {
    const c = loadConfig({ INNER_API_KEY_FILE: file('inner', 'from-a-file\n'), DATABASE_URL_FILE: file('db', 'postgresql://u:p@h/d\n') });
    expect(c.INNER_API_KEY).toBe('from-a-file');
    expect(c.DATABASE_URL).toBe('postgresql://u:p@h/d');
  });

  it('DATABASE_PASSWORD(_FILE) becomes the URL’s password, percent-encoded, so any character survives (the Helm chart)', () => {
    const password = 'p@ss:w/rd?#%41 é';
    const c = loadConfig({
      DATABASE_URL: 'postgresql://dify_app@db.example.com:5432/dify_agent?sslmode=verify-full',
      DATABASE_PASSWORD_FILE: file('pgpw', `${password}\n`),
    });
    expect(parse(c.DATABASE_URL!)).toMatchObject({
      user: 'dify_app',
      password,
      host: 'db.example.com',
      port: '5432',
      database: 'dify_agent',
      sslmode: 'verify-full',
    });
    // A URL that already holds a password gets the file's (one source of truth: the Secret).
    expect(parse(loadConfig({ DATABASE_URL: 'postgresql://u:old@h/d', DATABASE_PASSWORD: 'new' }).DATABASE_URL!).password).toBe('new');
    expect(loadConfig({ DATABASE_URL: 'postgresql://u:p@h/d' }).DATABASE_URL).toBe('postgresql://u:p@h/d');
    expect(() => loadConfig({ DATABASE_URL: 'not a url', DATABASE_PASSWORD: 'x' })).toThrow(
      /DATABASE_PASSWORD is set but DATABASE_URL is not a URL/,
    );
  });

  it('the variable itself wins over its file', () => {
    expect(loadConfig({ INNER_API_KEY: 'direct', INNER_API_KEY_FILE: file('inner2', 'file') }).INNER_API_KEY).toBe('direct');
  });

  it('an unreadable file stops the process, naming the variable and the path', () => {
    const missing = path.join(dir, 'nope');
    expect(() => loadConfig({ ENCRYPTION_KEY_FILE: missing })).toThrow(`ENCRYPTION_KEY_FILE=${missing} cannot be read (ENOENT)`);
  });

  it('production starts with secrets from files, and still refuses a development default given through a file', () => {
    const files = Object.fromEntries(Object.entries(own).map(([k, v]) => [`${k}_FILE`, file(k, `${v}\n`)]));
    expect(loadConfig({ NODE_ENV: 'production', ...files }).EXECUTION_CONTEXT_SIGNING_KEY).toBe(own.EXECUTION_CONTEXT_SIGNING_KEY);
    const weak = { ...files, INNER_API_KEY_FILE: file('weak', 'dev-inner-api-key-change-me\n') };
    expect(() => loadConfig({ NODE_ENV: 'production', ...weak })).toThrow(/refuses the development default of INNER_API_KEY;/);
  });
});

describe('Temporal connection security', () => {
  it('plain gRPC when nothing is configured (dev server, compose network)', () => {
    expect(temporalSecurity(loadConfig({}))).toEqual({});
  });

  it('an API key turns TLS on (a bearer token never travels in clear text) unless TLS is explicitly off', () => {
    expect(temporalSecurity(loadConfig({ TEMPORAL_API_KEY: 'k-123' }))).toEqual({ apiKey: 'k-123', tls: {} });
    expect(temporalSecurity(loadConfig({ TEMPORAL_API_KEY: 'k-123', TEMPORAL_TLS: 'false' }))).toEqual({ apiKey: 'k-123' });
    expect(temporalSecurity(loadConfig({ TEMPORAL_API_KEY_FILE: file('tkey', 'k-from-file\n') })).apiKey).toBe('k-from-file');
  });

  it('server CA, server name and the mTLS client pair are read from their PEM files', () => {
    const ca = file('ca.pem', '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n');
    const crt = file('client.pem', '-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n');
    const key = file('client.key', '-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n');
    const s = temporalSecurity(
      loadConfig({
        TEMPORAL_TLS_CA_FILE: ca,
        TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
        TEMPORAL_TLS_CERT_FILE: crt,
        TEMPORAL_TLS_KEY_FILE: key,
      }),
    );
    expect(s.tls?.serverNameOverride).toBe('temporal.internal');
    expect(Buffer.from(s.tls!.serverRootCACertificate!).toString()).toContain('CA');
    expect(Buffer.from(s.tls!.clientCertPair!.crt).toString()).toContain('CLIENT');
    expect(Buffer.from(s.tls!.clientCertPair!.key).toString()).toContain('KEY');
    expect(temporalSecurity(loadConfig({ TEMPORAL_TLS: 'true' }))).toEqual({ tls: {} }); // system CAs
  });

  it('refuses half an mTLS pair, a missing PEM file, and TLS off with TLS files set', () => {
    const crt = file('only.pem', 'x');
    expect(() => loadConfig({ TEMPORAL_TLS_CERT_FILE: crt })).toThrow(/TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE together/);
    expect(() => temporalSecurity(loadConfig({ TEMPORAL_TLS_CA_FILE: path.join(dir, 'absent.pem') }))).toThrow(
      /TEMPORAL_TLS_CA_FILE=.*absent\.pem cannot be read/,
    );
    expect(() => temporalSecurity(loadConfig({ TEMPORAL_TLS: 'false', TEMPORAL_TLS_CA_FILE: crt }))).toThrow(/contradicts/);
  });
});
