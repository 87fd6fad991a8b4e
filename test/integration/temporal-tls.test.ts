/**
 * The api and the worker reach Temporal over TLS and mTLS with the project's own settings (issue 43 item 7, C-23):
 * TEMPORAL_TLS_CA_FILE / TEMPORAL_TLS_SERVER_NAME / TEMPORAL_TLS_CERT_FILE / TEMPORAL_TLS_KEY_FILE through loadConfig
 * and temporalSecurity, into the api's Connection (api/wire.ts) and the worker's NativeConnection (worker/start.ts).
 * The CLI's dev server has no TLS flags, so a TLS terminator made here with node:tls (HTTP/2 by ALPN, as a Temporal
 * frontend or an ingress in front of one) sits in front of it and pipes the gRPC bytes through. Certificates are
 * generated here with openssl: a CA, the server's (SAN temporal.test) and a client's signed by it, and a second CA
 * that signed nothing the server holds.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lazyTemporalConnection } from '../../api/wire.js';
import { connectWorkerTemporal } from '../../worker/start.js';
import { loadConfig } from '../../core/platform/config.js';
import { temporalSecurity } from '../../core/platform/temporal-connection.js';
import { freePort } from '../../stack/ports.js';
import { locateTemporal, startTemporalDevServer, type DevServer } from '../../stack/temporal.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-tls-'));
const file = (n: string) => path.join(dir, n);
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

function makeCa(name: string) {
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
  );
}
function makeCert(name: string, ca: string, ext: string) {
  fs.writeFileSync(file(`${name}.ext`), ext);
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  );
}

let dev: DevServer;
const proxies: tls.Server[] = [];
/** What the terminator saw refused (a handshake that failed on its side). */
const refusals: string[] = [];

/** A TLS frontend for the dev server: server certificate, and with `clientCa` mTLS (a client certificate required). */
async function terminator(clientCa?: string): Promise<number> {
  const [host, port] = dev.address.split(':');
  const server = tls.createServer(
    {
      key: fs.readFileSync(file('server.key')),
      cert: fs.readFileSync(file('server.pem')),
      ALPNProtocols: ['h2'],
      ...(clientCa ? { ca: fs.readFileSync(file(`${clientCa}.pem`)), requestCert: true, rejectUnauthorized: true } : {}),
    },
    (sock) => {
      const up = net.connect(Number(port), host);
      sock.pipe(up).pipe(sock);
      const end = () => (sock.destroy(), up.destroy());
      sock.on('error', end);
      up.on('error', end);
    },
  );
  server.on('tlsClientError', (err) => refusals.push(err.message));
  const p = await freePort();
  await new Promise<void>((r) => server.listen(p, '127.0.0.1', r));
  proxies.push(server);
  return p;
}

const env = (port: number, vars: Record<string, string>) =>
  loadConfig({ TEMPORAL_ADDRESS: `127.0.0.1:${port}`, TEMPORAL_TLS_SERVER_NAME: 'temporal.test', ...vars });

/** The api's way: a lazy Connection, used once. */
async function apiReaches(port: number, vars: Record<string, string>): Promise<string> {
  const config = env(port, vars);
  const conn = lazyTemporalConnection(config.TEMPORAL_ADDRESS!, temporalSecurity(config));
  try {
    const ns = await conn.workflowService.describeNamespace({ namespace: 'default' });
    return ns.namespaceInfo?.name ?? '';
  } finally {
    await conn.close();
  }
}

/** The worker's way: NativeConnection.connect (eager), then a call. */
async function workerReaches(port: number, vars: Record<string, string>): Promise<string> {
  const config = env(port, vars);
  const conn = await connectWorkerTemporal(config.TEMPORAL_ADDRESS!, config);
  try {
    const ns = await conn.workflowService.describeNamespace({ namespace: 'default' });
    return ns.namespaceInfo?.name ?? '';
  } finally {
    await conn.close();
  }
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'connected',
    (e: unknown) => String((e as Error).message ?? e),
  );

beforeAll(async () => {
  makeCa('ca');
  makeCa('other-ca');
  makeCert('server', 'ca', 'subjectAltName=DNS:temporal.test\nextendedKeyUsage=serverAuth\n');
  makeCert('client', 'ca', 'extendedKeyUsage=clientAuth\n');
  makeCert('stranger', 'other-ca', 'extendedKeyUsage=clientAuth\n');
  dev = await startTemporalDevServer({
    bin: await locateTemporal(),
    dataDir: dir,
    port: await freePort(),
    uiPort: await freePort(),
    headless: true,
  });
}, 120_000);
afterAll(async () => {
  for (const s of proxies) s.close();
  await dev?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('Temporal over TLS and mTLS with the TEMPORAL_TLS_* settings', () => {
  it('TLS: the api and the worker connect with TEMPORAL_TLS_CA_FILE; another CA is refused naming the certificate problem', async () => {
    const port = await terminator();
    const ok = { TEMPORAL_TLS_CA_FILE: file('ca.pem') };
    expect(await apiReaches(port, ok)).toBe('default');
    expect(await workerReaches(port, ok)).toBe('default');

    const wrong = { TEMPORAL_TLS_CA_FILE: file('other-ca.pem') };
    const workerErr = await failure(workerReaches(port, wrong));
    expect(workerErr).not.toBe('connected');
    expect(workerErr).toContain(
      `refused the TLS connection: its server certificate is not signed by TEMPORAL_TLS_CA_FILE=${file('other-ca.pem')}`,
    );
    const apiErr = await failure(apiReaches(port, wrong));
    expect(apiErr).not.toBe('connected');
    expect(apiErr).toMatch(/certificate|UNAVAILABLE|tls/i);
    // And plain text to a TLS frontend does not get through either.
    expect(await failure(workerReaches(port, { TEMPORAL_TLS: 'false' }))).not.toBe('connected');
  }, 120_000);

  it('mTLS: with TEMPORAL_TLS_CERT_FILE/KEY_FILE both connect; without a client certificate, or with one of another CA, the server refuses', async () => {
    const port = await terminator('ca');
    const ok = {
      TEMPORAL_TLS_CA_FILE: file('ca.pem'),
      TEMPORAL_TLS_CERT_FILE: file('client.pem'),
      TEMPORAL_TLS_KEY_FILE: file('client.key'),
    };
    expect(await apiReaches(port, ok)).toBe('default');
    expect(await workerReaches(port, ok)).toBe('default');

    refusals.length = 0;
    const noCert = await failure(workerReaches(port, { TEMPORAL_TLS_CA_FILE: file('ca.pem') }));
    expect(noCert).not.toBe('connected');
    const stranger = {
      TEMPORAL_TLS_CA_FILE: file('ca.pem'),
      TEMPORAL_TLS_CERT_FILE: file('stranger.pem'),
      TEMPORAL_TLS_KEY_FILE: file('stranger.key'),
    };
    const strangerErr = await failure(workerReaches(port, stranger));
    expect(strangerErr).not.toBe('connected');
    expect(await failure(apiReaches(port, stranger))).not.toBe('connected');
    expect(refusals.length).toBeGreaterThanOrEqual(2);
    expect(refusals.join('\n')).toMatch(/certificate/i);
  }, 120_000);
});
