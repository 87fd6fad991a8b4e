/** Request logs: one structured line per request with its id, status, duration and the tenant/app ids. */
import express from 'express';
import pino from 'pino';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { currentRequest, requestLog } from '../../api/request-log.js';

function appWithLogs() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  const app = express();
  app.use(requestLog(pino({ level: 'info' }, sink)));
  app.use((req, _res, next) => {
    if (req.path.startsWith('/v1')) req.appCtx = { tenantId: 't-1', appId: 'a-1', agentId: null, appName: 'x' };
    next();
  });
  app.get('/v1/ctx', async (_req, res) => {
    await new Promise((r) => setTimeout(r, 5));
    res.json({ requestId: currentRequest()?.requestId, selfUrl: currentRequest()?.selfUrl });
  });
  app.get('/boom', (_req, res) => void res.status(503).json({}));
  return { app, lines };
}

async function withServer<T>(app: express.Express, fn: (url: string) => Promise<T>): Promise<T> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    return await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.close();
  }
}

describe('request logging', () => {
  it('logs method, path, status, duration and the tenant/app ids under the request id it echoes back', async () => {
    const { app, lines } = appWithLogs();
    await withServer(app, async (url) => {
      const res = await fetch(`${url}/v1/ctx?user=secret`);
      const id = res.headers.get('x-request-id')!;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      // the request context reaches code below the routes, across awaits
      expect(await res.json()).toEqual({ requestId: id, selfUrl: url });
      await new Promise((r) => setTimeout(r, 20));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        request_id: id,
        method: 'GET',
        path: '/v1/ctx',
        status: 200,
        tenant_id: 't-1',
        app_id: 'a-1',
        level: 30,
      });
      expect(lines[0]!.duration_ms).toBeTypeOf('number');
      expect(JSON.stringify(lines[0])).not.toContain('secret'); // query strings are not logged
    });
  });

  it('keeps a sane incoming X-Request-Id, replaces an unsafe one, and logs 5xx as errors', async () => {
    const { app, lines } = appWithLogs();
    await withServer(app, async (url) => {
      expect((await fetch(`${url}/v1/ctx`, { headers: { 'x-request-id': 'edge-123.abc' } })).headers.get('x-request-id')).toBe(
        'edge-123.abc',
      );
      const replaced = (await fetch(`${url}/v1/ctx`, { headers: { 'x-request-id': 'a b <script>' } })).headers.get('x-request-id');
      expect(replaced).toMatch(/^[0-9a-f-]{36}$/);
      await fetch(`${url}/boom`);
      await new Promise((r) => setTimeout(r, 20));
      expect(lines.at(-1)).toMatchObject({ status: 503, level: 50, msg: 'request failed' });
    });
  });
});
