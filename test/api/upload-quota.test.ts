/**
 * The per-tenant quota on stored uploads (TENANT_MAX_UPLOAD_BYTES, core/domain/upload-quota.ts): POST /v1/files/upload and
 * remote_url files of chat requests may store up to the quota; past it 413 `storage_quota_exceeded` naming the
 * setting, with no file on disk and no upload_files row. Checked by the declared size, on the bytes as they stream,
 * and under a per-tenant lock when the row is written: of two concurrent uploads that together exceed it, exactly
 * one wins. Another tenant is unaffected.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../api/auth.js';
import { HttpError } from '../../api/errors.js';
import { prepareMessageFiles } from '../../api/turns/message-files.js';
import { ensureTenant } from '../../core/domain/provision.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { tinyPng, upload } from './helpers.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

const QUOTA = 3_000;
let stack: Stack;
let key: string;
let server: http.Server;

beforeAll(async () => {
  stack = await startTestStack('api_upload_quota', { env: { TENANT_MAX_UPLOAD_BYTES: QUOTA } });
  key = stack.demo!.apiKey;
  server = http.createServer((req, res) => {
    if (req.url === '/cat.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(tinyPng()));
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await stack?.stop();
});

const text = (n: number) => new Uint8Array(n).fill(0x61);
const tenantDir = (tenantId: string) => path.join(stack.config.dataDir, 'uploads', tenantId);
const filesOn = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);
const used = async (tenantId: string) =>
  (await stack.db.uploadFile.aggregate({ where: { tenant_id: tenantId }, _sum: { size: true } }))._sum.size ?? 0;

/** What is stored for the tenant is exactly its rows: no file without a row, no partial file in tmp/. */
async function expectDiskMatchesRows(tenantId: string) {
  const rows = await stack.db.uploadFile.findMany({ where: { tenant_id: tenantId } });
  expect(filesOn(tenantDir(tenantId)).sort()).toEqual(rows.map((r) => path.basename(r.storage_key)).sort());
  expect(filesOn(path.join(stack.config.dataDir, 'uploads', 'tmp'))).toEqual([]);
}

describe('TENANT_MAX_UPLOAD_BYTES', () => {
  it('uploads up to the quota succeed; the next is 413 storage_quota_exceeded and leaves nothing behind', async () => {
    const tenantId = stack.demo!.tenantId;
    for (let i = 0; i < 2; i++) expect((await upload(stack.apiUrl, key, text(1_000), `a${i}.txt`, 'alice')).status).toBe(201);
    expect(await used(tenantId)).toBe(2_000);

    // Over by the bytes streamed (the declared size is within the multipart allowance).
    const rowsBefore = await stack.db.uploadFile.count();
    const over = await upload(stack.apiUrl, key, text(1_001), 'over.txt', 'alice');
    expect(over.status).toBe(413);
    expect(over.body).toMatchObject({ code: 'storage_quota_exceeded', status: 413 });
    expect(String((over.body as { message: string }).message)).toContain('TENANT_MAX_UPLOAD_BYTES');
    // Over by the declared size: refused before the body is read.
    const declared = await upload(stack.apiUrl, key, text(200_000), 'big.txt', 'alice');
    expect(declared.status).toBe(413);
    expect(declared.body).toMatchObject({ code: 'storage_quota_exceeded' });
    expect(String((declared.body as { message: string }).message)).toContain('TENANT_MAX_UPLOAD_BYTES');
    expect(await stack.db.uploadFile.count()).toBe(rowsBefore);
    await expectDiskMatchesRows(tenantId);

    // Exactly up to the quota is fine.
    expect((await upload(stack.apiUrl, key, text(1_000), 'fill.txt', 'alice')).status).toBe(201);
    expect(await used(tenantId)).toBe(QUOTA);
    const full = await upload(stack.apiUrl, key, text(1), 'one.txt', 'alice');
    expect(full.status).toBe(413);
    expect(full.body).toMatchObject({ code: 'storage_quota_exceeded' });
    await expectDiskMatchesRows(tenantId);
  });

  it('two concurrent uploads that together exceed it: exactly one wins', async () => {
    const { id: tenantId } = await ensureTenant(stack.db, 'Upload quota race');
    const { apiKey } = await createAgentApp(stack.db, tenantId, { name: 'Race app' });
    expect((await upload(stack.apiUrl, apiKey, text(1_800), 'base.txt', 'bob')).status).toBe(201);
    for (let round = 0; round < 3; round++) {
      // 1 200 left: each 700 fits alone, both do not.
      const [a, b] = await Promise.all([
        upload(stack.apiUrl, apiKey, text(700), `r${round}a.txt`, 'bob'),
        upload(stack.apiUrl, apiKey, text(700), `r${round}b.txt`, 'bob'),
      ]);
      expect([a.status, b.status].sort()).toEqual([201, 413]);
      expect((a.status === 413 ? a : b).body).toMatchObject({ code: 'storage_quota_exceeded' });
      expect(await used(tenantId)).toBe(2_500);
      await expectDiskMatchesRows(tenantId);
      // Back to 1 200 left for the next round.
      const won = ((a.status === 201 ? a : b).body as { id: string }).id;
      const row = await stack.db.uploadFile.delete({ where: { id: won } });
      fs.rmSync(path.join(stack.config.dataDir, 'uploads', row.storage_key));
    }
  });

  it('remote_url files of a chat request count too: over the quota, 413 and no copy is stored', async () => {
    const demo = stack.demo!;
    expect(await used(demo.tenantId)).toBe(QUOTA); // full since the first test
    const app: AppContext = { tenantId: demo.tenantId, appId: demo.appId, agentId: demo.agentId, appName: 'demo' };
    const endUser = await stack.db.endUser.upsert({
      where: { app_id_session_id: { app_id: demo.appId, session_id: 'remote-user' } },
      update: {},
      create: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'remote-user' },
    });
    const port = (server.address() as AddressInfo).port;
    const remoteFetch = { lookup: async () => ['127.0.0.1'], isAllowed: (a: string) => a === '127.0.0.1' };
    const prepare = () =>
      prepareMessageFiles({ db: stack.db, config: stack.config, remoteFetch }, app, { kind: 'end-user', endUserId: endUser.id }, [
        { type: 'image', transfer_method: 'remote_url', url: `http://cdn.example.test:${port}/cat.png` },
      ]);
    const rowsBefore = await stack.db.uploadFile.count();
    const err = await prepare().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HttpError);
    expect(err).toMatchObject({ status: 413, code: 'storage_quota_exceeded' });
    expect((err as Error).message).toContain('TENANT_MAX_UPLOAD_BYTES');
    expect(await stack.db.uploadFile.count()).toBe(rowsBefore);
    await expectDiskMatchesRows(demo.tenantId);

    // With room again, the same file is stored as an upload and counted.
    const one = await stack.db.uploadFile.findFirstOrThrow({ where: { tenant_id: demo.tenantId, name: 'fill.txt' } });
    await stack.db.uploadFile.delete({ where: { id: one.id } });
    fs.rmSync(path.join(stack.config.dataDir, 'uploads', one.storage_key));
    const [file] = await prepare();
    expect(file!.upload_file_id).toBeTruthy();
    expect(await used(demo.tenantId)).toBe(2_000 + tinyPng().length);
    await expectDiskMatchesRows(demo.tenantId);
  });

  it('another tenant is unaffected by a full one', async () => {
    const { id: tenantId } = await ensureTenant(stack.db, 'Upload quota other');
    const { apiKey } = await createAgentApp(stack.db, tenantId, { name: 'Other app' });
    expect((await upload(stack.apiUrl, apiKey, text(QUOTA), 'all.txt', 'carol')).status).toBe(201);
    expect(await used(tenantId)).toBe(QUOTA);
    await expectDiskMatchesRows(tenantId);
  });
});
