/**
 * Issue 28 items 1 and 5, measured from outside on the real stack (this test process hosts the api, the worker and the
 * agent backend, as `npm start` does): a truncated multipart body is a 400 with a code and the process serves the next
 * request (before, busboy's `Unexpected end of form` on the file stream had no listener: the process — here vitest's
 * worker — died); lone UTF-16 surrogates are 400 naming the field on every JSON route (before: a 500 from PostgreSQL);
 * an OpenAPI document given as a string goes through the depth guard (before: a stack overflow, 500); a malformed
 * Last-Event-ID is 400 `invalid_param` naming it (before: silently replayed or emptied the stream).
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { api, tinyPng, upload } from '../api/helpers.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
let consoleKey: string;
let appId: string;

beforeAll(async () => {
  stack = await startTestStack('sec_i28_inputs');
  key = stack.demo!.apiKey;
  consoleKey = stack.demo!.consoleKey;
  appId = stack.demo!.appId;
});
afterAll(async () => stack?.stop());

/** Sends a multipart body that stops inside the file part (no closing boundary), with a correct Content-Length. */
function truncatedMultipart(path: string, bearer: string, filename: string, bytes: Buffer): Promise<{ status: number; body: unknown }> {
  const boundary = '----i28boundary';
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="user"\r\n\r\nalice\r\n`),
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    ),
    bytes, // ... and no `\r\n--boundary--`: the body ends inside the file part
  ]);
  const url = new URL(path, stack.apiUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${bearer}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(body.length),
        },
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

function expect400(r: { status: number; body: unknown }, field: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect((r.body as { message: string }).message.startsWith(`${field}:`), JSON.stringify(r.body)).toBe(true);
}

describe('issue 28 item 1: a truncated multipart body is a 400, and the process keeps serving', () => {
  it('POST /v1/files/upload: 400 invalid_multipart, then an upload works', async () => {
    for (const [name, bytes] of [
      ['cut.png', Buffer.from(tinyPng())],
      ['cut.txt', Buffer.alloc(256 * 1024, 0x61)], // several chunks in, then the end
    ] as const) {
      const r = await truncatedMultipart('/v1/files/upload', key, name, bytes);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body).toMatchObject({ code: 'invalid_multipart', status: 400 });
    }
    const ok = await upload(stack.apiUrl, key, tinyPng(), 'after.png', 'alice', 'image/png');
    expect(ok.status).toBe(201);
  });

  it('POST /console/api/datasets/{id}/documents: 400 invalid_multipart, nothing stored, then an upload works', async () => {
    const ds = await api(stack.apiUrl, consoleKey, 'POST', '/console/api/datasets', { body: { name: 'i28 truncated' } });
    expect(ds.status).toBe(201);
    const id = (ds.body as { id: string }).id;
    const r = await truncatedMultipart(`/console/api/datasets/${id}/documents`, consoleKey, 'cut.md', Buffer.alloc(200_000, 0x62));
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_multipart', status: 400 });
    expect(await stack.db.datasetDocument.count({ where: { dataset_id: id } })).toBe(0);
    const form = new FormData();
    form.append('file', new Blob(['# fine\n\nA whole document.'], { type: 'text/markdown' }), 'fine.md');
    const ok = await api(stack.apiUrl, consoleKey, 'POST', `/console/api/datasets/${id}/documents`, { body: form, timeoutMs: 30_000 });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect((await api(stack.apiUrl, null, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('issue 28 item 5: lone surrogates are 400 naming the field', () => {
  const LONE = '"\\ud800"'; // valid JSON, not valid Unicode text: PostgreSQL jsonb refuses it
  const raw = (path: string, bearer: string, text: string, method = 'POST') =>
    api(stack.apiUrl, bearer, method, path, { body: text, headers: { 'content-type': 'application/json' } });

  it('chat inputs (value and key), and a lone low surrogate', async () => {
    expect400(
      await raw('/v1/chat-messages', key, `{"query":"hi","user":"u1","response_mode":"blocking","inputs":{"name":${LONE}}}`),
      'inputs.name',
    );
    expect400(
      await raw('/v1/chat-messages', key, `{"query":"hi","user":"u1","response_mode":"blocking","inputs":{"\\udc00k":"v"}}`),
      'inputs.\\udc00k',
    );
    const r = await raw('/v1/chat-messages', key, `{"query":"a\\udfffb","user":"u1","response_mode":"blocking"}`);
    expect400(r, 'query');
    expect(r.body).toMatchObject({ code: 'invalid_param' });
  });

  it('still accepts a surrogate pair (an emoji written as escapes)', async () => {
    const r = await raw('/v1/chat-messages', key, `{"query":"hi \\ud83d\\ude00","user":"u-pair","response_mode":"blocking","inputs":{}}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  });

  it('form submit', async () => {
    expect400(
      await raw('/v1/form/human_input/abcdefghijkl', key, `{"inputs":{"answer":${LONE}},"action":"ok","user":"u1"}`),
      'inputs.answer',
    );
  });

  it('draft save', async () => {
    const draft = await api(stack.apiUrl, consoleKey, 'GET', `/console/api/apps/${appId}/agent/draft`);
    const config = (draft.body as { config: { prompt: { system_prompt: string } } }).config;
    config.prompt.system_prompt = 'SURROGATE';
    const text = JSON.stringify({ config }).replace('"SURROGATE"', LONE);
    expect400(await raw(`/console/api/apps/${appId}/agent/draft`, consoleKey, text, 'PUT'), 'config.prompt.system_prompt');
  });

  it('tool-provider create', async () => {
    expect400(
      await raw(
        '/console/api/tool-providers',
        consoleKey,
        `{"kind":"mcp","name":"p1","server_url":"http://example.com","description":${LONE}}`,
      ),
      'description',
    );
  });
});

describe('issue 28 item 5: an OpenAPI document given as a string is depth-checked', () => {
  const create = (openapi: string) =>
    api(stack.apiUrl, consoleKey, 'POST', '/console/api/tool-providers', {
      body: { kind: 'api', name: 'deep', openapi, server_url: 'http://example.com' },
    });

  it('JSON text nested 20,000 deep in a schema: 400 invalid_openapi, not a 500', async () => {
    const schema = `${'{"type":"object","properties":{"a":'.repeat(20_000)}{}${'}}'.repeat(20_000)}`;
    const doc = `{"openapi":"3.0.0","paths":{"/a":{"post":{"requestBody":{"content":{"application/json":{"schema":${schema}}}}}}}}`;
    const r = await create(doc);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_openapi' });
    expect((r.body as { message: string }).message).toMatch(/^openapi: .*nested deeper than/);
  });

  it('YAML nested 100,000 deep: 400 invalid_openapi', async () => {
    const r = await create(`openapi: 3.0.0\npaths: {}\nx: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_openapi' });
    expect((r.body as { message: string }).message).toContain('nested deeper than');
  });

  it('a chain of 5,000 $refs: 400 invalid_openapi', async () => {
    const schemas: Record<string, unknown> = {};
    for (let i = 0; i < 5_000; i++)
      schemas[`S${i}`] = i < 4_999 ? { type: 'object', properties: { a: { $ref: `#/components/schemas/S${i + 1}` } } } : { type: 'string' };
    const doc = {
      openapi: '3.0.0',
      components: { schemas },
      paths: { '/a': { post: { requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/S0' } } } } } } },
    };
    const r = await create(JSON.stringify(doc));
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_openapi' });
  });
});

describe('issue 28 item 5: Last-Event-ID', () => {
  let messageId: string;

  beforeAll(async () => {
    const r = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
      body: { query: 'hello', user: 'lei', response_mode: 'blocking', inputs: {} },
      timeoutMs: 30_000,
    });
    expect(r.status).toBe(200);
    messageId = (r.body as { message_id: string }).message_id;
  });

  it('is 400 invalid_param naming the header or the query parameter when it is not an event id', async () => {
    for (const bad of ['abc', '-1', '1e5', '12345678901234567890123', '2147483648', '1.5', '0x10', ' 7 8']) {
      const h = await api(stack.apiUrl, key, 'GET', `/v1/chat-messages/${messageId}/events?user=lei`, {
        headers: { 'last-event-id': bad },
      });
      expect(h.status, bad).toBe(400);
      expect(h.body, bad).toMatchObject({ code: 'invalid_param' });
      expect((h.body as { message: string }).message, bad).toMatch(/^Last-Event-ID:/);
      const q = await api(
        stack.apiUrl,
        key,
        'GET',
        `/v1/chat-messages/${messageId}/events?user=lei&last_event_id=${encodeURIComponent(bad)}`,
      );
      expect(q.status, bad).toBe(400);
      expect((q.body as { message: string }).message, bad).toMatch(/^last_event_id:/);
    }
    const debuggerRoute = `/console/api/apps/${appId}/agent/debug/chat-messages/${messageId}/events`;
    const d = await api(stack.apiUrl, consoleKey, 'GET', debuggerRoute, { headers: { 'last-event-id': 'abc' } });
    expect(d.status).toBe(400);
    expect((d.body as { message: string }).message).toMatch(/^Last-Event-ID:/);
  });

  it('resumes after a valid one (and from the start without one)', async () => {
    const all = await api(stack.apiUrl, key, 'GET', `/v1/chat-messages/${messageId}/events?user=lei`);
    expect(all.status).toBe(200);
    const ids = [...String(all.body).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids.length).toBeGreaterThan(1);
    const rest = await api(stack.apiUrl, key, 'GET', `/v1/chat-messages/${messageId}/events?user=lei`, {
      headers: { 'last-event-id': String(ids[0]) },
    });
    expect(rest.status).toBe(200);
    expect([...String(rest.body).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual(ids.slice(1));
  });
});
