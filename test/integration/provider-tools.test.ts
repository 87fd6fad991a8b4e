/**
 * API and MCP tools through real turns (issue 14 §3–5): HTTP → api → Temporal → agent backend → demo model →
 * `tools` layer → POST /inner/api/tools/invoke → the api calls a local HTTP server built from its OpenAPI document
 * (with an API key the backend never sees), or a real MCP server over streamable HTTP (the official SDK's server).
 * The demo model's `/tool <provider>__<tool> <json>` trigger calls the tool and answers with its observation.
 * The stack runs with TOOL_ALLOW_PRIVATE_NETWORK (the servers are on loopback); a second api app without it shows
 * the SSRF guard refusing them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { issueConsoleKey } from '../../core/domain/provision.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { query } from '../support/sql.js';
import { startTestStack } from '../support/stack.js';

const API_KEY = 'wx-secret-key-0123456789abcdef';
const MCP_TOKEN = 'mcp-bearer-token-abcdef0123456789';
let stack: Stack;
let apiServer: http.Server;
let mcpServer: http.Server;
let apiUrl: string;
let mcpUrl: string;
const received: { method: string; url: string; key: string | undefined }[] = [];
const mcpAuth: (string | undefined)[] = [];

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

/** The weather API: a forecast, a 404, a slow answer and an oversized one. */
function startApiServer() {
  apiServer = http.createServer((req, res) => {
    received.push({ method: req.method!, url: req.url!, key: req.headers['x-api-key'] as string | undefined });
    const url = new URL(req.url!, 'http://x');
    if (url.pathname.startsWith('/v1/forecast/')) {
      const city = decodeURIComponent(url.pathname.slice('/v1/forecast/'.length));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ result: `sunny in ${city} for ${url.searchParams.get('days')} days` }));
    } else if (url.pathname === '/v1/slow') {
      setTimeout(() => res.end('too late'), 5_000).unref();
    } else if (url.pathname === '/v1/big') {
      res.end('b'.repeat(10_000));
    } else {
      res.statusCode = 404;
      res.end('no such station');
    }
  });
  return listen(apiServer);
}

/** A stateless MCP server over streamable HTTP: a fresh server and transport per request, as the SDK's example does. */
function startMcpServer() {
  mcpServer = http.createServer(async (req, res) => {
    mcpAuth.push(req.headers.authorization);
    const server = new McpServer({ name: 'test-calc', version: '1.0.0' });
    server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
      content: [{ type: 'text', text: `sum is ${a + b}` }],
    }));
    server.registerTool('fail', { description: 'Always fails', inputSchema: {} }, async () => ({
      content: [{ type: 'text', text: 'the calculator is broken' }],
      isError: true,
    }));
    server.registerTool('bad.name', { description: 'Not offerable', inputSchema: {} }, async () => ({ content: [] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void transport.close().then(() => server.close()));
    await server.connect(transport);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    await transport.handleRequest(req, res, body);
  });
  return listen(mcpServer);
}

const weatherDoc = () => ({
  openapi: '3.0.3',
  info: { title: 'Weather', description: 'Forecasts for cities' },
  servers: [{ url: `${apiUrl}/v1` }],
  paths: {
    '/forecast/{city}': {
      get: {
        operationId: 'get_forecast',
        summary: 'Forecast for a city',
        parameters: [
          { name: 'city', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'days', in: 'query', schema: { type: 'integer' } },
        ],
      },
    },
    '/missing': { get: { operationId: 'missing' } },
    '/slow': { get: { operationId: 'slow' } },
    '/big': { get: { operationId: 'big' } },
  },
});

const consoleCall = (p: string, method = 'GET', body?: unknown, key = stack.demo!.consoleKey) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';
const messageIdOf = (frames: ClientFrame[]) => frames.at(-1)!.data.message_id as string;

async function turn(q: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: q, user: 'tools-user' });
  expect(status).toBe(200);
  return { frames, answer: answerOf(frames), messageId: messageIdOf(frames) };
}

beforeAll(async () => {
  apiUrl = await startApiServer();
  mcpUrl = await startMcpServer();
  stack = await startTestStack('provider_tools', {
    env: { TOOL_ALLOW_PRIVATE_NETWORK: true, TOOL_TIMEOUT_MS: 1_500, TOOL_MAX_RESPONSE_BYTES: 2_048, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  const weather = await consoleCall('/tool-providers', 'POST', {
    kind: 'api',
    name: 'weather',
    openapi: weatherDoc(),
    auth: { type: 'api_key_header', name: 'X-Api-Key', secret: API_KEY },
  });
  expect(weather.status).toBe(201);
  const calc = await consoleCall('/tool-providers', 'POST', {
    kind: 'mcp',
    name: 'calc',
    server_url: `${mcpUrl}/mcp`,
    headers: { Authorization: `Bearer ${MCP_TOKEN}` },
  });
  expect(calc.status).toBe(201);
  const soul = demoSoulConfig();
  soul.tools.plugin = ['get_forecast', 'missing', 'slow', 'big']
    .map((name) => ({ provider: 'weather', name }))
    .concat([
      { provider: 'calc', name: 'add' },
      { provider: 'calc', name: 'fail' },
    ]) as AgentSoulConfig['tools']['plugin'];
  const draft = await consoleCall(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: soul });
  expect(draft.status, await draft.clone().text()).toBe(200);
  expect((await consoleCall(`/apps/${stack.demo!.appId}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  apiServer?.close();
  mcpServer?.close();
});

describe('API tools through a real turn', () => {
  it('calls the local server with the decrypted key; the answer holds its response; a thought records the call', async () => {
    received.length = 0;
    const t = await turn('/tool weather__get_forecast {"city": "Oslo", "days": 2}');
    expect(t.answer).toContain('The weather__get_forecast tool returned: sunny in Oslo for 2 days');
    expect(received).toEqual([{ method: 'GET', url: '/v1/forecast/Oslo?days=2', key: API_KEY }]);
    const thoughts = await stack.db.messageAgentThought.findMany({ where: { message_id: t.messageId, tool: 'weather__get_forecast' } });
    expect(thoughts.length).toBeGreaterThan(0);
    expect(thoughts.some((th) => th.observation.includes('sunny in Oslo'))).toBe(true);
    // The key never reached the agent backend: not in the run request the api sent, nor in its stored run or events.
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: t.messageId } });
    expect(JSON.stringify(run.request)).toContain('"provider":"weather"');
    expect(JSON.stringify(run.request)).not.toContain(API_KEY);
    const backendRows = await query<{ doc: string }>(
      stack.databaseUrl,
      `select r.request::text || coalesce(string_agg(e.data::text, ''), '') as doc
         from agent_backend.runs r left join agent_backend.events e on e.run_id = r.run_id
        where r.idempotency_key = $1 group by r.request`,
      [`message-${t.messageId}`],
    );
    expect(backendRows).toHaveLength(1);
    expect(backendRows[0]!.doc).toContain('sunny in Oslo');
    expect(backendRows[0]!.doc).not.toContain(API_KEY);
  });

  it('offers the tool with the description and schema of its OpenAPI operation', async () => {
    const t = await turn('/tool weather__get_forecast {"city": "Bergen", "days": 1}');
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: t.messageId } });
    const layers = (run.request as { composition: { layers: { type: string; config: { tools?: unknown[] } }[] } }).composition.layers;
    const tools = layers.find((l) => l.type === 'tools')!.config.tools as { name: string; description: string; parameters: unknown }[];
    expect(tools.find((x) => x.name === 'get_forecast')).toMatchObject({
      description: 'Forecast for a city',
      parameters: { type: 'object', required: ['city'] },
    });
  });

  it('a 404, a timeout and an oversized answer become observations; the turn succeeds', async () => {
    const missing = await turn('/tool weather__missing {}');
    expect(missing.answer).toContain('HTTP 404');
    expect(missing.answer).toContain('no such station');
    const slow = await turn('/tool weather__slow {}');
    expect(slow.answer).toContain('took longer than 1500 ms');
    const big = await turn('/tool weather__big {}');
    expect(big.answer).toContain('b'.repeat(2_048));
    expect(big.answer).not.toContain('b'.repeat(2_049));
    expect(big.answer).toContain('[response truncated: it was longer than 2048 bytes]');
    for (const t of [missing, slow, big]) {
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: t.messageId } });
      expect(msg.status).toBe('succeeded');
    }
  });
});

describe('MCP tools through a real turn', () => {
  it('lists the server’s tools when added (a name outside the scheme is skipped) and calls one', async () => {
    const provider = (await (await consoleCall('/tool-providers/calc')).json()) as { tools: { model_name: string }[] };
    expect(provider.tools.map((t) => t.model_name).sort()).toEqual(['calc__add', 'calc__fail']);
    mcpAuth.length = 0;
    const t = await turn('/tool calc__add {"a": 2, "b": 40}');
    expect(t.answer).toContain('sum is 42');
    expect(mcpAuth.length).toBeGreaterThan(0);
    expect(mcpAuth.every((a) => a === `Bearer ${MCP_TOKEN}`)).toBe(true);
  });

  it('an error result of the MCP tool is an observation', async () => {
    const t = await turn('/tool calc__fail {}');
    expect(t.answer).toContain('the calculator is broken');
  });
});

describe('the tool-provider console API', () => {
  it('refuses a bad OpenAPI document with 400', async () => {
    const res = await consoleCall('/tool-providers', 'POST', { kind: 'api', name: 'broken', openapi: { swagger: '2.0', paths: {} } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'invalid_openapi' });
    const dup = await consoleCall('/tool-providers', 'POST', { kind: 'api', name: 'weather', openapi: weatherDoc() });
    expect(dup.status).toBe(409);
  });

  it('never returns a secret: GET masks the API key and the MCP header', async () => {
    const list = await (await consoleCall('/tool-providers')).text();
    expect(list).not.toContain(API_KEY);
    expect(list).not.toContain(MCP_TOKEN);
    const weather = (await (await consoleCall('/tool-providers/weather')).json()) as { auth: Record<string, unknown> };
    expect(weather.auth).toEqual({ type: 'api_key_header', name: 'X-Api-Key', secret: `****${API_KEY.slice(-4)}` });
  });

  it('a config naming a tool the provider does not have is refused when saved', async () => {
    const soul = demoSoulConfig();
    soul.tools.plugin = [{ provider: 'weather', name: 'nope', description: '', parameters: {} }];
    const res = await consoleCall(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: soul });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('has no tool nope');
  });

  it('another tenant cannot see, use or delete the provider', async () => {
    const tenant = await stack.db.tenant.create({ data: { name: 'Other workspace' } });
    const account = await stack.db.account.create({
      data: { tenant_id: tenant.id, email: `other+${tenant.id}@example.com`, name: 'Other' },
    });
    const key = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: account.id });
    expect((await consoleCall('/tool-providers/weather', 'GET', undefined, key)).status).toBe(404);
    expect((await consoleCall('/tool-providers/weather', 'DELETE', undefined, key)).status).toBe(404);
    expect(await (await consoleCall('/tool-providers', 'GET', undefined, key)).json()).toEqual({
      data: [],
      has_more: false,
      limit: 20,
      total: 0,
      page: 1,
    });
  });

  it('a provider in use by an agent config cannot be deleted', async () => {
    const res = await consoleCall('/tool-providers/weather', 'DELETE');
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'tool_provider_in_use' });
  });
});

describe('the SSRF guard (TOOL_ALLOW_PRIVATE_NETWORK off)', () => {
  let strict: Stack;
  beforeAll(async () => {
    strict = await startTestStack('provider_tools_strict', { env: { TOOL_ALLOW_PRIVATE_NETWORK: false } });
  }, 300_000);
  afterAll(async () => strict?.stop());

  it('refuses an API server or an MCP server on a loopback or private address', async () => {
    const call = (body: unknown) =>
      fetch(`${strict.apiUrl}/console/api/tool-providers`, {
        method: 'POST',
        headers: { authorization: `Bearer ${strict.demo!.consoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const res of [
      await call({ kind: 'api', name: 'weather', openapi: weatherDoc() }),
      await call({ kind: 'api', name: 'meta', openapi: weatherDoc(), server_url: 'http://169.254.169.254/latest' }),
      await call({ kind: 'mcp', name: 'calc', server_url: `${mcpUrl}/mcp` }),
      await call({ kind: 'mcp', name: 'calc', server_url: 'http://[::ffff:10.0.0.1]/mcp' }),
    ]) {
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'invalid_server_url' });
    }
    expect(await strict.db.toolProvider.count()).toBe(0);
  });
});
