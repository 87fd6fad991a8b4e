/**
 * The builtin shelf (issue 41) through the core_tools layer as a run uses it: arguments checked by the shelf's zod
 * schemas, each tool's answer and refusals as the model reads them. http_request talks to a real HTTP server on
 * 127.0.0.1; the names api.example.test / other.example.test exist only in this test's lookup, and the guard admits
 * exactly 127.0.0.1 as "public", so every other address — and the default guard, every private one — is refused.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCoreTools, type BuiltinToolDeps } from '../../agent-backend/modules/tools.js';
import { noPluginTools, type LayerInstance, type ToolOutcome } from '../../agent-backend/modules/types.js';
import { currentTime } from '../../agent-backend/modules/builtins/current-time.js';
import { createLogger } from '../../core/platform/logger.js';
import { createGuardedFetch, type Lookup } from '../../core/platform/net/ssrf.js';
import { BUILTIN_TOOL_NAMES } from '../../core/protocol/tool-names.js';
import { builtinToolList } from '../../core/protocol/builtin-tools.js';

let server: http.Server;
let base: string;
const seen: { url: string; method: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push({ url: req.url!, method: req.method!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    const url = new URL(req.url!, 'http://x');
    if (url.pathname === '/people')
      return void res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'session=s3cr3t', 'x-trace': 'abc' }).end(
        JSON.stringify({
          people: [
            { name: 'Ada', age: 36 },
            { name: 'Linus', age: 28 },
          ],
        }),
      );
    if (url.pathname === '/echo') return void res.writeHead(201, { 'content-type': 'text/plain' }).end(Buffer.concat(chunks));
    if (url.pathname === '/big') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('z'.repeat(5000));
    if (url.pathname === '/png') return void res.writeHead(200, { 'content-type': 'image/png', 'content-length': '4' }).end('\x89PNG');
    if (url.pathname === '/slow') return void setTimeout(() => res.end('late'), 5_000).unref();
    if (url.pathname === '/to-private') return void res.writeHead(302, { location: 'http://10.1.2.3/secret' }).end();
    if (url.pathname === '/to-other')
      return void res.writeHead(302, { location: `http://other.example.test:${url.searchParams.get('port')}/people` }).end();
    if (url.pathname === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
    res.writeHead(404, { 'content-type': 'text/plain' }).end('no such thing');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://api.example.test:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

const lookup: Lookup = async (host) =>
  ({ 'api.example.test': ['127.0.0.1'], 'other.example.test': ['127.0.0.1'], 'intranet.example.test': ['10.0.0.5'] })[host] ?? [];

/** The test network: only 127.0.0.1 counts as public. */
const testDeps = (over: Partial<BuiltinToolDeps> = {}): BuiltinToolDeps => ({
  fetch: createGuardedFetch({ lookup, isAllowed: (a) => a === '127.0.0.1' }),
  timeoutMs: 2_000,
  maxResponseBytes: 1_024,
  ...over,
});

function layer(deps: BuiltinToolDeps, tools: string[] = [...BUILTIN_TOOL_NAMES]): LayerInstance {
  return createCoreTools(deps).create({
    name: 'core_tools',
    config: { tools },
    state: { scratchpad: {} },
    services: {
      runId: 'r',
      logger: createLogger('t', 'silent'),
      toolResolver: noPluginTools,
      resources: { acquire: <T>(_k: string, v: T) => v, get: () => undefined },
    },
  });
}

async function call(tool: string, args: unknown, deps = testDeps()): Promise<Extract<ToolOutcome, { kind: 'result' }>> {
  const cap = layer(deps).capability;
  if (cap.kind !== 'toolset') throw new Error('not a toolset');
  const out = await cap.call(tool, args, { runId: 'r', toolCallId: 'c', signal: new AbortController().signal, executionContext: null });
  if (out.kind !== 'result') throw new Error('deferred');
  return out;
}
const ok = async (tool: string, args: unknown, deps?: BuiltinToolDeps) => {
  const out = await call(tool, args, deps);
  expect(out.isError, JSON.stringify(out.result)).toBeFalsy();
  return out.result as Record<string, unknown>;
};
const refused = async (tool: string, args: unknown, deps?: BuiltinToolDeps) => {
  const out = await call(tool, args, deps);
  expect(out.isError, JSON.stringify(out.result)).toBe(true);
  return out.result as string;
};

describe('the shelf', () => {
  it('offers each picked tool with its description and an object schema of its arguments', () => {
    const cap = layer(testDeps()).capability;
    if (cap.kind !== 'toolset') throw new Error('not a toolset');
    const offered = cap.tools();
    expect(offered.map((t) => t.name)).toEqual([...BUILTIN_TOOL_NAMES]);
    for (const t of offered) {
      expect(t.description.length, t.name).toBeGreaterThan(20);
      expect(t.parameters, t.name).toMatchObject({ type: 'object', additionalProperties: false });
    }
    expect(offered.find((t) => t.name === 'http_request')!.parameters).toMatchObject({ required: ['url'] });
    expect(builtinToolList().map((t) => t.name)).toEqual([...BUILTIN_TOOL_NAMES]);
    expect(builtinToolList().find((t) => t.name === 'http_request')).toMatchObject({ network: true, label: 'HTTP request' });
  });

  it('refuses a tool the layer does not offer', async () => {
    const cap = layer(testDeps(), ['calculator']).capability;
    if (cap.kind !== 'toolset') throw new Error('not a toolset');
    const out = await cap.call(
      'http_request',
      { url: base },
      { runId: 'r', toolCallId: 'c', signal: new AbortController().signal, executionContext: null },
    );
    expect(out).toEqual({ kind: 'result', result: 'tool not available: http_request', isError: true });
  });
});

describe('http_request', () => {
  it('GETs a URL: status, headers without cookies, the body; the model’s headers sent', async () => {
    seen.length = 0;
    const r = await ok('http_request', { url: `${base}/people?x=1`, headers: { Accept: 'application/json', 'X-Req': 'one' } });
    expect(r).toMatchObject({ status: 200, status_text: 'OK', url: `${base}/people?x=1` });
    expect(JSON.parse(r.body as string).people[0].name).toBe('Ada');
    expect(r.headers).toMatchObject({ 'content-type': 'application/json', 'x-trace': 'abc' });
    expect(r.headers).not.toHaveProperty('set-cookie');
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/people?x=1' });
    expect(seen[0]!.headers).toMatchObject({ accept: 'application/json', 'x-req': 'one', 'user-agent': 'dify-agent-http-request' });
  });

  it('POSTs a JSON body with its content type, or a text body as it is', async () => {
    seen.length = 0;
    const r = await ok('http_request', { url: `${base}/echo`, method: 'POST', json: { a: [1, 2] } });
    expect(r).toMatchObject({ status: 201, body: '{"a":[1,2]}' });
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    const t = await ok('http_request', {
      url: `${base}/echo`,
      method: 'PUT',
      body: 'plain words',
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(t.body).toBe('plain words');
  });

  it('refuses private, loopback and metadata addresses with the default guard; nothing reaches the server', async () => {
    seen.length = 0;
    const strict = testDeps({ fetch: createGuardedFetch({ lookup }) });
    const port = new URL(base).port;
    for (const url of [
      `http://127.0.0.1:${port}/people`,
      `http://localhost:${port}/people`,
      `${base}/people`, // a name that resolves to loopback
      'http://intranet.example.test/', // a name that resolves to 10/8
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/',
      'http://2130706433/',
      'http://[::ffff:127.0.0.1]/',
      'http://192.168.1.1/',
    ]) {
      const message = await refused('http_request', { url }, strict);
      expect(message, url).toMatch(/^the request was refused: the host .* (resolves to a private|could not be resolved)/);
    }
    expect(seen).toHaveLength(0);
  });

  it('HTTP_REQUEST_ALLOW_PRIVATE_NETWORK (allowPrivate) lets it reach loopback', async () => {
    const port = new URL(base).port;
    const r = await ok(
      'http_request',
      { url: `http://127.0.0.1:${port}/people` },
      testDeps({ fetch: createGuardedFetch({ allowPrivate: true }) }),
    );
    expect(r.status).toBe(200);
  });

  it('checks every redirect hop: a redirect to a private address is refused, credentials stay with their origin', async () => {
    expect(await refused('http_request', { url: `${base}/to-private` })).toContain('the request was refused');
    seen.length = 0;
    const port = new URL(base).port;
    const r = await ok('http_request', {
      url: `${base}/to-other?port=${port}`,
      headers: { Authorization: 'Bearer model-typed-token', Cookie: 'c=1', 'X-Keep': 'yes' },
    });
    expect(r).toMatchObject({ status: 200, redirects: 1, url: `http://other.example.test:${port}/people` });
    expect(seen[0]!.headers.authorization).toBe('Bearer model-typed-token');
    expect(seen[1]!.headers.authorization).toBeUndefined();
    expect(seen[1]!.headers.cookie).toBeUndefined();
    expect(seen[1]!.headers['x-keep']).toBe('yes');
    expect(await refused('http_request', { url: `${base}/loop` })).toBe('the request was redirected more than 5 times');
  });

  it('keeps at most TOOL_MAX_RESPONSE_BYTES of the body and says so; binary bodies are described, not shown', async () => {
    const r = await ok('http_request', { url: `${base}/big` });
    expect(r).toMatchObject({ truncated: true, body_note: 'the body was longer than 1024 bytes; only the first 1024 are shown' });
    expect(r.body).toBe('z'.repeat(1024));
    const png = await ok('http_request', { url: `${base}/png` });
    expect(png).toMatchObject({ body: null, body_note: 'binary content (image/png, 4 bytes) is not shown' });
  });

  it('gives up at its deadline, and an error status is an error observation with the answer', async () => {
    expect(await refused('http_request', { url: `${base}/slow`, timeout_ms: 300 })).toBe(
      'the request took longer than 300 ms and was abandoned',
    );
    // The model may ask for less time, never more than the deployment's limit.
    expect(await refused('http_request', { url: `${base}/slow`, timeout_ms: 60_000 }, testDeps({ timeoutMs: 400 }))).toBe(
      'the request took longer than 400 ms and was abandoned',
    );
    const missing = await call('http_request', { url: `${base}/nope` });
    expect(missing.isError).toBe(true);
    expect(missing.result).toMatchObject({ status: 404, body: 'no such thing' });
  });

  it('refuses bad arguments before any request: what is wrong, field by field', async () => {
    seen.length = 0;
    const cases: [unknown, RegExp][] = [
      [{}, /^Invalid arguments: url: /],
      [{ url: base, method: 'GET', body: 'x' }, /body: a GET request has no body/],
      [{ url: base, method: 'POST', body: 'x', json: {} }, /send either body or json, not both/],
      [{ url: base, method: 'POST', body: 'x'.repeat(70_000) }, /body: Too big/],
      [{ url: base, headers: { Host: 'evil.example' } }, /headers.Host: the header Host is set by the connection/],
      [{ url: base, headers: { 'X-A': 'v\r\nInjected: 1' } }, /a header value may not contain CR, LF or NUL/],
      [{ url: base, headers: { 'bad name': 'v' } }, /a header name is 1–128/],
      [{ url: base, verb: 'GET' }, /unknown field 'verb'/],
      [{ url: base, method: 'TRACE' }, /method: /],
    ];
    for (const [args, message] of cases) expect(await refused('http_request', args), JSON.stringify(args).slice(0, 80)).toMatch(message);
    expect(await refused('http_request', { url: 'ftp://example.com/file' })).toBe('invalid arguments: url: only http and https URLs');
    expect(await refused('http_request', { url: 'http://user:pw@api.example.test/' })).toMatch(/user:password@ in a URL is refused/);
    expect(await refused('http_request', { url: 'not a url' })).toMatch(/is not an absolute URL/);
    expect(seen).toHaveLength(0);
  });
});

describe('json_query', () => {
  const data = {
    people: [
      { name: 'Ada', age: 36 },
      { name: 'Linus', age: 28 },
      { name: 'Grace', age: 45 },
    ],
  };

  it('selects with JMESPath (default) and with RFC 9535 JSONPath; JSON text is parsed', async () => {
    expect(await ok('json_query', { data, query: 'people[?age > `30`].name' })).toEqual({ syntax: 'jmespath', result: ['Ada', 'Grace'] });
    expect(await ok('json_query', { data: JSON.stringify(data), query: 'max_by(people, &age).name' })).toEqual({
      syntax: 'jmespath',
      result: 'Grace',
    });
    expect(await ok('json_query', { data, query: '$.people[?@.age < 30].name', syntax: 'jsonpath' })).toEqual({
      syntax: 'jsonpath',
      result: ['Linus'],
    });
    expect(await ok('json_query', { data, query: 'nothing.here' })).toEqual({ syntax: 'jmespath', result: null });
  });

  it('refuses a bad expression, data that is no JSON and bad arguments', async () => {
    expect(await refused('json_query', { data, query: 'people[' })).toMatch(/^the JMESPath query failed: /);
    expect(await refused('json_query', { data, query: '$.people[', syntax: 'jsonpath' })).toMatch(/^the JSONPath query failed: /);
    expect(await refused('json_query', { data: '{not json', query: 'a' })).toMatch(/data is a string that is not JSON text/);
    expect(await refused('json_query', { query: 'a' })).toMatch(/^Invalid arguments: data: /);
    expect(await refused('json_query', { data, query: 'a', syntax: 'xpath' })).toMatch(/^Invalid arguments: syntax: /);
    expect(await refused('json_query', { data: 'x'.repeat(1_000_001), query: 'a' })).toMatch(
      /data is a string that is not JSON|larger than/,
    );
  });

  it('refuses a result larger than a tool may return', async () => {
    const many = { items: Array.from({ length: 200 }, (_, i) => ({ id: i, text: 'some words here' })) };
    expect(await refused('json_query', { data: many, query: 'items' })).toMatch(/^the result is \d+ bytes of JSON, more than the 1024/);
  });

  it('stops a query that would hold the process (a backtracking match() in a JSONPath filter) at the deadline', async () => {
    const message = await refused(
      'json_query',
      { data: ['a'.repeat(40)], query: "$[?match(@, '(a+)+b')]", syntax: 'jsonpath' },
      testDeps({ timeoutMs: 500 }),
    );
    expect(message).toBe('the query took longer than 500 ms and was stopped');
    // And the layer goes on working.
    expect(await ok('json_query', { data, query: 'length(people)' })).toEqual({ syntax: 'jmespath', result: 3 });
  });
});

describe('text', () => {
  it('counts characters (code points), words, lines and bytes', async () => {
    expect(await ok('text', { operation: 'count', text: 'héllo wörld\n🙂 ok' })).toEqual({
      characters: 16,
      utf16_units: 17,
      words: 4,
      lines: 2,
      bytes: 21,
    });
  });

  it('replaces exact text or an RE2 pattern with groups; finds matches with their groups', async () => {
    expect(await ok('text', { operation: 'replace', text: 'a.b.c', find: '.', replacement: '-' })).toEqual({
      text: 'a-b-c',
      replacements: 2,
    });
    expect(
      await ok('text', { operation: 'replace', text: 'ada@x.org, bob@y.net', pattern: '(\\w+)@([\\w.]+)', replacement: '$2:$1' }),
    ).toEqual({
      text: 'x.org:ada, y.net:bob',
      replacements: 2,
    });
    expect(await ok('text', { operation: 'regex_find', text: 'Order 12 and order 345', pattern: 'order (\\d+)', flags: 'i' })).toEqual({
      count: 2,
      matches: [
        { match: 'Order 12', index: 0, groups: ['12'] },
        { match: 'order 345', index: 13, groups: ['345'] },
      ],
    });
  });

  it('runs a pattern that backtracking engines take forever on in linear time', async () => {
    // (a+)+$ against 5,000 a's and a b: exponential for a backtracking engine (the JS RegExp never returns).
    expect(await ok('text', { operation: 'regex_find', text: `${'a'.repeat(5_000)}b`, pattern: '(a+)+$' })).toEqual({
      count: 0,
      matches: [],
    });
  });

  it('splits, changes case, trims, truncates by characters, encodes, decodes and hashes', async () => {
    expect(await ok('text', { operation: 'split', text: 'a,b,,c', separator: ',' })).toEqual({ count: 4, parts: ['a', 'b', '', 'c'] });
    expect(await ok('text', { operation: 'title', text: 'hello wide-world' })).toEqual({ text: 'Hello Wide-World' });
    expect(await ok('text', { operation: 'upper', text: 'straße' })).toEqual({ text: 'STRASSE' });
    expect(await ok('text', { operation: 'trim', text: '  x \n' })).toEqual({ text: 'x' });
    expect(await ok('text', { operation: 'truncate', text: '🙂🙂🙂', max_chars: 2 })).toEqual({ text: '🙂🙂', truncated: true });
    expect(await ok('text', { operation: 'base64_encode', text: 'héllo' })).toEqual({ text: 'aMOpbGxv' });
    expect(await ok('text', { operation: 'base64_decode', text: 'aMOpbGxv' })).toEqual({ text: 'héllo' });
    expect(await ok('text', { operation: 'url_encode', text: 'a b&c/é' })).toEqual({ text: 'a%20b%26c%2F%C3%A9' });
    expect(await ok('text', { operation: 'url_decode', text: 'a%20b+c' })).toEqual({ text: 'a b c' });
    expect(await ok('text', { operation: 'hash', text: 'abc' })).toEqual({
      algorithm: 'sha256',
      hex: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    });
    expect(await ok('text', { operation: 'hash', text: 'abc', algorithm: 'md5' })).toEqual({
      algorithm: 'md5',
      hex: '900150983cd24fb0d6963f7d28e17f72',
    });
  });

  it('refuses bad arguments, patterns outside RE2, undecodable input and oversized results', async () => {
    expect(await refused('text', { operation: 'replace', text: 'x', find: 'x' })).toMatch(/replacement: replace needs replacement/);
    expect(await refused('text', { operation: 'replace', text: 'x', find: 'x', pattern: 'x', replacement: '' })).toMatch(
      /either find .* or pattern/,
    );
    expect(await refused('text', { operation: 'regex_find', text: 'x' })).toMatch(/pattern: regex_find needs pattern/);
    expect(await refused('text', { operation: 'reverse', text: 'x' })).toMatch(/^Invalid arguments: operation: /);
    expect(await refused('text', { operation: 'count' })).toMatch(/^Invalid arguments: text: /);
    expect(await refused('text', { operation: 'regex_find', text: 'aa', pattern: '(a)\\1' })).toMatch(
      /invalid pattern: .*no backreferences/,
    );
    expect(await refused('text', { operation: 'regex_find', text: 'aa', pattern: 'a', flags: 'g' })).toMatch(/flags are i/);
    expect(await refused('text', { operation: 'base64_decode', text: 'not base64!' })).toBe('base64_decode: the text is not base64');
    expect(await refused('text', { operation: 'base64_decode', text: '/w==' })).toBe(
      'base64_decode: the decoded 1 bytes are not UTF-8 text',
    );
    expect(await refused('text', { operation: 'url_decode', text: '%E0%A4%A' })).toBe('url_decode: the text is not valid percent-encoding');
    expect(await refused('text', { operation: 'replace', text: 'x'.repeat(100), find: 'x', replacement: 'yyyyyyyyyyyy' })).toMatch(
      /^the result is \d+ bytes, more than the 1024/,
    );
  });
});

describe('current_time', () => {
  it('tells the time in a zone with its offset then (summer and winter), UTC by default', () => {
    expect(currentTime({ timezone: 'Europe/Berlin' }, new Date('2026-07-01T12:00:00Z')).result).toMatchObject({
      iso: '2026-07-01T12:00:00.000Z',
      local: '2026-07-01T14:00:00+02:00',
      utc_offset: '+02:00',
      weekday: 'Wednesday',
    });
    expect(currentTime({ timezone: 'Europe/Berlin' }, new Date('2026-01-01T12:00:00Z')).result).toMatchObject({ utc_offset: '+01:00' });
    expect(currentTime({ timezone: 'Asia/Kolkata' }, new Date('2026-01-01T00:00:00Z')).result).toMatchObject({
      local: '2026-01-01T05:30:00+05:30',
    });
    expect(currentTime({}, new Date('2026-01-01T00:00:00Z')).result).toMatchObject({ timezone: 'UTC', utc_offset: '+00:00' });
  });

  it('refuses an unknown zone and bad arguments through the layer', async () => {
    expect(await refused('current_time', { timezone: 'Mars/Olympus' })).toBe(
      'unknown time zone: Mars/Olympus (use an IANA name such as Europe/Berlin)',
    );
    expect(await refused('current_time', { tz: 'UTC' })).toMatch(/unknown field 'tz'/);
    expect((await ok('current_time', { timezone: 'America/New_York' })).timezone).toBe('America/New_York');
  });
});
