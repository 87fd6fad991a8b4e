/**
 * Issue 28 item 4 through real turns: a tool server that echoes its request shows the provider's secret URL-encoded,
 * form-encoded, base64 (standard and url-safe) and as a bare token (Bearer, and the user:pass / password of Basic);
 * none of those forms reaches the answer, the message's events, its stored thoughts or the agent backend's events.
 * Issue 47: the same for the secret as common JSON and HTML encoders, percent-encoders and hex write it.
 * `.`/`..` path arguments and reserved header parameters are refused; a server URL with userinfo is refused.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { query } from '../support/sql.js';
import { startTestStack } from '../support/stack.js';

const QUERY_SECRET = 'S3cr3t key+/=&~é!query';
const BEARER_SECRET = 'bearer-tok_0123456789abcdef';
const MCP_BEARER = 'mcp-bare-token-9876543210';
const BASIC_USER = 'svc-user';
const BASIC_PASS = 'p@ss w0rd/+=basic';
const BASIC = `Basic ${Buffer.from(`${BASIC_USER}:${BASIC_PASS}`).toString('base64')}`;

let stack: Stack;
const servers: http.Server[] = [];
const seenPaths: string[] = [];

const b64 = (s: string) => Buffer.from(s).toString('base64');
/** Every form an echoing server shows a secret in. */
function forms(s: string): string[] {
  return [
    s,
    encodeURIComponent(s),
    new URLSearchParams({ k: s }).toString().slice(2),
    JSON.stringify(s).slice(1, -1),
    b64(s),
    b64(s).replace(/=+$/, ''),
    Buffer.from(s).toString('base64url'),
  ];
}
const ALL_FORMS = [
  ...forms(QUERY_SECRET),
  ...forms(BEARER_SECRET),
  ...forms(MCP_BEARER),
  ...forms(BASIC_PASS),
  ...forms(`${BASIC_USER}:${BASIC_PASS}`),
].filter((f) => f.length >= 6);

/** The secret as common encoders write it (issue 47), each from its documented rules. */
function encodings(s: string): [string, string][] {
  const u = (ch: string) => [...Array(ch.length).keys()].map((i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');
  const json = (pick: (ch: string) => boolean) => [...s].map((ch) => (pick(ch) ? u(ch) : JSON.stringify(ch).slice(1, -1))).join('');
  const html: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#x27;', é: '&eacute;' };
  const bytes = [...Buffer.from(s)];
  return [
    ['JSON with \\/ (PHP)', JSON.stringify(s).slice(1, -1).replace(/\//g, '\\/')],
    ['Python json.dumps (ensure_ascii)', json((ch) => ch.codePointAt(0)! > 0x7f)],
    ['Go encoding/json', json((ch) => '<>&'.includes(ch))],
    ['every character \\uXXXX', json(() => true)],
    ['HTML named entities', [...s].map((ch) => html[ch] ?? ch).join('')],
    ['HTML decimal', [...s].map((ch) => `&#${ch.codePointAt(0)};`).join('')],
    ['HTML hex', [...s].map((ch) => `&#x${ch.codePointAt(0)!.toString(16)};`).join('')],
    ['percent, lower case', encodeURIComponent(s).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())],
    ['percent, every byte', bytes.map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('')],
    ['hex', Buffer.from(s).toString('hex')],
    ['hex, upper case', Buffer.from(s).toString('hex').toUpperCase()],
  ];
}

function listen(server: http.Server): Promise<string> {
  servers.push(server);
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

/** Echoes what it got: the raw URL, the key and the bearer token in every form. */
function startEchoServer() {
  return listen(
    http.createServer((req, res) => {
      seenPaths.push(req.url!);
      const url = new URL(req.url!, 'http://x');
      const key = url.searchParams.get('key') ?? '';
      if (url.pathname === '/api/encodings') {
        // A plain-text page of the key in each encoding, one per line.
        res.setHeader('content-type', 'text/plain');
        return void res.end(
          encodings(key)
            .map(([name, e]) => `${name}: [${e}]`)
            .join('\n'),
        );
      }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          url: req.url,
          authorization: req.headers.authorization,
          key: key ? forms(key) : [],
          token: token ? forms(token) : [],
        }),
      );
    }),
  );
}

/** An MCP server whose tool echoes the caller's credentials: the bare bearer token, and Basic's parts. */
function startMcpEcho() {
  return listen(
    http.createServer(async (req, res) => {
      const auth = req.headers.authorization ?? '';
      const server = new McpServer({ name: 'echo', version: '1.0.0' });
      server.registerTool('whoami', { description: 'Echo the credentials', inputSchema: {} }, async () => {
        const bearer = /^Bearer (.+)$/.exec(auth)?.[1];
        const basic = /^Basic (.+)$/.exec(auth)?.[1];
        const decoded = basic ? Buffer.from(basic, 'base64').toString('utf8') : '';
        const pass = decoded.slice(decoded.indexOf(':') + 1);
        const parts = bearer ? forms(bearer) : [basic!, decoded, ...forms(pass)];
        return { content: [{ type: 'text', text: `you are: ${parts.join(' | ')}` }] };
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
    }),
  );
}

const echoDoc = (server: string, extra: Record<string, unknown> = {}) => ({
  openapi: '3.0.3',
  info: { title: 'Echo' },
  servers: [{ url: `${server}/api` }],
  paths: {
    '/echo': { get: { operationId: 'echo' } },
    '/encodings': { get: { operationId: 'encodings' } },
    '/files/{name}': {
      get: { operationId: 'file', parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }] },
    },
    ...extra,
  },
});

const consoleCall = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function turn(q: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: q, user: 'secrets-user' });
  expect(status).toBe(200);
  const answer = (frames.find((f: ClientFrame) => f.event === 'message')?.data.answer as string) ?? '';
  return { answer, messageId: frames.at(-1)!.data.message_id as string, frames };
}

/** Everything stored or streamed about a turn: answer, client frames, message events, thoughts, backend events. */
async function everythingOf(t: Awaited<ReturnType<typeof turn>>): Promise<string> {
  const message = await stack.db.message.findUniqueOrThrow({ where: { id: t.messageId } });
  const events = await stack.db.messageEvent.findMany({ where: { message_id: t.messageId } });
  const thoughts = await stack.db.messageAgentThought.findMany({ where: { message_id: t.messageId } });
  const backend = await query<{ doc: string }>(
    stack.databaseUrl,
    `select coalesce(string_agg(e.data::text, ''), '') as doc from agent_backend.runs r join agent_backend.events e on e.run_id = r.run_id
      where r.idempotency_key = $1`,
    [`message-${t.messageId}`],
  );
  return [
    t.answer,
    JSON.stringify(t.frames),
    message.answer,
    JSON.stringify(events.map((e) => e.data)),
    JSON.stringify(thoughts),
    backend[0]?.doc ?? '',
  ].join('\n');
}

function expectNoSecret(text: string) {
  for (const f of ALL_FORMS) expect(text.includes(f), `a form of a secret leaked: ${f}`).toBe(false);
}

let echoUrl: string;
let mcpUrl: string;

beforeAll(async () => {
  echoUrl = await startEchoServer();
  mcpUrl = await startMcpEcho();
  stack = await startTestStack('sec_i28_tools', { env: { TOOL_ALLOW_PRIVATE_NETWORK: true, DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  const providers = [
    { kind: 'api', name: 'qkey', openapi: echoDoc(echoUrl), auth: { type: 'api_key_query', name: 'key', secret: QUERY_SECRET } },
    { kind: 'api', name: 'bear', openapi: echoDoc(echoUrl), auth: { type: 'bearer', secret: BEARER_SECRET } },
    { kind: 'mcp', name: 'mcpb', server_url: `${mcpUrl}/mcp`, headers: { Authorization: `Bearer ${MCP_BEARER}` } },
    { kind: 'mcp', name: 'mcpbasic', server_url: `${mcpUrl}/mcp`, headers: { Authorization: BASIC } },
  ];
  for (const p of providers) {
    const res = await consoleCall('/tool-providers', 'POST', p);
    expect(res.status, await res.clone().text()).toBe(201);
  }
  const soul = demoSoulConfig();
  soul.tools.plugin = [
    { provider: 'qkey', name: 'echo' },
    { provider: 'qkey', name: 'encodings' },
    { provider: 'qkey', name: 'file' },
    { provider: 'bear', name: 'echo' },
    { provider: 'mcpb', name: 'whoami' },
    { provider: 'mcpbasic', name: 'whoami' },
  ] as AgentSoulConfig['tools']['plugin'];
  expect((await consoleCall(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: soul })).status).toBe(200);
  expect((await consoleCall(`/apps/${stack.demo!.appId}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  for (const s of servers) s.close();
});

describe('tool secrets in every form', () => {
  it('a query key echoed raw, URL-encoded, form-encoded and base64 reaches neither the answer, events nor thoughts', async () => {
    const t = await turn('/tool qkey__echo {}');
    expect(t.answer).toContain('The qkey__echo tool returned');
    expect(t.answer).toContain('****');
    expectNoSecret(await everythingOf(t));
  });

  it('a query key echoed as JSON, HTML, percent and hex encoders write it (issue 47) reaches none of them', async () => {
    const t = await turn('/tool qkey__encodings {}');
    expect(t.answer).toContain('The qkey__encodings tool returned');
    const all = await everythingOf(t);
    for (const [name, e] of encodings(QUERY_SECRET)) {
      expect(t.answer, name).toContain(`${name}: [****]`);
      expect(all.includes(e), `${name} leaked: ${e}`).toBe(false);
    }
    expectNoSecret(all);
  });

  it('a bearer token echoed in the header, bare and base64 is scrubbed', async () => {
    const t = await turn('/tool bear__echo {}');
    expect(t.answer).toContain('****');
    expectNoSecret(await everythingOf(t));
  });

  it('a bare MCP bearer token, and the user:pass and password of a Basic header, are scrubbed', async () => {
    for (const name of ['mcpb__whoami', 'mcpbasic__whoami']) {
      const t = await turn(`/tool ${name} {}`);
      expect(t.answer).toContain('you are: ****');
      expectNoSecret(await everythingOf(t));
    }
  });
});

describe('requests that would leave the operation', () => {
  it('refuses . and .. path arguments (also percent-encoded) before any request', async () => {
    for (const name of ['..', '.', '%2e%2e', '..%2f..%2fadmin']) {
      seenPaths.length = 0;
      const t = await turn(`/tool qkey__file ${JSON.stringify({ name })}`);
      expect(t.answer, name).toContain('may not be');
      expect(seenPaths, name).toEqual([]);
    }
    const ok = await turn('/tool qkey__file {"name": "report.txt"}');
    expect(ok.answer).toContain('/api/files/report.txt');
  });

  it('refuses a Host (or framing, or auth) header parameter at import with 400', async () => {
    for (const [header, auth] of [
      ['Host', { type: 'none' }],
      ['Content-Length', { type: 'none' }],
      ['Transfer-Encoding', { type: 'none' }],
      ['Connection', { type: 'none' }],
      ['Authorization', { type: 'bearer', secret: 'x'.repeat(20) }],
    ] as const) {
      const doc = echoDoc(echoUrl, {
        '/h': { get: { operationId: 'h', parameters: [{ name: header, in: 'header', schema: { type: 'string' } }] } },
      });
      const res = await consoleCall('/tool-providers', 'POST', { kind: 'api', name: 'hdr', openapi: doc, auth });
      expect(res.status, header).toBe(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe('invalid_openapi');
      expect(body.message).toContain(header);
    }
  });

  it('refuses a server URL with user:password@ (400 naming the field), in the body or the document', async () => {
    const inBody = await consoleCall('/tool-providers', 'POST', {
      kind: 'mcp',
      name: 'withuser',
      server_url: `http://user:pw@127.0.0.1:${new URL(mcpUrl).port}/mcp`,
    });
    expect(inBody.status).toBe(400);
    expect(((await inBody.json()) as { message: string }).message).toMatch(/^server_url: .*user:password@/);
    const inDoc = await consoleCall('/tool-providers', 'POST', {
      kind: 'api',
      name: 'withuser2',
      openapi: echoDoc(echoUrl.replace('http://', 'http://user:pw@')),
    });
    expect(inDoc.status).toBe(400);
    expect(((await inDoc.json()) as { message: string }).message).toContain('servers[0].url');
  });
});
