/**
 * Issue 17 M3: a remote_url file is fetched once, by us, pinned to the address we checked, and stored; the
 * turn, the prompt and the model provider get our signed URL of that copy, never the client's URL (which
 * whoever fetched it next would resolve again — DNS rebinding — and whose redirects it would follow).
 * `http://[::ffff:0:127.0.0.1]/` (the SIIT range ::ffff:0:0/96) is refused like any loopback spelling.
 * A real HTTP server on 127.0.0.1 plays the remote host; the injected `isAllowed` admits only that address.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../api/auth.js';
import { prepareMessageFiles } from '../../api/turns/message-files.js';
import { isForbiddenAddress } from '../../core/platform/net/ssrf.js';
import { uploadsDir } from '../../core/domain/uploads.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { tinyPng } from '../api/helpers.js';

let stack: Stack;
let server: http.Server;
let port: number;
const requests: string[] = [];

beforeAll(async () => {
  stack = await startTestStack('sec_m3');
  server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    if (req.url === '/cat.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(tinyPng()));
    if (req.url === '/to-metadata.png') return void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    if (req.url === '/to-loopback.png') return void res.writeHead(302, { location: `http://[::ffff:0:127.0.0.1]:${port}/cat.png` }).end();
    if (req.url === '/not-an-image.png') return void res.end('<html>hi</html>');
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await stack?.stop();
});

/** "cdn.example.test" resolves (once, for the check) to the test server, which stands in for a public host. */
const remoteFetch = { lookup: async () => ['127.0.0.1'], isAllowed: (a: string) => a === '127.0.0.1' };

async function prepare(url: string) {
  const demo = stack.demo!;
  const app: AppContext = { tenantId: demo.tenantId, appId: demo.appId, agentId: demo.agentId, appName: 'demo' };
  const endUser = await stack.db.endUser.upsert({
    where: { app_id_session_id: { app_id: demo.appId, session_id: 'm3-user' } },
    update: {},
    create: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'm3-user' },
  });
  return prepareMessageFiles({ db: stack.db, config: stack.config, remoteFetch }, app, { kind: 'end-user', endUserId: endUser.id }, [
    { type: 'image', transfer_method: 'remote_url', url },
  ]);
}

describe('M3: remote files are fetched pinned and handed on as our own copy', () => {
  it('never hands the client’s URL on: the message file points at our signed copy of the bytes fetched once', async () => {
    requests.length = 0;
    const clientUrl = `http://cdn.example.test:${port}/cat.png`;
    const [file] = await prepare(clientUrl);
    expect(file!.url).not.toContain('cdn.example.test');
    expect(file!.url).toMatch(/\/files\/[0-9a-f-]{36}\/file-preview\?/);
    expect(file!.upload_file_id).not.toBeNull();
    expect(requests).toEqual(['/cat.png']);
    const upload = await stack.db.uploadFile.findUniqueOrThrow({ where: { id: file!.upload_file_id! } });
    expect(upload.mime_type).toBe('image/png');
    expect(new Uint8Array(fs.readFileSync(path.join(uploadsDir(stack.config), upload.storage_key)))).toEqual(tinyPng());
  });

  it('refuses a redirect to the metadata address or to a loopback spelling, and content that is not the declared kind', async () => {
    await expect(prepare(`http://cdn.example.test:${port}/to-metadata.png`)).rejects.toMatchObject({
      status: 400,
      code: 'invalid_remote_url',
    });
    await expect(prepare(`http://cdn.example.test:${port}/to-loopback.png`)).rejects.toMatchObject({
      status: 400,
      code: 'invalid_remote_url',
    });
    await expect(prepare(`http://cdn.example.test:${port}/not-an-image.png`)).rejects.toMatchObject({
      status: 400,
      code: 'invalid_remote_url',
    });
  });

  it('refuses http://[::ffff:0:127.0.0.1]/ (::ffff:0:0/96) on the public API', async () => {
    expect(isForbiddenAddress('::ffff:0:127.0.0.1')).toBe(true);
    expect(isForbiddenAddress('::ffff:0:a9fe:a9fe')).toBe(true);
    const res = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: 'look',
      user: 'm3-user',
      files: [{ type: 'image', transfer_method: 'remote_url', url: 'http://[::ffff:0:127.0.0.1]/x.png' }],
    });
    expect(res.status).toBe(400);
    expect(res.frames[0]!.data.code).toBe('invalid_remote_url');
  });
});
