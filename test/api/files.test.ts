/**
 * Files: upload limits and types, previews scoped to the uploading user, signed URLs, and files in chat
 * requests (local_file ownership, remote_url refused for private and loopback addresses).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { api, statusOf, tinyPng, upload, uploadForm } from './helpers.js';

let stack: Stack;
let key: string;
let otherAppKey: string;

beforeAll(async () => {
  stack = await startTestStack('api_files');
  key = stack.demo!.apiKey;
  otherAppKey = (await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Other app' })).apiKey;
});
afterAll(async () => stack?.stop());

const MB = 1024 * 1024;
const padded = (head: Uint8Array, size: number) => {
  const buf = new Uint8Array(size);
  buf.set(head);
  return buf;
};

describe('POST /v1/files/upload', () => {
  let pngId: string;

  it('stores an image and answers in Dify’s shape with 201', async () => {
    const png = tinyPng();
    const res = await upload(stack.apiUrl, key, png, 'pixel.png', 'alice', 'image/png');
    expect(res.status).toBe(201);
    const body = res.body as Record<string, unknown>;
    expect(body).toMatchObject({ name: 'pixel.png', size: png.length, extension: 'png', mime_type: 'image/png' });
    expect(body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.created_at).toBeTypeOf('number');
    const row = await stack.db.uploadFile.findUniqueOrThrow({ where: { id: body.id as string } });
    const endUser = await stack.db.endUser.findUniqueOrThrow({ where: { id: row.end_user_id! } });
    expect(body.created_by).toBe(endUser.id);
    expect(endUser.session_id).toBe('alice');
    expect(row.app_id).toBe(stack.demo!.appId);
    const stored = path.join(stack.config.dataDir, 'uploads', row.storage_key);
    expect(new Uint8Array(fs.readFileSync(stored))).toEqual(png);
    pngId = row.id;
  });

  it('serves the upload back to its own user only', async () => {
    const res = await fetch(`${stack.apiUrl}/v1/files/${pngId}/preview?user=alice`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(tinyPng());
    expect((await api(stack.apiUrl, key, 'GET', `/v1/files/${pngId}/preview?user=bob`)).status).toBe(404);
    expect((await api(stack.apiUrl, otherAppKey, 'GET', `/v1/files/${pngId}/preview?user=alice`)).status).toBe(404);
  });

  it('accepts a document up to 15 MB but refuses an image over 10 MB with 413 file_too_large', async () => {
    const bigText = new Uint8Array(11 * MB).fill(0x61);
    const doc = await upload(stack.apiUrl, key, bigText, 'notes.txt', 'alice');
    expect(doc.status).toBe(201);
    expect(doc.body).toMatchObject({ size: 11 * MB, mime_type: 'text/plain' });

    const pngHead = tinyPng().subarray(0, 8);
    const img = await upload(stack.apiUrl, key, padded(pngHead, 11 * MB), 'big.png', 'alice');
    expect(img.status).toBe(413);
    expect(img.body).toMatchObject({ code: 'file_too_large', status: 413 });
  });

  it('refuses a document over 15 MB with 413 and leaves no file or row behind', async () => {
    const before = await stack.db.uploadFile.count();
    const res = await upload(stack.apiUrl, key, new Uint8Array(16 * MB).fill(0x61), 'huge.txt', 'alice');
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 'file_too_large', status: 413 });
    expect(await stack.db.uploadFile.count()).toBe(before);
    const tmp = path.join(stack.config.dataDir, 'uploads', 'tmp');
    expect(fs.existsSync(tmp) ? fs.readdirSync(tmp) : []).toEqual([]);
  });

  it('refuses types it does not accept with 415 unsupported_file_type, by extension and by content', async () => {
    const exe = await upload(stack.apiUrl, key, new Uint8Array([0x4d, 0x5a, 0, 0]), 'tool.exe', 'alice');
    expect(exe.status).toBe(415);
    expect(exe.body).toMatchObject({ code: 'unsupported_file_type', status: 415 });
    const html = await upload(stack.apiUrl, key, new TextEncoder().encode('<html></html>'), 'page.html', 'alice', 'text/html');
    expect(html.status).toBe(415);
    const fakePng = await upload(stack.apiUrl, key, new TextEncoder().encode('not really a png'), 'fake.png', 'alice', 'image/png');
    expect(fakePng.status).toBe(415);
    expect(fakePng.body).toMatchObject({ code: 'unsupported_file_type' });
  });

  it('answers 400 for a missing file, a missing user or a non-multipart body', async () => {
    const noFile = new FormData();
    noFile.append('user', 'alice');
    expect(await api(stack.apiUrl, key, 'POST', '/v1/files/upload', { body: noFile })).toMatchObject({
      status: 400,
      body: { code: 'no_file_uploaded' },
    });
    const noUser = await api(stack.apiUrl, key, 'POST', '/v1/files/upload', { body: uploadForm(tinyPng(), 'a.png', null) });
    expect(noUser.status).toBe(400);
    expect((noUser.body as { message: string }).message).toContain('user');
    expect(await api(stack.apiUrl, key, 'POST', '/v1/files/upload', { body: { file: 'x', user: 'alice' } })).toMatchObject({
      status: 400,
      body: { code: 'no_file_uploaded' },
    });
    expect((await api(stack.apiUrl, null, 'POST', '/v1/files/upload', { body: uploadForm(tinyPng(), 'a.png', 'alice') })).status).toBe(401);
  });
});

describe('files in chat requests', () => {
  it('refuses remote_url files pointing at loopback, private, link-local (metadata) or non-http targets with 400, creating nothing', async () => {
    const before = await stack.db.message.count();
    const urls = [
      'http://127.0.0.1/a.png',
      'http://10.1.2.3/a.png',
      'http://192.168.0.10/a.png',
      'http://[::1]/a.png',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/',
      'http://[fd00:ec2::254]/',
      'http://2130706433/a.png',
      'http://localhost:5001/a.png',
      'file:///etc/passwd',
      'ftp://example.com/a.png',
    ];
    for (const url of urls) {
      const res = await chat(stack.apiUrl, key, {
        query: 'look',
        user: 'alice',
        files: [{ type: 'image', transfer_method: 'remote_url', url }],
      });
      expect(res.status, url).toBe(400);
      expect(res.frames[0]!.data.code, url).toMatch(/^(invalid_remote_url|invalid_param)$/);
      expect(String(res.frames[0]!.data.message), url).toContain('files.0.url');
    }
    expect(await stack.db.message.count()).toBe(before);
  });

  it('refuses an upload of another user or another app with 404 file_not_found', async () => {
    const mine = await upload(stack.apiUrl, key, tinyPng(), 'mine.png', 'alice');
    const id = (mine.body as { id: string }).id;
    const asBob = await chat(stack.apiUrl, key, {
      query: 'look',
      user: 'bob',
      files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: id }],
    });
    expect(asBob.status).toBe(404);
    expect(asBob.frames[0]!.data).toMatchObject({ code: 'file_not_found', status: 404 });
    const otherApp = await chat(stack.apiUrl, otherAppKey, {
      query: 'look',
      user: 'alice',
      files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: id }],
    });
    expect(otherApp.status).toBe(404);
    const missingId = await chat(stack.apiUrl, key, {
      query: 'look',
      user: 'alice',
      files: [{ type: 'image', transfer_method: 'local_file' }],
    });
    expect(missingId.status).toBe(400);
    expect(String(missingId.frames[0]!.data.message)).toContain('files.0.upload_file_id');
  });

  // A remote_url is downloaded and stored as our own copy before the turn starts (issue 17 M3): that path is
  // test/security/m3-remote-files.test.ts (this sandbox reaches no public host).
  it('attaches an own upload to the message; history lists it with a fetchable url', async () => {
    const up = await upload(stack.apiUrl, key, tinyPng(), 'photo.png', 'carol');
    const uploadId = (up.body as { id: string }).id;
    const { status, frames } = await chat(stack.apiUrl, key, {
      query: 'What is in these files?',
      user: 'carol',
      files: [{ type: 'document', transfer_method: 'local_file', upload_file_id: uploadId }],
    });
    expect(status).toBe(200);
    const end = frames.at(-1)!.data as { message_id: string; conversation_id: string };
    const rows = await stack.db.messageFile.findMany({ where: { message_id: end.message_id }, orderBy: { transfer_method: 'asc' } });
    expect(rows.map((r) => [r.transfer_method, r.type, r.upload_file_id])).toEqual([
      ['local_file', 'image', uploadId], // the upload's own kind wins over the client's guess
    ]);

    const history = await api(stack.apiUrl, key, 'GET', `/v1/messages?conversation_id=${end.conversation_id}&user=carol`);
    const files = (history.body as { data: { message_files: { type: string; url: string }[] }[] }).data[0]!.message_files;
    expect(files).toHaveLength(1);
    // The local file's url is a signed, key-less preview the agent backend can download.
    const signed = files.find((f) => f.type === 'image')!.url;
    const res = await fetch(signed);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(tinyPng());
    expect(await statusOf(signed.replace(/sign=[^&]+/, 'sign=forged'), {})).toBe(403);
  });
});
