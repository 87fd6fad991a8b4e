/**
 * Property: whatever a client throws at any route — random bodies, headers, ids, query strings, methods,
 * unknown paths, malformed or huge JSON, wrong content types, broken multipart — the api answers with a
 * status below 500 within a timeout, every error in the `{code, message, status}` shape, and stays healthy.
 */
import fc from 'fast-check';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
/** Placeholders in generated requests, replaced by the real conversation and message ids at send time. */
const REAL = ['@conversation', '@message'];
let ids: string[];

beforeAll(async () => {
  stack = await startTestStack('api_fuzz');
  key = stack.demo!.apiKey;
  const turn = await chat(stack.apiUrl, key, { query: 'hello', user: 'owner' });
  const end = turn.frames.at(-1)!.data as { conversation_id: string; message_id: string };
  ids = [end.conversation_id, end.message_id];
});
afterAll(async () => stack?.stop());

const ROUTES: [string, string][] = [
  ['POST', '/v1/chat-messages'],
  ['POST', '/v1/chat-messages/{id}/stop'],
  ['GET', '/v1/chat-messages/{id}/events'],
  ['GET', '/v1/messages'],
  ['POST', '/v1/messages/{id}/feedbacks'],
  ['GET', '/v1/conversations'],
  ['POST', '/v1/conversations/{id}/name'],
  ['DELETE', '/v1/conversations/{id}'],
  ['GET', '/v1/parameters'],
  ['GET', '/v1/info'],
  ['GET', '/v1/meta'],
  ['POST', '/v1/files/upload'],
  ['GET', '/v1/files/{id}/preview'],
  ['GET', '/files/{id}/file-preview'],
  ['GET', '/v1/form/human_input/{id}'],
  ['POST', '/v1/form/human_input/{id}'],
  ['GET', '/openapi.json'],
  ['GET', '/healthz'],
];

/** Printable ASCII: what fetch lets through in header values. */
const headerText = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 });
const anyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', 'null', '-1', '1e309', '../../etc/passwd', '%00'),
);

const idArb = () =>
  fc.oneof(
    fc.constantFrom(...REAL),
    fc.uuid(),
    anyText.map(encodeURIComponent),
    fc.constantFrom('%E0%A4%A', '%', '..', 'x'.repeat(5000), '00000000-0000-0000-0000-000000000000'),
  );

const userArb = fc.oneof(fc.constant('owner'), fc.constant('other'), anyText, fc.constant(undefined));

/** Bodies shaped like the real ones, with random values and extra fields. */
const shapedBody = fc.record(
  {
    query: fc.oneof(anyText, fc.constant('hi')),
    user: userArb,
    inputs: fc.oneof(fc.object(), fc.jsonValue()),
    response_mode: fc.constantFrom('streaming', 'blocking', 'nope', null),
    conversation_id: fc.oneof(fc.constantFrom(...REAL, '', null), fc.uuid(), anyText),
    files: fc.oneof(
      fc.constant(null),
      fc.array(
        fc.record({
          type: fc.constantFrom('image', 'document', 'audio', 'x'),
          transfer_method: fc.constantFrom('local_file', 'remote_url', 'x'),
          upload_file_id: fc.oneof(fc.uuid(), anyText),
          url: fc.oneof(fc.webUrl(), fc.constantFrom('http://127.0.0.1/', 'http://[::1]/', 'file:///etc/passwd'), anyText),
        }),
        { maxLength: 3 },
      ),
    ),
    rating: fc.constantFrom('like', 'dislike', null, 'love', 1),
    name: anyText,
    auto_generate: fc.oneof(fc.boolean(), anyText),
    action: anyText,
    content: anyText,
  },
  { requiredKeys: [] },
);

const bodyArb = fc.oneof(
  { weight: 4, arbitrary: shapedBody.map((b) => ({ text: JSON.stringify(b), type: 'application/json' })) },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => ({ text: JSON.stringify(v), type: 'application/json' })) },
  { weight: 2, arbitrary: anyText.map((t) => ({ text: t, type: 'application/json' })) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        headerText,
        anyText,
        anyText,
        fc.constantFrom('file', 'user', 'other'),
        fc.constantFrom('a.png', 'b.txt', 'c.exe', '', '../x.md'),
      )
      .map(([boundary, field, content, name, filename]) => ({
        type: `multipart/form-data; boundary=${boundary || 'b'}`,
        text: `--${boundary || 'b'}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\n\r\n${content}\r\n--${boundary || 'b'}\r\nContent-Disposition: form-data; name="user"\r\n\r\n${field}\r\n--${boundary || 'b'}--`,
      })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        anyText,
        fc.constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data',
          'application/json; charset=utf-16',
          'application/xml',
          '',
        ),
      )
      .map(([text, type]) => ({ text, type })),
  },
  {
    weight: 1,
    arbitrary: fc.constant({ text: '{"query": "x", "user": "owner", "pad": "' + 'x'.repeat(1_100_000) + '"}', type: 'application/json' }),
  },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

const queryArb = fc
  .array(
    fc.tuple(
      fc.constantFrom(
        'user',
        'limit',
        'last_id',
        'first_id',
        'conversation_id',
        'sort_by',
        'as_attachment',
        'sign',
        'last_event_id',
        'user[]',
        'x',
      ),
      fc.oneof(anyText, fc.constantFrom(...REAL), fc.uuid(), fc.integer().map(String)),
    ),
    { maxLength: 5 },
  )
  .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));

const requestArb = fc.record({
  route: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...ROUTES) },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'),
        fc.constantFrom(...ROUTES.map((r) => r[1])),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.constantFrom('GET', 'POST', 'DELETE'),
        anyText.map((t) => `/v1/${encodeURIComponent(t)}`),
      ),
    },
  ),
  id: idArb(),
  query: queryArb,
  body: bodyArb,
  auth: fc.oneof(
    { weight: 4, arbitrary: fc.constant('valid') },
    fc.constant('none'),
    { weight: 1, arbitrary: headerText.map((t) => `Bearer ${t}`) },
    { weight: 1, arbitrary: headerText },
  ),
  lastEventId: fc.option(fc.oneof(headerText, fc.integer().map(String), fc.constantFrom('99999999999999999999', '-1', '1e3')), {
    nil: undefined,
  }),
  contentEncoding: fc.option(fc.constantFrom('gzip', 'br', 'deflate', 'identity', 'bogus'), { nil: undefined }),
});

type FuzzRequest = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

async function send(r: FuzzRequest): Promise<{ status: number; contentType: string; body: string }> {
  const [method, template] = r.route;
  const real = (t: string) => t.replaceAll(REAL[0]!, ids[0]!).replaceAll(REAL[1]!, ids[1]!);
  const url = real(`${stack.apiUrl}${template.replace('{id}', r.id)}${r.query ? `?${r.query}` : ''}`);
  const headers: Record<string, string> = {};
  if (r.auth === 'valid') headers.authorization = `Bearer ${key}`;
  else if (r.auth !== 'none') headers.authorization = r.auth;
  if (r.lastEventId !== undefined) headers['last-event-id'] = r.lastEventId;
  const withBody = r.body && method !== 'GET' && method !== 'HEAD';
  if (withBody) {
    if (r.body!.type) headers['content-type'] = r.body!.type;
    if (r.contentEncoding) headers['content-encoding'] = r.contentEncoding;
  }
  const res = await fetch(url, { method, headers, body: withBody ? real(r.body!.text) : undefined, signal: AbortSignal.timeout(15_000) });
  const contentType = res.headers.get('content-type') ?? '';
  // Streams (a valid chat or re-attach) and files are not read to the end: only their status matters.
  if (contentType.startsWith('text/event-stream') || res.status < 300) {
    await res.body?.cancel();
    return { status: res.status, contentType, body: '' };
  }
  return { status: res.status, contentType, body: await res.text() };
}

describe('fuzzing every route', () => {
  it('never answers 5xx or hangs, and every error has the {code, message, status} shape', async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(requestArb, async (r) => {
        const res = await send(r);
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        expect(res.status, JSON.stringify({ route: r.route, id: r.id, query: r.query })).toBeLessThan(500);
        if (res.status >= 400 && r.route[0] !== 'HEAD') {
          expect(res.contentType).toContain('application/json');
          const body = JSON.parse(res.body) as { code: unknown; message: unknown; status: unknown };
          expect(body).toMatchObject({ status: res.status });
          expect(body.code).toBeTypeOf('string');
          expect(body.message).toBeTypeOf('string');
          expect(res.body).not.toMatch(/\bat .+\.(ts|js):\d+/); // no stack traces
        }
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 400), seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    // The run reached past auth and validation, not only 401s.
    expect([...seen.keys()].filter((s) => s !== 401).length).toBeGreaterThan(3);
  }, 55_000);

  it('answers a >1 MB JSON body with 413 and malformed JSON with 400, in the error shape', async () => {
    const big = await fetch(`${stack.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'x'.repeat(2_000_000), user: 'owner' }),
    });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ code: 'request_entity_too_large', status: 413 });
    const bad = await fetch(`${stack.apiUrl}/v1/conversations/${ids[0]}/name`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"name": "x", ',
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'invalid_json', status: 400 });
    const unknown = await fetch(`${stack.apiUrl}/nope`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found', status: 404 });
  });

  it('closes a re-attached stream promptly when Last-Event-ID is at or past the end of a finished turn, or out of range', async () => {
    const events = await stack.db.messageEvent.count({ where: { message_id: ids[1] } });
    for (const lastEventId of [String(events), String(events + 10), '2147483648', '99999999999999999999']) {
      const res = await fetch(`${stack.apiUrl}/v1/chat-messages/${ids[1]}/events?user=owner`, {
        headers: { authorization: `Bearer ${key}`, 'last-event-id': lastEventId },
        signal: AbortSignal.timeout(5000),
      });
      const body = await res.text().then(
        (t) => t,
        (e: Error) => `<${e.name}>`,
      );
      expect(res.status, lastEventId).toBeLessThan(500);
      expect(body, `Last-Event-ID ${lastEventId} left the stream open or broke it`).not.toMatch(/^<(TimeoutError|AbortError|TypeError)>$/);
    }
  }, 30_000);

  it('is still healthy afterwards: /healthz, /readyz, a full turn, and no upload temp files left', async () => {
    expect((await fetch(`${stack.apiUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${stack.apiUrl}/readyz`);
    expect(ready.status, JSON.stringify(await ready.clone().json())).toBe(200);
    const turn = await chat(stack.apiUrl, key, { query: 'still there?', user: 'after-fuzz' });
    expect(turn.frames.at(-1)?.event).toBe('message_end');
    const tmp = path.join(stack.config.dataDir, 'uploads', 'tmp');
    // busboy may still be draining the last cancelled upload for a moment
    for (let i = 0; i < 20 && fs.existsSync(tmp) && fs.readdirSync(tmp).length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(fs.existsSync(tmp) ? fs.readdirSync(tmp) : []).toEqual([]);
  });
});
