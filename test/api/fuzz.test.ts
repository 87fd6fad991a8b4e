/**
 * Issue 28 item 7: a property-based fuzzer over every route of the real stack (PostgreSQL, Temporal, the agent backend
 * over HTTP, the agent stub on its socket): public (/v1, from the api's own /openapi.json), console (/console/api, same),
 * inner (/inner/api) and backend (/runs, /agent-stub) routes get ≥ 10,000 generated requests — malformed JSON,
 * truncated and oversized multipart, wrong types, unicode edges (lone surrogates, NUL, RTL, BOM, huge strings), huge
 * numbers, raw invalid UTF-8, connections cut mid-body, missing, forged and wrong-kind credentials, forged and expired
 * execution contexts. Asserted: no 5xx, no hung response (a per-request timeout), every api error in the
 * `{code, message, status}` shape, both services healthy throughout, and afterwards the turns it started settle and
 * the database audit (test/faults/audit.ts) is clean.
 *
 * Output: `fuzz: <n> requests, <k> 5xx, seed <s>`. Replay one run with FUZZ_SEED=<s>; FUZZ_REQUESTS sets the count.
 * The requests are generated up front from the seed (fc.sample), so a replay sends the same ones.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Connection, Client } from '@temporalio/client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { signExecutionContext } from '../../core/protocol/exec-context.js';
import { MAX_BYTES } from '../../core/domain/uploads.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import type { Stack } from '../../stack/start-stack.js';
import { assertAuditClean } from '../faults/audit.js';
import { callerOf, startedTurn } from '../support/exec-context.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const COUNT = Number(process.env.FUZZ_REQUESTS ?? 10_240);
const CONCURRENCY = Number(process.env.FUZZ_CONCURRENCY ?? 16);
/** A blocking turn on a loaded 2-core box may take a while; past this a response counts as hung. */
const REQUEST_TIMEOUT_MS = 60_000;

const INNER_KEY = 'fuzz-inner-key-0123456789';
const BACKEND_TOKEN = 'fuzz-backend-token-0123456789';
const SIGNING_KEY = 'fuzz-signing-key-0123456789';
const STUB_SOCKET = path.join(os.tmpdir(), `fz-stub-${process.pid}.sock`);

let stack: Stack;
let since: Date;
/** Values of the real objects the generated requests may name. */
const real: Record<string, string> = {};
let liveCtx: ExecutionContextLayerConfig;
let expiredCtx: ExecutionContextLayerConfig;
let forgedCtx: ExecutionContextLayerConfig;

beforeAll(async () => {
  stack = await startTestStack('api_fuzz', {
    env: {
      INNER_API_KEY: INNER_KEY,
      AGENT_BACKEND_TOKEN: BACKEND_TOKEN,
      EXECUTION_CONTEXT_SIGNING_KEY: SIGNING_KEY,
      AGENT_STUB_SOCKET: STUB_SOCKET,
      // Admission control is not what is fuzzed here (test/security/l6-*): its 503s would only hide real ones.
      MAX_TURNS_IN_FLIGHT: 0,
      MAX_RUNS_PER_BACKEND: 0,
      TOOL_TIMEOUT_MS: 1_000,
    },
  });
  const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'hello', user: 'owner' });
  const end = turn.frames.at(-1)!.data as { conversation_id: string; message_id: string };
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: end.message_id } });
  // A turn in progress (created before `since`: the audit does not judge it) whose context the inner routes honour.
  const live = await startedTurn(stack.db, SIGNING_KEY, { tenantId: stack.demo!.tenantId, appId: stack.demo!.appId });
  liveCtx = { ...live.context };
  const { signature: _s, exp: _e, ...fields } = liveCtx;
  expiredCtx = signExecutionContext(fields, SIGNING_KEY, { ttlMs: 1_000, now: Date.now() - 3_600_000 });
  forgedCtx = signExecutionContext(fields, INNER_KEY);
  Object.assign(real, {
    app_id: stack.demo!.appId,
    agent_id: stack.demo!.agentId,
    conversation_id: end.conversation_id,
    message_id: end.message_id,
    task_id: end.message_id,
    run_id: run.backend_run_id!,
    live_message_id: live.messageId,
  });
  // Row timestamps come from PostgreSQL's clock, which is this machine's: everything above is before `since`.
  await new Promise((r) => setTimeout(r, 50));
  since = new Date();
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  fs.rmSync(STUB_SOCKET, { force: true });
});

// ---------------------------------------------------------------------------------------------------------------
// Routes

type Kind = 'v1' | 'console' | 'inner' | 'backend' | 'stub' | 'open';
interface Route {
  method: string;
  template: string;
  kind: Kind;
}

const INNER_ROUTES: Route[] = [
  { method: 'POST', template: '/inner/api/agent/llm/invoke', kind: 'inner' },
  { method: 'POST', template: '/inner/api/knowledge/retrieve', kind: 'inner' },
  { method: 'POST', template: '/inner/api/tools/invoke', kind: 'inner' },
  { method: 'GET', template: '/inner/api/agent-config/{agent_id}/prompt', kind: 'inner' },
  { method: 'PUT', template: '/inner/api/agent-config/{agent_id}/prompt', kind: 'inner' },
  { method: 'POST', template: '/inner/api/agent/execution-context/verify', kind: 'inner' },
];
const BACKEND_ROUTES: Route[] = [
  { method: 'POST', template: '/runs', kind: 'backend' },
  { method: 'GET', template: '/runs/{run_id}', kind: 'backend' },
  { method: 'GET', template: '/runs/{run_id}/events', kind: 'backend' },
  { method: 'GET', template: '/runs/{run_id}/events/sse', kind: 'backend' },
  { method: 'POST', template: '/runs/{run_id}/cancel', kind: 'backend' },
  { method: 'GET', template: '/modules', kind: 'backend' },
  { method: 'POST', template: '/compositions/validate', kind: 'backend' },
  { method: 'GET', template: '/healthz', kind: 'backend' },
  { method: 'GET', template: '/readyz', kind: 'backend' },
  { method: 'GET', template: '/agent-stub/config/prompt', kind: 'stub' },
  { method: 'PUT', template: '/agent-stub/config/prompt', kind: 'stub' },
  { method: 'GET', template: '/agent-stub/config/manifest', kind: 'stub' },
];

/** Every operation of the api's own OpenAPI document (/v1 and /console/api), plus the inner and backend routes. */
async function allRoutes(): Promise<Route[]> {
  const doc = (await (await fetch(`${stack.apiUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
  const out: Route[] = [];
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const m of Object.keys(ops)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(m)) continue;
      out.push({
        method: m.toUpperCase(),
        template: p,
        kind: p.startsWith('/console/') ? 'console' : p.startsWith('/v1/') ? 'v1' : 'open',
      });
    }
  }
  return [...out, ...INNER_ROUTES, ...BACKEND_ROUTES];
}

// ---------------------------------------------------------------------------------------------------------------
// Values

/** A JSON tree whose leaves may be raw number text (`1e309`), so huge numbers reach the parser as written. */
type Node = { raw: string } | string | boolean | null | Node[] | { obj: [string, Node][] };

function toText(n: Node): string {
  if (n === null || typeof n === 'boolean') return String(n);
  if (typeof n === 'string') return JSON.stringify(n);
  if (Array.isArray(n)) return `[${n.map(toText).join(',')}]`;
  if ('raw' in n) return n.raw;
  return `{${n.obj.map(([k, v]) => `${JSON.stringify(k)}:${toText(v)}`).join(',')}}`;
}

function fromValue(v: unknown): Node {
  if (Array.isArray(v)) return v.map(fromValue);
  if (typeof v === 'number') return { raw: String(v) };
  if (v && typeof v === 'object') return { obj: Object.entries(v).map(([k, x]) => [k, fromValue(x)]) };
  return (v ?? null) as Node;
}

const UNICODE = [
  '\ud800',
  '\udfff',
  'a\ud83db',
  '\u0000',
  'a\u0000b',
  '\u202eevil\u202c',
  '\u200f\u061c',
  '\ufeffbom',
  '😀🏳️‍🌈',
  'e\u0301'.repeat(50),
  '\u0085\u2028\u2029',
  '../../etc/passwd',
  '%00',
  '%ED%A0%80',
  '<script>alert(1)</script>',
  "' or 1=1 --",
  '',
  ' ',
  'null',
];
const HUGE = ['x'.repeat(100_000), '€'.repeat(40_000), '\ud800'.repeat(20_000), 'a\u0000'.repeat(30_000)];
const NUMBERS = [
  '1e309',
  '-1e309',
  '18446744073709551616',
  '9007199254740993',
  '-0',
  '1e-400',
  '0.1e99999',
  '-1',
  '0',
  '2147483648',
  '1.5',
];

const str: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...UNICODE) },
  { weight: 3, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 3, arbitrary: fc.constantFrom('hi', 'owner', 'other', 'like', 'streaming', 'blocking', 'draft', 'build-draft', 'demo') },
  { weight: 4, arbitrary: fc.constantFrom('@app_id', '@conversation_id', '@message_id', '@agent_id', '@run_id', '@live_message_id') },
  { weight: 2, arbitrary: fc.uuid() },
);
const num: fc.Arbitrary<Node> = fc.oneof(
  fc.constantFrom(...NUMBERS).map((raw) => ({ raw })),
  fc.integer().map((i) => ({ raw: String(i) })),
);

const FIELDS = [
  'query',
  'user',
  'inputs',
  'response_mode',
  'conversation_id',
  'files',
  'rating',
  'content',
  'name',
  'auto_generate',
  'config',
  'from',
  'prompt',
  'caller',
  'target',
  'execution_context',
  'run_id',
  'provider',
  'arguments',
  'dataset_ids',
  'top_k',
  'score_threshold',
  'source',
  'composition',
  'purpose',
  'idempotency_key',
  'reason',
  'kind',
  'openapi',
  'server_url',
  'auth',
  'headers',
  'question',
  'answer',
  'enabled',
  'action',
  'workspace_id',
  'limit',
  '__proto__',
  'constructor',
];

const { node } = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'xsmall', withCrossShrink: true },
    str,
    num,
    fc.constantFrom<Node>(true, false, null),
    fc.array(tie('node'), { maxLength: 3 }),
    fc.array(fc.tuple(fc.oneof(fc.constantFrom(...FIELDS), str), tie('node')), { maxLength: 4 }).map((obj) => ({ obj })),
  ),
}));

// ---------------------------------------------------------------------------------------------------------------
// Bodies shaped like the real ones, to get past validation often enough

const ctxFor = (which: string): unknown =>
  ({ live: liveCtx, expired: expiredCtx, forged: forgedCtx, garbage: { tenant_id: 'x' }, none: undefined })[which];

function baseBody(route: Route, ctxChoice: string): Record<string, unknown> {
  const t = route.template;
  const ctx = ctxFor(ctxChoice);
  if (t.endsWith('/llm/invoke'))
    return {
      execution_context: ctx,
      caller: { invocation_id: 'fz', agent_run_id: 'fz', call_index: 0, ...(liveCtx ? callerOf(liveCtx) : {}) },
      target: { provider: 'demo', model: 'demo-chat', prompt_messages: [{ role: 'user', content: 'hi' }] },
    };
  if (t.endsWith('/knowledge/retrieve'))
    return { execution_context: ctx, dataset_ids: [crypto.randomUUID()], query: 'q', top_k: 3, score_threshold: 0, source: 'eager' };
  if (t.endsWith('/tools/invoke')) return { execution_context: ctx, run_id: 'fz', provider: 'weather', name: 'get', arguments: {} };
  if (t.endsWith('/execution-context/verify')) return { execution_context: ctx, workspace_id: crypto.randomUUID(), run_id: 'fz' };
  if (t.includes('/prompt')) return { prompt: 'p' };
  if (t === '/runs') return { purpose: 'agent_app', composition: { layers: [] }, idempotency_key: 'k', input: { query: 'hi' } };
  if (t.endsWith('/cancel') || t.endsWith('/stop')) return { user: 'owner', reason: 'user_stop' };
  if (t.endsWith('/compositions/validate')) return { composition: { layers: [{ type: 'llm', name: 'llm', config: {} }] } };
  if (t.includes('chat-messages')) return { query: 'hi', user: 'owner', inputs: {}, response_mode: 'blocking' };
  if (t.endsWith('/feedbacks')) return { rating: 'like', user: 'owner', content: 'ok' };
  if (t.endsWith('/name')) return { name: 'n', user: 'owner', auto_generate: false };
  if (t.includes('human_input') || t.includes('/forms/')) return { inputs: {}, action: 'ok', user: 'owner' };
  if (t.includes('tool-providers'))
    return { kind: 'mcp', name: 'fz', server_url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer x' } };
  if (t.endsWith('/datasets')) return { name: 'ds', description: 'd' };
  if (t.endsWith('/retrieve')) return { query: 'q', top_k: 2 };
  if (t.includes('/annotations')) return { question: 'q', answer: 'a' };
  if (t.includes('annotation-settings')) return { enabled: false, score_threshold: 0.5 };
  if (t.endsWith('/publish')) return { from: 'draft' };
  if (t.includes('draft')) return { config: {} };
  return { user: 'owner' };
}

interface Body {
  bytes: Buffer;
  type?: string;
  /** Send only part of it with the full Content-Length, then cut the connection. */
  cut?: boolean;
}

const BOUNDARY = 'fzBoundary';
/** One byte over the largest upload the api takes (core/domain/uploads.ts MAX_BYTES). */
const bigFile = Buffer.alloc(MAX_BYTES + 1, 0x61);

const part = (name: string, filename: string | null, content: Buffer | string, type = 'text/plain') =>
  Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${filename !== null ? `; filename="${filename}"` : ''}\r\nContent-Type: ${type}\r\n\r\n`,
    ),
    Buffer.isBuffer(content) ? content : Buffer.from(content),
    Buffer.from('\r\n'),
  ]);

const multipart: fc.Arbitrary<Body> = fc
  .tuple(
    // Oversized is rare: each one moves MAX_BYTES over the loopback.
    fc.oneof(
      { weight: 60, arbitrary: fc.constantFrom('whole', 'no-close', 'cut-headers', 'cut-connection', 'no-boundary', 'bad-boundary') },
      { weight: 1, arbitrary: fc.constant('oversized') },
    ),
    str,
    fc.constantFrom('a.png', 'b.txt', 'c.pdf', '', '../x.md', 'ä\u202e.txt', 'x'.repeat(300)),
    fc.constantFrom('file', 'user', 'data_source_type', 'other'),
  )
  .map(([shape, text, filename, field]) => {
    const file = part(
      field,
      filename,
      shape === 'oversized' ? bigFile : text,
      filename.endsWith('.pdf') ? 'application/pdf' : 'text/plain',
    );
    const user = part('user', null, 'owner');
    const close = Buffer.from(`--${BOUNDARY}--\r\n`);
    const type =
      shape === 'no-boundary' ? 'multipart/form-data' : `multipart/form-data; boundary=${shape === 'bad-boundary' ? '"' : BOUNDARY}`;
    if (shape === 'no-close') return { bytes: Buffer.concat([user, file]), type };
    if (shape === 'cut-headers') return { bytes: Buffer.concat([user, file]).subarray(0, user.length + 20), type };
    if (shape === 'cut-connection') return { bytes: Buffer.concat([user, file, close]), type, cut: true };
    return { bytes: Buffer.concat([user, file, close]), type };
  });

const json = (text: string, type = 'application/json'): Body => ({ bytes: Buffer.from(text, 'utf8'), type });
/** Built once: a stray token, raw invalid UTF-8, UTF-16, a depth bomb, over the 1 MB body limit. */
const MALFORMED: Body[] = [
  json('{'),
  json('nul'),
  json('{"a":1,}'),
  json("{'a':1}"),
  { bytes: Buffer.from([0x7b, 0x22, 0x71, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0xff, 0xfe, 0x22, 0x7d]), type: 'application/json' },
  { bytes: Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]), type: 'application/json; charset=utf-16' },
  json(`${'['.repeat(100_000)}${']'.repeat(100_000)}`),
  json(`{"query":"${'x'.repeat(2 * 1024 * 1024)}","user":"owner"}`),
];

const bodyArbs = new Map<string, fc.Arbitrary<Body | undefined>>();
/** Built once per route and context choice (fc.chain would otherwise build it again for every request). */
const bodyArb = (route: Route, ctxChoice: string): fc.Arbitrary<Body | undefined> => {
  const key = `${route.method} ${route.template} ${ctxChoice}`;
  let arb = bodyArbs.get(key);
  if (!arb) bodyArbs.set(key, (arb = buildBodyArb(route, ctxChoice)));
  return arb;
};

const buildBodyArb = (route: Route, ctxChoice: string): fc.Arbitrary<Body | undefined> => {
  const base = baseBody(route, ctxChoice);
  return fc.oneof(
    // The real shape with one field replaced (or added): most requests get past parsing into validation or further.
    {
      weight: 8,
      arbitrary: fc.tuple(fc.constantFrom(...Object.keys(base), ...FIELDS), node).map(([k, v]) => {
        const fields = (fromValue(base) as { obj: [string, Node][] }).obj.filter(([f]) => f !== k);
        return json(toText({ obj: [...fields, [k, v]] }));
      }),
    },
    { weight: 3, arbitrary: fc.constant(json(JSON.stringify(base))) },
    // A huge string (100k characters, or 20k lone surrogates) in one field.
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...Object.keys(base)), fc.constantFrom(...HUGE))
        .map(([k, v]) => json(JSON.stringify({ ...base, [k]: v }))),
    },
    { weight: 2, arbitrary: node.map((n) => json(toText(n))) },
    // Malformed: truncated JSON, a stray token, raw invalid UTF-8, a depth bomb, over the body limit.
    {
      weight: 2,
      arbitrary: fc.integer({ min: 0, max: 60 }).map((cut) => json(JSON.stringify(base).slice(0, cut))),
    },
    { weight: 1, arbitrary: fc.constantFrom(...MALFORMED) },
    { weight: 2, arbitrary: multipart },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          str,
          fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/xml', '', 'application/json; charset=latin1'),
        )
        .map(([t, type]) => ({ bytes: Buffer.from(t, 'utf8'), type: type || undefined })),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
};

// ---------------------------------------------------------------------------------------------------------------
// Requests

const PARAM_VALUES = (name: string): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.constant(`@${name}`) },
    { weight: 2, arbitrary: fc.uuid() },
    { weight: 3, arbitrary: str },
    { weight: 1, arbitrary: fc.constantFrom('..', '.', '%2e%2e', '%', 'x'.repeat(5_000), '00000000-0000-0000-0000-000000000000') },
  );

const QUERY_NAMES = [
  'user',
  'limit',
  'last_id',
  'first_id',
  'conversation_id',
  'sort_by',
  'as_attachment',
  'sign',
  'expires',
  'page',
  'keyword',
  'x',
  'user[]',
  'after',
];

const credentialArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant('valid') },
  { weight: 1, arbitrary: fc.constant('none') },
  { weight: 1, arbitrary: fc.constant('wrong-kind') },
  { weight: 1, arbitrary: fc.constant('forged') },
  { weight: 1, arbitrary: fc.constant('malformed') },
);

function requestArb(routes: Route[]) {
  // Routes that start a turn (a workflow, a backend run, model calls) cost ~100x a refusal: a third of the weight.
  const turnStarting = (r: Route) => r.method === 'POST' && r.template.endsWith('/chat-messages');
  return fc.oneof(...routes.map((r) => ({ weight: turnStarting(r) ? 1 : 3, arbitrary: routeRequestArb(r) })));
}

function routeRequestArb(route: Route) {
  return fc.record({
    route: fc.constant(route),
    method: fc.oneof(
      { weight: 12, arbitrary: fc.constant(route.method) },
      { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') },
    ),
    params: fc.tuple(...paramNames(route.template).map((n) => PARAM_VALUES(n))),
    query: fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), fc.oneof(str, num.map(toText), fc.constant('owner'))), { maxLength: 4 }),
    credential: credentialArb,
    ctx: fc.constantFrom('live', 'live', 'live', 'expired', 'forged', 'garbage', 'none'),
    ctxPlace: fc.constantFrom('body', 'header', 'both'),
    runId: fc.oneof(fc.constant('@run_id'), fc.constant(undefined), str),
    lastEventId: fc.option(fc.constantFrom('0', '5', '-1', '1e3', '99999999999999999999', '2147483648', 'abc', '1:2'), {
      nil: undefined,
    }),
    contentEncoding: fc.option(fc.constantFrom('gzip', 'br', 'deflate', 'identity', 'bogus'), { freq: 15, nil: undefined }),
    body: fc.constantFrom('live', 'expired', 'forged', 'garbage', 'none').chain((c) => bodyArb(route, c)),
  });
}

function paramNames(template: string): string[] {
  return [...template.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]!);
}

type FuzzRequest = ReturnType<typeof routeRequestArb> extends fc.Arbitrary<infer T> ? T : never;

/** `@name` placeholders → the real ids (known only once the stack runs). */
const resolve = (s: string) => s.replace(/@([a-z_]+)/g, (m, k: string) => real[k] ?? m);

function encodePart(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    // A lone surrogate: send the (invalid) UTF-8 bytes of one as percent escapes.
    return s.replace(/[\ud800-\udfff]/g, '').length === s.length
      ? encodeURI(s)
      : `${encodeURIComponent(s.replace(/[\ud800-\udfff]/g, ''))}%ED%A0%80`;
  }
}

const headerSafe = (s: string) => s.replace(/[^\x20-\x7e]/g, '?').slice(0, 4_000);

interface Prepared {
  socketPath?: string;
  port?: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Body;
  summary: string;
}

function prepare(r: FuzzRequest): Prepared {
  const { route } = r;
  let p = route.template;
  paramNames(route.template).forEach((name, i) => {
    const v = (r.params as string[])[i]!;
    p = p.replace(`{${name}}`, v.startsWith('@') ? resolve(v) : encodePart(resolve(v)));
  });
  if (r.query.length) p += `?${r.query.map(([k, v]) => `${encodePart(k)}=${encodePart(resolve(v))}`).join('&')}`;
  const headers: Record<string, string> = {};
  const cred = r.credential;
  const bearer = (k: string) => (headers.authorization = `Bearer ${k}`);
  const key =
    route.kind === 'console'
      ? stack.demo!.consoleKey
      : route.kind === 'v1' || route.kind === 'open'
        ? stack.demo!.apiKey
        : route.kind === 'inner'
          ? INNER_KEY
          : route.kind === 'backend'
            ? BACKEND_TOKEN
            : mintStubToken(BACKEND_TOKEN, real.run_id!);
  const wrongKind = route.kind === 'console' ? stack.demo!.apiKey : route.kind === 'inner' ? BACKEND_TOKEN : stack.demo!.consoleKey;
  const value = cred === 'valid' ? key : cred === 'wrong-kind' ? wrongKind : cred === 'forged' ? `${key.slice(0, -4)}beef` : '';
  if (route.kind === 'inner') {
    if (cred === 'malformed') headers['x-inner-api-key'] = headerSafe(`\t${key}\u00e9 `);
    else if (value) headers['x-inner-api-key'] = value;
    const ctx = ctxFor(r.ctx);
    if (ctx && r.ctxPlace !== 'body') headers['x-agent-execution-context'] = Buffer.from(JSON.stringify(ctx)).toString('base64');
    if (r.runId !== undefined) headers['x-agent-run-id'] = headerSafe(resolve(r.runId)) || 'x';
  } else if (cred === 'malformed') headers.authorization = headerSafe(`Bearer  ${key} extra\u00e9`);
  else if (value) bearer(value);
  if (r.lastEventId !== undefined) headers['last-event-id'] = r.lastEventId;
  const withBody = r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD';
  if (withBody && r.body!.type) headers['content-type'] = r.body!.type;
  if (withBody && r.contentEncoding) headers['content-encoding'] = r.contentEncoding;
  let body = withBody ? r.body : undefined;
  // The inner routes' contexts travel in the body: put the live one's real ids in.
  if (body && !body.cut && body.bytes.length < 1_000_000)
    body = { ...body, bytes: Buffer.from(resolve(body.bytes.toString('latin1')), 'latin1') };
  const target =
    route.kind === 'stub'
      ? { socketPath: STUB_SOCKET }
      : { port: Number(new URL(route.kind === 'backend' ? stack.agentBackendUrl : stack.apiUrl).port) };
  return {
    ...target,
    method: r.method,
    path: p,
    headers,
    body,
    summary: `${r.method} ${p.slice(0, 160)} [${route.kind} cred=${cred} ctx=${r.ctx}/${r.ctxPlace} body=${body ? `${body.type ?? '-'} ${body.bytes.length}B${body.cut ? ' cut' : ''}` : 'none'}]`,
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

interface Outcome {
  status: number | 'cut' | 'refused-by-client' | 'timeout' | 'error';
  contentType: string;
  text: string;
  error?: string;
}

/**
 * One request; sent again once when a kept-alive socket turned out closed (the server's keep-alive timeout met the
 * client's reuse: Node's documented race, `req.reusedSocket`), which says nothing about the route.
 */
async function send(p: Prepared): Promise<Outcome> {
  const first = await sendOnce(p);
  return first.retry ? sendOnce(p) : first;
}

function sendOnce(p: Prepared): Promise<Outcome & { retry?: boolean }> {
  return new Promise((resolveOutcome) => {
    let done = false;
    const finish = (o: Outcome & { retry?: boolean }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolveOutcome(o);
    };
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: '127.0.0.1',
        port: p.port,
        socketPath: p.socketPath,
        method: p.method,
        path: p.path,
        headers: { ...p.headers, ...(p.body ? { 'content-length': String(p.body.bytes.length) } : {}) },
        agent: p.socketPath || p.body?.cut ? undefined : agent,
      });
    } catch (err) {
      // Node refuses to send it (a character no HTTP request can carry): not a request the server could get.
      resolveOutcome({ status: 'refused-by-client', contentType: '', text: '', error: (err as Error).message });
      return;
    }
    const timer = setTimeout(() => {
      req.destroy();
      finish({ status: 'timeout', contentType: '', text: '' });
    }, REQUEST_TIMEOUT_MS);
    req.on('response', (res) => {
      const contentType = String(res.headers['content-type'] ?? '');
      if (contentType.startsWith('text/event-stream') || (res.statusCode! < 300 && !contentType.includes('json'))) {
        // A stream or a file: its status is the verdict; the connection is not reused.
        res.destroy();
        finish({ status: res.statusCode!, contentType, text: '' });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= 65_536) chunks.push(c);
      });
      res.on('end', () => finish({ status: res.statusCode!, contentType, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (e) => finish({ status: res.statusCode!, contentType, text: '', error: e.message }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      const stale = req.reusedSocket && (e.code === 'ECONNRESET' || e.message === 'socket hang up');
      finish({
        status: p.body?.cut ? 'cut' : 'error',
        contentType: '',
        text: '',
        error: e.message,
        ...(stale ? { retry: true } : {}),
      } as Outcome);
    });
    if (p.body?.cut) {
      req.write(p.body.bytes.subarray(0, Math.floor(p.body.bytes.length / 2)));
      setTimeout(() => {
        req.destroy();
        finish({ status: 'cut', contentType: '', text: '' });
      }, 20);
      return;
    }
    req.end(p.body?.bytes);
  });
}

async function healthy(): Promise<void> {
  for (const url of [stack.apiUrl, stack.agentBackendUrl]) {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) });
    expect(res.status, `${url}/healthz`).toBe(200);
  }
}

describe('fuzzing every route of the real stack', () => {
  it(`${COUNT} generated requests: no 5xx, no hang, errors in shape, services healthy, audit clean`, async () => {
    const routes = await allRoutes();
    const g0 = performance.now();
    const requests = fc.sample(requestArb(routes), { seed: SEED, numRuns: COUNT });
    console.log(`fuzz: ${COUNT} requests generated in ${Math.round(performance.now() - g0)} ms`);
    const failures: string[] = [];
    const slow: [number, string][] = [];
    const statuses = new Map<string, number>();
    let fives = 0;
    let next = 0;
    const started = Date.now();
    const worker = async () => {
      while (next < requests.length) {
        const i = next++;
        const p = prepare(requests[i]!);
        const t0 = performance.now();
        const o = await send(p);
        const ms = performance.now() - t0;
        if (ms > 1_000) slow.push([ms, p.summary]);
        const k = `${requests[i]!.route.kind} ${o.status}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
        const where = `#${i} ${p.summary}`;
        // A readiness probe answers 503 while a dependency check is slow (its documented answer), not a failure.
        const probe = requests[i]!.route.template === '/readyz' && o.status === 503;
        if (typeof o.status === 'number' && o.status >= 500 && !probe) {
          fives++;
          failures.push(`${where} → ${o.status} ${o.text.slice(0, 300)} — body: ${p.body?.bytes.subarray(0, 300).toString('utf8') ?? ''}`);
        } else if (o.status === 'timeout') failures.push(`${where} → no answer within ${REQUEST_TIMEOUT_MS} ms`);
        else if (o.status === 'error') failures.push(`${where} → connection error ${o.error}`);
        else if (
          typeof o.status === 'number' &&
          o.status >= 400 &&
          p.method !== 'HEAD' &&
          !p.socketPath &&
          !requests[i]!.route.template.startsWith('/runs')
        ) {
          const shape = (() => {
            try {
              const b = JSON.parse(o.text) as { code?: unknown; message?: unknown; status?: unknown };
              return typeof b.code === 'string' && typeof b.message === 'string' && b.status === o.status;
            } catch {
              return false;
            }
          })();
          if (!shape && requests[i]!.route.kind !== 'backend')
            failures.push(`${where} → ${o.status} not in the error shape: ${o.text.slice(0, 200)}`);
          if (/\bat .+\.(ts|js):\d+/.test(o.text)) failures.push(`${where} → a stack trace in the answer`);
        }
        if (i > 0 && i % 2_000 === 0) await healthy();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const sent = requests.length - [...statuses.entries()].filter(([k]) => k.endsWith('refused-by-client')).reduce((a, [, n]) => a + n, 0);
    console.log(
      `fuzz: ${requests.length} requests, ${fives} 5xx, seed ${SEED} (${seconds} s, concurrency ${CONCURRENCY}; replay with FUZZ_SEED=${SEED})`,
    );
    console.log(`fuzz: statuses ${JSON.stringify(Object.fromEntries([...statuses.entries()].sort()))}; ${sent} reached a server`);
    if (slow.length)
      console.log(
        `fuzz: ${slow.length} request(s) over 1 s, slowest: ${slow
          .sort((a, b) => b[0] - a[0])
          .slice(0, 5)
          .map(([ms, w]) => `${Math.round(ms)} ms ${w}`)
          .join('; ')}`,
      );
    expect(failures.slice(0, 25), `seed ${SEED}: ${failures.length} failure(s)`).toEqual([]);
    // The run reached past authentication and validation, not only 401s and 400s.
    const succeeded = [...statuses.entries()].filter(([k]) => / 2\d\d$/.test(k)).reduce((a, [, n]) => a + n, 0);
    expect(succeeded).toBeGreaterThan(COUNT / 50);
    await healthy();
  }, 600_000);

  it('afterwards: the turns it started settle and the database audit is clean', async () => {
    // A turn left running by a request cut mid-stream still ends (stream gone ≠ turn gone).
    const deadline = Date.now() + 90_000;
    for (;;) {
      const open = await stack.db.message.count({ where: { status: { in: ['pending', 'running'] }, created_at: { gte: since } } });
      if (open === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    await assertAuditClean({
      databaseUrl: stack.databaseUrl,
      withTemporal: async (fn) => {
        const connection = await Connection.connect({ address: stack.temporalAddress, connectTimeout: '5 seconds' });
        try {
          return await fn(new Client({ connection, namespace: stack.config.TEMPORAL_NAMESPACE }));
        } finally {
          await connection.close().catch(() => undefined);
        }
      },
      taskQueue: stack.config.TEMPORAL_TASK_QUEUE,
      since,
    });
  }, 180_000);

  it('answers a >1 MB JSON body with 413, malformed JSON with 400 and an unknown route with 404, in the error shape', async () => {
    const key = stack.demo!.apiKey;
    const big = await fetch(`${stack.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'x'.repeat(2_000_000), user: 'owner' }),
    });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ code: 'request_entity_too_large', status: 413 });
    const bad = await fetch(`${stack.apiUrl}/v1/conversations/${real.conversation_id}/name`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"name": "x", ',
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'invalid_json', status: 400 });
    const unknown = await fetch(`${stack.apiUrl}/nope`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found', status: 404 });
    // Headers over Node's limit: refused by its parser, still in the shape.
    const long = await send({
      port: Number(new URL(stack.apiUrl).port),
      method: 'GET',
      path: `/v1/info?x=${'y'.repeat(20_000)}`,
      headers: {},
      summary: '',
    });
    expect(long.status).toBe(431);
    expect(JSON.parse(long.text)).toMatchObject({ code: 'request_header_fields_too_large', status: 431 });
  });

  it('closes a re-attached stream promptly when Last-Event-ID is at or past the end of a finished turn, or out of range', async () => {
    const events = await stack.db.messageEvent.count({ where: { message_id: real.message_id } });
    for (const lastEventId of [String(events), String(events + 10), '2147483648', '99999999999999999999']) {
      const res = await fetch(`${stack.apiUrl}/v1/chat-messages/${real.message_id}/events?user=owner`, {
        headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'last-event-id': lastEventId },
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

  it('is still healthy afterwards: /readyz, a full turn, and no upload temp files left', async () => {
    await healthy();
    const ready = await fetch(`${stack.apiUrl}/readyz`);
    expect(ready.status, JSON.stringify(await ready.clone().json())).toBe(200);
    const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'still there?', user: 'after-fuzz' });
    expect(turn.frames.at(-1)?.event).toBe('message_end');
    const tmp = path.join(stack.config.dataDir, 'uploads', 'tmp');
    for (let i = 0; i < 30 && fs.existsSync(tmp) && fs.readdirSync(tmp).length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(fs.existsSync(tmp) ? fs.readdirSync(tmp) : []).toEqual([]);
  }, 60_000);
});
