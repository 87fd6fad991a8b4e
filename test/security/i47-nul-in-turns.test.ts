/**
 * Issue 47, "a NUL byte fails the whole turn": characters PostgreSQL refuses in `jsonb`/`text` — U+0000 and lone UTF-16
 * surrogates — in shell output, a tool result, model text and a thought, through the real stack (HTTP → api → Temporal
 * → agent backend → shellctl / an API tool on loopback / a fake OpenAI-compatible provider). Each turn ends
 * `succeeded`; the characters arrive as U+FFFD in the SSE stream, the history and the stored rows (backend events
 * included); a file the command wrote keeps its raw bytes (core/platform/storable-text.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCredentials } from '../../core/domain/llm/credentials.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeOpenAi, type FakeOpenAi } from '../llm/fake-openai.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { query } from '../support/sql.js';
import { startTestStack } from '../support/stack.js';

const FFFD = '\ufffd';
let stack: Stack;
let toolServer: http.Server;
let fake: FakeOpenAi;
let modelApp: { apiKey: string };

/** An API that answers with a raw NUL byte (text/plain), or with JSON whose strings escape a NUL and a lone surrogate. */
function startToolServer(): Promise<string> {
  toolServer = http.createServer((req, res) => {
    if (req.url === '/api/raw') {
      res.setHeader('content-type', 'text/plain');
      res.end(Buffer.from('raw\u0000nul from the api', 'utf8'));
    } else {
      res.setHeader('content-type', 'application/json');
      res.end('{"result": "escaped\\u0000nul and a lone \\ud800 surrogate"}');
    }
  });
  return new Promise((resolve) =>
    toolServer.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(toolServer.address() as AddressInfo).port}`)),
  );
}

const consoleCall = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

beforeAll(async () => {
  const toolUrl = await startToolServer();
  fake = await startFakeOpenAi();
  stack = await startTestStack('i47_nul', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', TOOL_ALLOW_PRIVATE_NETWORK: true, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  const provider = await consoleCall('/tool-providers', 'POST', {
    kind: 'api',
    name: 'bytes',
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Bytes' },
      servers: [{ url: `${toolUrl}/api` }],
      paths: { '/raw': { get: { operationId: 'raw' } }, '/escaped': { get: { operationId: 'escaped' } } },
    },
    auth: { type: 'none' },
  });
  expect(provider.status, await provider.clone().text()).toBe(201);
  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true, timeout_ms: 20_000 };
  soul.tools.plugin = [
    { provider: 'bytes', name: 'raw' },
    { provider: 'bytes', name: 'escaped' },
  ] as AgentSoulConfig['tools']['plugin'];
  const draft = await consoleCall(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: AgentSoulConfig.parse(soul) });
  expect(draft.status, await draft.clone().text()).toBe(200);
  expect((await consoleCall(`/apps/${stack.demo!.appId}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);

  modelApp = await createAgentApp(stack.db, stack.demo!.tenantId, {
    name: 'NUL model app',
    soul: AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider: 'openai_compatible', model: 'fake-nul' } }),
  });
  await saveCredentials(stack.db, stack.config.ENCRYPTION_KEY, stack.demo!.tenantId, 'openai_compatible', {
    base_url: `${fake.url}/v1`,
    api_key: 'sk-fake',
  });
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  toolServer?.close();
  await fake?.close();
});

/** A lone surrogate anywhere in the text (a well-formed string holds none). */
const hasLoneSurrogate = (s: string) => !(s as unknown as { isWellFormed(): boolean }).isWellFormed();
const unstorable = (s: string) => s.includes('\u0000') || hasLoneSurrogate(s);

async function turn(key: string, q: string, user: string, inConversation?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, {
    query: q,
    user,
    ...(inConversation ? { conversation_id: inConversation } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  expect(end.event, JSON.stringify(end.data)).toBe('message_end');
  const messageId = end.data.message_id as string;
  const conversationId = end.data.conversation_id as string;
  const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
  expect(msg.status).toBe('succeeded');
  return { frames, messageId, conversationId, answer: msg.answer };
}

/** What a user sees of a turn: the streamed frames' text, the history's answer and thoughts. */
async function seen(key: string, t: { frames: ClientFrame[]; conversationId: string; messageId: string }, user: string) {
  const res = await fetch(`${stack.apiUrl}/v1/messages?user=${user}&conversation_id=${t.conversationId}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.status).toBe(200);
  const [m] = ((await res.json()) as { data: { answer: string; agent_thoughts: { thought: string; observation: string }[] }[] }).data;
  const streamed = t.frames.map((f) => JSON.stringify(f.data)).join('\n');
  const message = t.frames.find((f) => f.event === 'message')?.data.answer as string;
  return { streamed, message, history: m!, thoughts: m!.agent_thoughts };
}

/** The rows of the message and of its backend run hold no character PostgreSQL would have refused (and U+FFFD). */
async function storedRows(messageId: string) {
  const [row] = await query<{ doc: string }>(
    stack.databaseUrl,
    `select coalesce((select string_agg(data::text, '') from message_events where message_id = $1::uuid), '')
         || coalesce((select string_agg(thought || observation || tool_input, '') from message_agent_thoughts where message_id = $1::uuid), '')
         || coalesce((select string_agg(e.data::text, '') from agent_backend.events e join agent_backend_runs r on r.backend_run_id = e.run_id
                       where r.message_id = $1::uuid), '') as doc`,
    [messageId],
  );
  return row!.doc;
}

describe('characters PostgreSQL cannot store, in a turn', () => {
  it('a shell command that prints a NUL byte: the turn succeeds, U+FFFD in the stream, history and rows; the file it wrote keeps the byte', async () => {
    const key = stack.demo!.apiKey;
    const t = await turn(key, "/sh printf 'before\\000after\\n'; printf 'raw\\000bytes' > outputs/nul.bin", 'nul-sh');
    expect(t.answer).toContain('The command exited with code 0.');
    expect(t.answer).toContain(`before${FFFD}after`);
    const s = await seen(key, t, 'nul-sh');
    expect(s.message).toContain(`before${FFFD}after`);
    expect(s.history.answer).toContain(`before${FFFD}after`);
    expect(s.thoughts.some((th) => th.observation.includes(`before${FFFD}after`))).toBe(true);
    expect(s.streamed).toContain(`before${FFFD}after`);
    expect(unstorable(s.streamed)).toBe(false);
    expect(await storedRows(t.messageId)).toContain(`before${FFFD}after`);
    // The file is a file: its bytes as written, NUL included.
    const file = t.frames.find((f) => f.event === 'message_file');
    expect(file, 'outputs/nul.bin attached').toBeDefined();
    const download = await fetch(file!.data.url as string);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer())).toEqual(Buffer.from('raw\u0000bytes'));
    // The session snapshot the turn ended with holds the replaced text, and the conversation goes on from it.
    const [snap] = await query<{ doc: string }>(
      stack.databaseUrl,
      `select snapshot::text as doc from message_session_snapshots where message_id = $1::uuid`,
      [t.messageId],
    );
    expect(snap!.doc).toContain(`before${FFFD}after`);
    const next = await turn(key, '/sh echo again', 'nul-sh', t.conversationId);
    expect(next.answer).toContain('again');
  });

  it('an API tool whose answer holds a raw NUL byte: the observation and the answer show U+FFFD; the turn succeeds', async () => {
    const key = stack.demo!.apiKey;
    const t = await turn(key, '/tool bytes__raw {}', 'nul-tool');
    expect(t.answer).toContain(`raw${FFFD}nul from the api`);
    const s = await seen(key, t, 'nul-tool');
    expect(s.thoughts.some((th) => th.observation.includes(`raw${FFFD}nul from the api`))).toBe(true);
    expect(s.history.answer).toContain(`raw${FFFD}nul from the api`);
    expect(s.streamed).toContain(`raw${FFFD}nul from the api`);
    expect(unstorable(s.streamed)).toBe(false);
    expect(await storedRows(t.messageId)).toContain(`raw${FFFD}nul`);
  });

  it('a tool result the model unwraps into a NUL and a lone surrogate in its text: both U+FFFD; the turn succeeds', async () => {
    const key = stack.demo!.apiKey;
    const t = await turn(key, '/tool bytes__escaped {}', 'nul-json');
    // The demo model unwraps JSON {result}: its answer text holds the decoded NUL and half surrogate.
    expect(t.answer).toContain(`escaped${FFFD}nul and a lone ${FFFD} surrogate`);
    const s = await seen(key, t, 'nul-json');
    expect(s.message).toContain(`escaped${FFFD}nul and a lone ${FFFD} surrogate`);
    expect(s.history.answer).toBe(t.answer);
    expect(unstorable(s.streamed)).toBe(false);
    expect(unstorable(await storedRows(t.messageId))).toBe(false);
  });

  it('model text and reasoning with NUL and lone surrogates (a provider over HTTP): U+FFFD in answer and thought, a whole pair kept', async () => {
    const t = await turn(modelApp.apiKey, 'Say something odd.', 'nul-model');
    expect(t.answer).toBe(`Null${FFFD}here and ${FFFD} a half pair, then \u{1F600} a whole one.`);
    const s = await seen(modelApp.apiKey, t, 'nul-model');
    expect(s.message).toBe(t.answer);
    expect(s.history.answer).toBe(t.answer);
    expect(s.streamed).toContain(`Null${FFFD}here`);
    expect(unstorable(s.streamed)).toBe(false);
    const thoughts = await stack.db.messageAgentThought.findMany({ where: { message_id: t.messageId } });
    expect(thoughts.some((th) => th.thought.includes(`Thinking${FFFD} about ${FFFD} it.`))).toBe(true);
    const doc = await storedRows(t.messageId);
    expect(doc).toContain(`Thinking${FFFD} about ${FFFD} it.`);
    expect(unstorable(doc)).toBe(false);
  });
});
