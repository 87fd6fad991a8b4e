/**
 * Issue 17: every JSON edge — public (/v1), console, inner API (LLM invoke, agent-config), agent backend
 * (/runs) and agent stub — answers whatever body it gets with a status below 500: bodies shaped like the
 * real ones with one field replaced, extra keys, NUL in keys and strings, prototype keys (`__proto__`,
 * `constructor`, ...), huge strings and nesting from a few levels to 200,000 deep. Afterwards both services
 * are still healthy.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { signExecutionContext } from '../../core/protocol/exec-context.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { socketRequest } from '../support/stub-socket.js';

const INNER_KEY = 'fuzz-inner-key';
const BACKEND_TOKEN = 'fuzz-backend-token';
let stack: Stack;
let ids: { conversation: string; message: string };

beforeAll(async () => {
  stack = await startTestStack('sec_fuzz', { env: { INNER_API_KEY: INNER_KEY, AGENT_BACKEND_TOKEN: BACKEND_TOKEN } });
  const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'hello', user: 'fuzzer' });
  const end = turn.frames.at(-1)!.data as { conversation_id: string; message_id: string };
  ids = { conversation: end.conversation_id, message: end.message_id };
});
afterAll(async () => stack?.stop());

/** A JSON value as a tree of key/value pairs, so prototype keys survive into the text as plain keys. */
type Node = string | number | boolean | null | { arr: Node[] } | { obj: [string, Node][] };

function text(n: Node): string {
  if (n === null || typeof n !== 'object') return JSON.stringify(n) ?? 'null';
  if ('arr' in n) return `[${n.arr.map(text).join(',')}]`;
  return `{${n.obj.map(([k, v]) => `${JSON.stringify(k)}:${text(v)}`).join(',')}}`;
}

function fromValue(v: unknown): Node {
  if (Array.isArray(v)) return { arr: v.map(fromValue) };
  if (v && typeof v === 'object') return { obj: Object.entries(v).map(([k, x]) => [k, fromValue(x)]) };
  return v as Node;
}

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__'];
const FIELDS = [
  'query',
  'user',
  'inputs',
  'files',
  'config',
  'prompt',
  'caller',
  'target',
  'composition',
  'name',
  'rating',
  'content',
  'question',
  'action',
  'from',
  'enabled',
];

const huge = fc.constantFrom('x'.repeat(300_000), '\u0000'.repeat(10_000), '€'.repeat(100_000));
const scalar: fc.Arbitrary<Node> = fc.oneof(
  fc.constantFrom<Node>('\u0000', 'a\u0000b', '', ' ', '\ud800', 'null', -1, 1e308, 0, true, false, null),
  fc.string({ maxLength: 20 }),
  fc.integer(),
  huge,
);
const key = fc.oneof(fc.constantFrom(...PROTO_KEYS, ...FIELDS, '\u0000', 'k\u0000', ''), fc.string({ maxLength: 8 }));
const { node } = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('node'), { maxLength: 3 }).map((arr) => ({ arr })),
    fc.array(fc.tuple(key, tie('node')), { maxLength: 4 }).map((obj) => ({ obj })),
  ),
}));
const deep = fc
  .integer({ min: 30, max: 200_000 })
  .chain((depth) =>
    fc.constantFrom(`${'['.repeat(depth)}${']'.repeat(depth)}`, `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`, `${'['.repeat(depth)}`),
  );

/** A body: the real one with a field replaced or added, a random value, or a depth bomb under a field. */
const bodyFor = (base: Record<string, unknown>) =>
  fc.oneof(
    fc.tuple(fc.constantFrom(...Object.keys(base), ...PROTO_KEYS, 'extra'), node).map(([k, v]) => {
      const fields = fromValue(base) as { obj: [string, Node][] };
      return text({ obj: [...fields.obj.filter(([f]) => f !== k), [k, v]] });
    }),
    node.map(text),
    fc.tuple(fc.constantFrom(...Object.keys(base), '__proto__'), deep).map(([k, d]) => `{${JSON.stringify(k)}:${d}}`),
    // NUL where the real data goes: a field's value, or a key inside it.
    fc
      .tuple(fc.constantFrom(...Object.keys(base)), fc.constantFrom<Node>('a\u0000b', { obj: [['k\u0000', 'v']] }, { arr: ['\u0000'] }))
      .map(([k, v]) => {
        const fields = fromValue(base) as { obj: [string, Node][] };
        return text({ obj: fields.obj.map(([f, x]) => [f, f === k ? v : x] as [string, Node]) });
      }),
    fc.constantFrom('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}', '{', '\u0000', 'nul'),
  );

interface Edge {
  name: string;
  method: string;
  url: () => string;
  headers: () => Record<string, string>;
  base: () => Record<string, unknown>;
  /** The unix socket the edge listens on instead (the agent stub has no TCP listener); `url`'s path is used. */
  socket?: () => string;
}

const app = () => stack.demo!.appId;
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const EDGES: Edge[] = [
  {
    name: 'public chat',
    method: 'POST',
    url: () => `${stack.apiUrl}/v1/chat-messages`,
    headers: () => bearer(stack.demo!.apiKey),
    base: () => ({ query: 'hi', user: 'fuzzer', inputs: {}, response_mode: 'blocking' }),
  },
  {
    name: 'public stop',
    method: 'POST',
    url: () => `${stack.apiUrl}/v1/chat-messages/${ids.message}/stop`,
    headers: () => bearer(stack.demo!.apiKey),
    base: () => ({ user: 'fuzzer' }),
  },
  {
    name: 'public feedback',
    method: 'POST',
    url: () => `${stack.apiUrl}/v1/messages/${ids.message}/feedbacks`,
    headers: () => bearer(stack.demo!.apiKey),
    base: () => ({ rating: 'like', user: 'fuzzer', content: 'ok' }),
  },
  {
    name: 'public rename',
    method: 'POST',
    url: () => `${stack.apiUrl}/v1/conversations/${ids.conversation}/name`,
    headers: () => bearer(stack.demo!.apiKey),
    base: () => ({ name: 'n', user: 'fuzzer' }),
  },
  {
    name: 'public form',
    method: 'POST',
    url: () => `${stack.apiUrl}/v1/form/human_input/abcdefghijkl`,
    headers: () => bearer(stack.demo!.apiKey),
    base: () => ({ inputs: {}, action: 'ok', user: 'fuzzer' }),
  },
  {
    name: 'console draft',
    method: 'PUT',
    url: () => `${stack.apiUrl}/console/api/apps/${app()}/agent/build-draft`,
    headers: () => bearer(stack.demo!.consoleKey),
    base: () => ({ config: {} }),
  },
  {
    name: 'console annotation',
    method: 'POST',
    url: () => `${stack.apiUrl}/console/api/apps/${app()}/annotations`,
    headers: () => bearer(stack.demo!.consoleKey),
    base: () => ({ question: 'q', content: 'c' }),
  },
  {
    name: 'console settings',
    method: 'PUT',
    url: () => `${stack.apiUrl}/console/api/apps/${app()}/annotation-settings`,
    headers: () => bearer(stack.demo!.consoleKey),
    base: () => ({ enabled: false, score_threshold: 0.5 }),
  },
  {
    name: 'console publish',
    method: 'POST',
    url: () => `${stack.apiUrl}/console/api/apps/${app()}/agent/publish`,
    headers: () => bearer(stack.demo!.consoleKey),
    base: () => ({ from: 'build-draft' }),
  },
  {
    name: 'inner llm invoke',
    method: 'POST',
    url: () => `${stack.apiUrl}/inner/api/agent/llm/invoke`,
    headers: () => ({ 'x-inner-api-key': INNER_KEY }),
    base: () => ({
      caller: {
        invocation_id: 'i',
        agent_run_id: 'r',
        call_index: 0,
        tenant_id: stack.demo!.tenantId,
        user_id: 'u',
        user_from: 'end-user',
        app_id: app(),
        invoke_from: 'service-api',
      },
      target: { provider: 'demo', model: 'demo-chat', prompt_messages: [{ role: 'user', content: 'hi' }] },
    }),
  },
  {
    name: 'inner agent-config',
    method: 'PUT',
    url: () => `${stack.apiUrl}/inner/api/agent-config/${stack.demo!.agentId}/prompt`,
    headers: () => ({
      'x-inner-api-key': INNER_KEY,
      'x-agent-execution-context': Buffer.from(
        JSON.stringify(
          signExecutionContext(
            {
              tenant_id: stack.demo!.tenantId,
              user_id: 'u',
              user_from: 'account',
              app_id: app(),
              conversation_id: ids.conversation,
              message_id: ids.message,
              agent_id: stack.demo!.agentId,
              agent_config_version_id: null,
              invoke_from: 'debugger',
            },
            stack.config.EXECUTION_CONTEXT_SIGNING_KEY,
          ),
        ),
      ).toString('base64'),
    }),
    base: () => ({ prompt: 'p' }),
  },
  {
    name: 'backend runs',
    method: 'POST',
    url: () => `${stack.agentBackendUrl}/runs`,
    headers: () => bearer(BACKEND_TOKEN),
    base: () => ({ purpose: 'turn', composition: { layers: [] }, idempotency_key: 'k' }),
  },
  {
    name: 'backend cancel',
    method: 'POST',
    url: () => `${stack.agentBackendUrl}/runs/00000000-0000-4000-8000-000000000000/cancel`,
    headers: () => bearer(BACKEND_TOKEN),
    base: () => ({ reason: 'user_stop' }),
  },
  {
    name: 'agent stub',
    method: 'PUT',
    url: () => `http://agent-stub/agent-stub/config/prompt`,
    socket: () => stack.agentStubSocket!,
    headers: () => bearer(mintStubToken(BACKEND_TOKEN, ids.message)),
    base: () => ({ prompt: 'p' }),
  },
];

async function send(edge: Edge, body: string): Promise<number> {
  if (edge.socket)
    return (
      await socketRequest(edge.socket(), new URL(edge.url()).pathname, {
        method: edge.method,
        headers: { 'content-type': 'application/json', ...edge.headers() },
        body,
      })
    ).status;
  const res = await fetch(edge.url(), {
    method: edge.method,
    headers: { 'content-type': 'application/json', ...edge.headers() },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  await res.arrayBuffer().catch(() => undefined);
  return res.status;
}

describe('JSON edges under hostile bodies', () => {
  for (const edge of EDGES) {
    it(`${edge.name}: no 5xx`, async () => {
      await fc.assert(
        fc.asyncProperty(bodyFor(edge.base()), async (body) => {
          const status = await send(edge, body);
          expect(status, `${edge.name} ${body.slice(0, 200)}`).toBeLessThan(500);
        }),
        { numRuns: 30 },
      );
      expect(Object.prototype).not.toHaveProperty('polluted');
    }, 120_000);
  }

  it('both services stay healthy', async () => {
    expect((await fetch(`${stack.apiUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${stack.agentBackendUrl}/healthz`)).status).toBe(200);
  });
});
