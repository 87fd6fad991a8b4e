/**
 * A turn on an OpenAI-compatible model (a fake provider over real HTTP + SSE, started by the test) with
 * the tenant's own encrypted credentials: the credentials reach the provider but never the agent backend
 * (neither its requests, its stored runs nor any log line), and a stop aborts the model call all the way
 * down — the provider sees its connection closed.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCredentials } from '../../core/domain/llm/credentials.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeOpenAi, type FakeOpenAi } from '../llm/fake-openai.js';
import { FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const SECRET = 'sk-test-SUPER-SECRET-0123456789';
let stack: Stack;
let fake: FakeOpenAi;
let logText = '';
let app: { apiKey: string };

beforeAll(async () => {
  fake = await startFakeOpenAi();
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logText += chunk.toString();
      cb();
    },
  });
  // Everything every component logs, at debug level, lands in logText.
  const logger = pino({ level: 'debug' }, sink);
  stack = await startTestStack('real_model', { logger, env: { LOG_LEVEL: 'debug' } });
  const soul = AgentSoulConfig.parse({
    prompt: { system_prompt: 'Be brief.' },
    model: { provider: 'openai_compatible', model: 'fake-forever' },
  });
  app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Real model app', soul });
  await saveCredentials(stack.db, stack.config.ENCRYPTION_KEY, stack.demo!.tenantId, 'openai_compatible', {
    base_url: `${fake.url}/v1`,
    api_key: SECRET,
  });
});
afterAll(async () => {
  await stack?.stop();
  await fake?.close();
});

describe('the real-model path', () => {
  it('streams from the provider with the tenant key, never shows the key to the backend, and a stop closes the provider connection', async () => {
    const res = await postChat(stack.apiUrl, app.apiKey, { query: 'Tell me a long story.', user: 'reader' });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 2);
    expect(head.map((f) => f.data.answer).join('')).toMatch(/tick\d/);
    const taskId = head[0]!.data.task_id as string;

    // The provider got the tenant's key.
    expect(fake.requests.at(-1)!.authorization).toBe(`Bearer ${SECRET}`);

    const stop = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${app.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'reader' }),
    });
    expect(stop.status).toBe(200);
    // The abort travelled backend → inner LLM endpoint → provider: its streaming connection closed.
    await fake.foreverClosed;
    const frames = [...head, ...(await reader.read())];
    expect(frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe('stopped');
    expect(msg.answer).toMatch(/^tick0 tick1 /);

    // The key is nowhere the backend could see it: the requests the api sent, the backend's own tables, any log.
    const sent = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: taskId } });
    expect(JSON.stringify(sent.request)).not.toContain(SECRET);
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      const runs = await client.query(`select row_to_json(r)::text as j from agent_backend.runs r`);
      const events = await client.query(`select row_to_json(e)::text as j from agent_backend.events e`);
      expect(runs.rows.length).toBeGreaterThan(0);
      for (const r of [...runs.rows, ...events.rows]) expect(r.j).not.toContain(SECRET);
      // At rest the tenant credential is ciphertext.
      const cred = await client.query(`select encrypted_config from model_provider_credentials`);
      expect(cred.rows[0].encrypted_config).not.toContain(SECRET);
    } finally {
      await client.end();
    }
    expect(logText.length).toBeGreaterThan(1000);
    expect(logText).not.toContain(SECRET);
  });
});
