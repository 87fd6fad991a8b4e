/**
 * The builtin shelf in a real turn (issue 41): HTTP+SSE → api → Temporal → agent backend → demo model, an agent whose
 * published config picks http_request and json_query. The demo model's `/chain` trigger (DEMO_MODEL.md) calls
 * http_request on a local server — reachable because the stack runs with HTTP_REQUEST_ALLOW_PRIVATE_NETWORK, the
 * documented switch (docs/tools.md "Built-in tools") — then json_query on the body it got, in the same turn. Both
 * observations are thoughts of the message, streamed and stored; the answer is stored.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let server: http.Server;
let serverUrl: string;
const received: { method: string; url: string }[] = [];

const INVENTORY = {
  items: [
    { name: 'alpha', in_stock: true },
    { name: 'beta', in_stock: false },
    { name: 'gamma', in_stock: true },
  ],
};

const consoleCall = (p: string, method: string, body: unknown) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  server = http.createServer((req, res) => {
    received.push({ method: req.method!, url: req.url! });
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(INVENTORY));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  stack = await startTestStack('builtin_tools_turn', { env: { HTTP_REQUEST_ALLOW_PRIVATE_NETWORK: true, DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  const soul = demoSoulConfig();
  soul.tools.core = ['http_request', 'json_query'];
  const draft = await consoleCall(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: soul });
  expect(draft.status, await draft.clone().text()).toBe(200);
  expect((await consoleCall(`/apps/${stack.demo!.appId}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  server?.close();
});

describe('http_request and json_query in a turn', () => {
  it('fetches from a local server, queries the body it got, records both as thoughts and stores the answer', async () => {
    const steps = [
      { tool: 'http_request', args: { url: `${serverUrl}/inventory?shop=1`, headers: { Accept: 'application/json' } } },
      { tool: 'json_query', args: { data: '$prev.body', query: "join(', ', items[?in_stock].name)" } },
    ];
    const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: `/chain ${JSON.stringify(steps)}`,
      user: 'shelf-user',
      response_mode: 'streaming',
    });
    expect(status).toBe(200);
    expect(frames.at(-1)!.event).toBe('message_end');
    expect(received).toEqual([{ method: 'GET', url: '/inventory?shop=1' }]);

    // Over SSE: each tool's thought with its observation.
    const streamed = frames.filter((f) => f.event === 'agent_thought' && f.data.observation);
    const http_ = streamed.find((f) => f.data.tool === 'http_request')!;
    expect(JSON.parse(http_.data.observation as string)).toMatchObject({ status: 200, body: JSON.stringify(INVENTORY) });
    const query = streamed.find((f) => f.data.tool === 'json_query')!;
    expect(JSON.parse(query.data.observation as string)).toEqual({ syntax: 'jmespath', result: 'alpha, gamma' });

    // Stored: the thoughts with their input and observation, and the answer.
    const messageId = frames.at(-1)!.data.message_id as string;
    const thoughts = await stack.db.messageAgentThought.findMany({
      where: { message_id: messageId, kind: 'tool' },
      orderBy: { position: 'asc' },
    });
    expect(thoughts.map((t) => t.tool)).toEqual(['http_request', 'json_query']);
    expect(JSON.parse(thoughts[0]!.tool_input)).toEqual({ url: `${serverUrl}/inventory?shop=1`, headers: { Accept: 'application/json' } });
    expect(JSON.parse(thoughts[0]!.observation)).toMatchObject({ status: 200, url: `${serverUrl}/inventory?shop=1` });
    expect(JSON.parse(thoughts[1]!.tool_input)).toEqual({ data: JSON.stringify(INVENTORY), query: "join(', ', items[?in_stock].name)" });
    expect(JSON.parse(thoughts[1]!.observation)).toEqual({ syntax: 'jmespath', result: 'alpha, gamma' });
    const message = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(message.status).toBe('succeeded');
    expect(message.answer).toBe('The json_query tool returned: alpha, gamma.');
  });
});
