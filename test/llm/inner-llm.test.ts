/**
 * POST /inner/api/agent/llm/invoke over real HTTP: embedded PostgreSQL, the real router, the demo
 * model and a fake OpenAI-compatible server with real SSE streaming.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  loadCredentials,
  parseEncryptionKey,
  saveCredentials,
  CredentialsDecryptError,
  decryptJson,
} from '../../core/domain/llm/credentials.js';
import { countPromptTokens, countTokens } from '../../core/domain/llm/providers/demo.js';
import { InvokeChunk } from '../../core/protocol/inner-llm.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { startFakeOpenAi, type FakeOpenAi } from './fake-openai.js';
import {
  answerOf,
  captureLogger,
  createTenant,
  ENCRYPTION_KEY,
  INNER_KEY,
  invokeBody,
  post,
  readChunks,
  serveRouter,
  startTestDb,
  type Served,
  type TestDb,
} from './helpers.js';

const SYSTEM_KEY = 'sk-system-secret-0123456789';
const TENANT_KEY = 'sk-tenant-secret-9876543210';

let tdb: TestDb;
let fake: FakeOpenAi;
let api: Served;
const logs = captureLogger();

beforeAll(async () => {
  [tdb, fake] = await Promise.all([startTestDb(), startFakeOpenAi()]);
  const providers = createDefaultProviders({
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: `${fake.url}/v1`,
    OPENAI_COMPATIBLE_API_KEY: SYSTEM_KEY,
    OPENAI_COMPATIBLE_MODEL: 'fake-ok',
  });
  api = await serveRouter({ db: tdb.db, logger: logs.logger, providers });
}, 180_000);

afterAll(async () => {
  await api?.close();
  await fake?.close();
  await tdb?.close();
});

const ledgerRows = (billingId: string) => tdb.db.creditLedger.findMany({ where: { billing_request_id: billingId } });
const poolUsed = async (tenantId: string) => (await tdb.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenantId } })).quota_used;

describe('request checks before streaming', () => {
  it('answers 401 unauthorized JSON for a wrong or missing X-Inner-Api-Key', async () => {
    const tenant = await createTenant(tdb.db);
    const wrong = await post(api.url, invokeBody(tenant), { key: 'nope' });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ code: 'unauthorized', message: expect.any(String), status: 401 });
    const missing = await fetch(`${api.url}/inner/api/agent/llm/invoke`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(401);
  });

  it('answers 400 invalid_request naming the invalid field', async () => {
    const tenant = await createTenant(tdb.db);
    const body = invokeBody(tenant) as { target: Record<string, unknown> };
    delete body.target.model;
    const res = await post(api.url, body);
    expect(res.status).toBe(400);
    const err = (await res.json()) as { code: string; message: string; status: number };
    expect(err).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(err.message).toContain('target.model');

    const negative = await post(api.url, invokeBody(tenant, {}, { call_index: -1 }));
    expect(((await negative.json()) as { message: string }).message).toContain('caller.call_index');

    const notJson = await post(api.url, '{"caller":');
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ code: 'invalid_request' });
  });

  it('answers 400 invalid_request for an unknown provider or model', async () => {
    const tenant = await createTenant(tdb.db);
    const provider = await post(api.url, invokeBody(tenant, { provider: 'nonexistent' }));
    expect(provider.status).toBe(400);
    expect(await provider.json()).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('target.provider') });
    const model = await post(api.url, invokeBody(tenant, { model: 'gpt-imaginary' }));
    expect(model.status).toBe(400);
    expect(await model.json()).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('target.model') });
  });
});

describe('vision (a check of the issue 41 probe, kept as ours)', () => {
  it('refuses an image for a text-only model with 400 before any model call, and sends it to a vision model', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const withImage = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, data: 'what is this?' },
          { type: 'image' as const, base64_data: 'iVBORw0KGgo=', mime_type: 'image/png' },
        ],
      },
    ];
    const text = await post(api.url, invokeBody(tenant, { model: 'demo-text', prompt_messages: withImage }));
    expect(text.status).toBe(400);
    expect(await text.json()).toEqual({
      code: 'invalid_request',
      status: 400,
      message: "target.prompt_messages: model 'demo-text' does not support images",
    });
    expect(await poolUsed(tenant)).toBe(0n);
    const vision = await post(api.url, invokeBody(tenant, { model: 'demo-chat', prompt_messages: withImage }));
    expect(vision.status).toBe(200);
    expect(answerOf(await readChunks(vision))).toContain('I see 1 image.');
  });
});

describe('demo model over the inner API', () => {
  it('streams the answer token by token and ends with priced usage and finish_reason', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const res = await post(api.url, invokeBody(tenant));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const chunks = await readChunks(res);
    const answer = 'You said: "hello there". (This is the first message I remember.)';
    expect(answerOf(chunks)).toBe(answer);
    expect(chunks.length).toBeGreaterThan(5);
    expect(chunks.every((c) => c.code === 0 && c.message === '')).toBe(true);
    for (const c of chunks) InvokeChunk.parse(c);
    expect(chunks.map((c) => c.data.delta.index)).toEqual(chunks.map((_, i) => i));

    const last = chunks[chunks.length - 1].data.delta;
    expect(last.finish_reason).toBe('stop');
    const completion = countTokens(answer);
    expect(last.usage).toMatchObject({
      prompt_tokens: 2,
      completion_tokens: completion,
      total_tokens: 2 + completion,
      prompt_unit_price: '1',
      completion_unit_price: '2',
      prompt_price_unit: '0.000001',
      prompt_price: '0.0000020',
      completion_price: ((completion * 2) / 1e6).toFixed(7),
      total_price: ((2 + completion * 2) / 1e6).toFixed(7),
      currency: 'USD',
      model_requests: 1,
      tool_calls: 0,
    });
    expect(last.usage.latency).toBeGreaterThanOrEqual(0);
    expect(await poolUsed(tenant)).toBe(BigInt(2 + completion * 2));
  });

  it('uses the conversation history: quotes earlier user messages', async () => {
    const tenant = await createTenant(tdb.db);
    const history = [
      { role: 'system' as const, content: 'You are helpful.' },
      { role: 'user' as const, content: 'My name is Ada.' },
      { role: 'assistant' as const, content: 'Nice to meet you.' },
      { role: 'user' as const, content: 'I like tea.' },
      { role: 'assistant' as const, content: 'Noted.' },
    ];
    const ask = async (content: string) =>
      answerOf(await readChunks(await post(api.url, invokeBody(tenant, { prompt_messages: [...history, { role: 'user', content }] }))));

    expect(await ask('What was my first message?')).toBe('Your first message was: "My name is Ada.".');
    expect(await ask('What did I say earlier?')).toBe('Earlier you said: "I like tea.".');
    expect(await ask('How are you?')).toBe('You said: "How are you?". (I remember 2 earlier messages; the first was: "My name is Ada.")');
    expect(await ask('/echo-history')).toBe('Your messages so far:\n1. "My name is Ada."\n2. "I like tea."\n3. "/echo-history"');
  });

  it('turns /calc into a calculator tool call and then answers from the tool result', async () => {
    const tenant = await createTenant(tdb.db);
    const tools = [
      { name: 'calculator', description: 'math', parameters: { type: 'object', properties: { expression: { type: 'string' } } } },
    ];
    const first = await readChunks(
      await post(api.url, invokeBody(tenant, { tools, prompt_messages: [{ role: 'user', content: '/calc 6*7' }] })),
    );
    const calls = first.flatMap((c) => c.data.delta.message.tool_calls ?? []);
    expect(calls).toEqual([{ id: 'call_demo_1_0', type: 'function', function: { name: 'calculator', arguments: '{"expression":"6*7"}' } }]);
    const last = first[first.length - 1].data.delta;
    expect(last.finish_reason).toBe('tool_calls');
    expect(last.usage.tool_calls).toBe(1);

    const second = await readChunks(
      await post(
        api.url,
        invokeBody(tenant, {
          tools,
          prompt_messages: [
            { role: 'user', content: '/calc 6*7' },
            { role: 'assistant', content: '', tool_calls: calls },
            { role: 'tool', tool_call_id: 'call_demo_1_0', content: '42' },
          ],
        }),
      ),
    );
    expect(answerOf(second)).toBe('The calculator says 42.');
  });

  it('answers with the values a human submitted to ask_human', async () => {
    const tenant = await createTenant(tdb.db);
    const tools = [{ name: 'ask_human', description: '', parameters: {} }];
    const first = await readChunks(
      await post(api.url, invokeBody(tenant, { tools, prompt_messages: [{ role: 'user', content: '/ask Which colour?' }] })),
    );
    const [call] = first.flatMap((c) => c.data.delta.message.tool_calls ?? []);
    expect(JSON.parse(call.function.arguments)).toMatchObject({ question: 'Which colour?', fields: [{ name: 'answer' }] });
    const result = { status: 'submitted', action: { id: 'submit', label: 'Submit' }, values: { answer: 'blue' }, rendered_content: '' };
    const second = await readChunks(
      await post(
        api.url,
        invokeBody(tenant, {
          tools,
          prompt_messages: [
            { role: 'user', content: '/ask Which colour?' },
            { role: 'assistant', content: '', tool_calls: [call] },
            { role: 'tool', tool_call_id: call.id, content: JSON.stringify(result) },
          ],
        }),
      ),
    );
    expect(answerOf(second)).toBe('Thanks! You answered: "blue" (you chose "Submit").');
  });

  it('streams reasoning_content first for /think', async () => {
    const tenant = await createTenant(tdb.db);
    const chunks = await readChunks(await post(api.url, invokeBody(tenant, { prompt_messages: [{ role: 'user', content: '/think hi' }] })));
    const firstContent = chunks.findIndex((c) => c.data.delta.message.content);
    const reasoning = chunks.filter((c) => c.data.delta.message.reasoning_content);
    expect(reasoning.length).toBeGreaterThan(0);
    expect(chunks.indexOf(reasoning[reasoning.length - 1])).toBeLessThan(firstContent);
    expect(answerOf(chunks)).toBe('You said: "hi". (This is the first message I remember.)');
  });

  it('sends one buffered content chunk plus the usage chunk when stream is false', async () => {
    const tenant = await createTenant(tdb.db);
    const chunks = await readChunks(await post(api.url, invokeBody(tenant, { stream: false })));
    expect(chunks).toHaveLength(2);
    expect(chunks[0].data.delta.message.content).toBe('You said: "hello there". (This is the first message I remember.)');
    expect(chunks[1].data.delta.usage.prompt_tokens).toBe(2);
  });
});

describe('credits', () => {
  it('charges a replayed billing request id once but still streams the answer', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant, {}, { invocation_id: 'inv-replay', call_index: 3 });
    const first = await readChunks(await post(api.url, body));
    const usedAfterFirst = await poolUsed(tenant);
    const credits = BigInt(2 + countTokens(answerOf(first)) * 2);
    expect(usedAfterFirst).toBe(credits);

    const replay = await readChunks(await post(api.url, body));
    expect(answerOf(replay)).toBe(answerOf(first));
    expect(replay[replay.length - 1].data.delta.usage).toBeDefined();
    expect(await poolUsed(tenant)).toBe(usedAfterFirst);
    const rows = await ledgerRows('inv-replay:3');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ billable: true, credits, provider: 'demo', model: 'demo-chat', prompt_tokens: 2 });
  });

  it('charges once when the same billing request id arrives twice concurrently', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant, { prompt_messages: [{ role: 'user', content: '/long 20' }] });
    const [a, b] = await Promise.all([post(api.url, body), post(api.url, body)]);
    const [ca, cb] = await Promise.all([readChunks(a), readChunks(b)]);
    expect(answerOf(ca)).toBe(answerOf(cb));
    expect(await ledgerRows(`${body.caller.invocation_id}:0`)).toHaveLength(1);
    expect(await poolUsed(tenant)).toBe(BigInt(countTokens('/long 20') + 20 * 2));
  });

  it('refuses with 429 before streaming when the pool is exactly at its limit, allows one credit under', async () => {
    const atLimit = await createTenant(tdb.db, { limit: 100n, used: 100n });
    const refused = await post(api.url, invokeBody(atLimit));
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ code: 'agent_llm_quota_exceeded', status: 429 });
    expect(await tdb.db.creditLedger.count({ where: { tenant_id: atLimit } })).toBe(0);

    const under = await createTenant(tdb.db, { limit: 100n, used: 99n });
    const allowed = await post(api.url, invokeBody(under));
    expect(allowed.status).toBe(200);
    const chunks = await readChunks(allowed);
    expect(chunks[chunks.length - 1].data.delta.finish_reason).toBe('stop');
    // The call that crosses the limit completes; the next one is refused.
    expect(await poolUsed(under)).toBeGreaterThan(100n);
    expect((await post(api.url, invokeBody(under))).status).toBe(429);
  });

  it('a replay of an already billed call is served even when the pool is now exhausted', async () => {
    const tenant = await createTenant(tdb.db, { limit: 10n });
    const body = invokeBody(tenant);
    await readChunks(await post(api.url, body));
    expect(await poolUsed(tenant)).toBeGreaterThanOrEqual(10n);
    const replay = await post(api.url, body);
    expect(replay.status).toBe(200);
    await readChunks(replay);
    expect((await post(api.url, invokeBody(tenant))).status).toBe(429);
  });

  it('records calls with the tenant’s own credentials unbilled, even when the pool is exhausted', async () => {
    const tenant = await createTenant(tdb.db, { limit: 100n, used: 100n });
    await saveCredentials(tdb.db, ENCRYPTION_KEY, tenant, 'openai_compatible', { base_url: `${fake.url}/v1`, api_key: TENANT_KEY });
    const body = invokeBody(tenant, { provider: 'openai_compatible', model: 'fake-ok' });
    const res = await post(api.url, body);
    expect(res.status).toBe(200);
    const chunks = await readChunks(res);
    expect(answerOf(chunks)).toBe('Hello from the fake.');
    expect(fake.requests[fake.requests.length - 1].authorization).toBe(`Bearer ${TENANT_KEY}`);
    const [row] = await ledgerRows(`${body.caller.invocation_id}:0`);
    expect(row).toMatchObject({ billable: false, credits: 0n, pool_id: null, prompt_tokens: 11, completion_tokens: 5 });
    expect(await poolUsed(tenant)).toBe(100n);
  });

  it('stores credentials encrypted: no plaintext at rest, round-trips, fails with another key', async () => {
    const tenant = await createTenant(tdb.db);
    await saveCredentials(tdb.db, ENCRYPTION_KEY, tenant, 'openai_compatible', {
      base_url: 'http://example.invalid/v1',
      api_key: TENANT_KEY,
    });
    const [raw] = await tdb.db.$queryRaw<{ encrypted_config: string }[]>`
      select encrypted_config from model_provider_credentials where tenant_id = ${tenant}::uuid`;
    expect(raw.encrypted_config).not.toContain(TENANT_KEY);
    expect(raw.encrypted_config).not.toContain('example.invalid');
    expect(Buffer.from(raw.encrypted_config, 'base64').toString('latin1')).not.toContain(TENANT_KEY);
    expect(decryptJson(parseEncryptionKey(ENCRYPTION_KEY), raw.encrypted_config)).toEqual({
      base_url: 'http://example.invalid/v1',
      api_key: TENANT_KEY,
    });
    expect(await loadCredentials(tdb.db, ENCRYPTION_KEY, tenant, 'openai_compatible')).toMatchObject({ api_key: TENANT_KEY });
    const otherKey = Buffer.alloc(32, 7);
    await expect(loadCredentials(tdb.db, otherKey, tenant, 'openai_compatible')).rejects.toBeInstanceOf(CredentialsDecryptError);
  });
});

describe('openai-compatible provider through the inner API', () => {
  it('streams reasoning, text and upstream usage for a system-hosted call and bills it', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant, {
      provider: 'openai_compatible',
      model: 'fake-ok',
      model_parameters: { temperature: 0.2, stop_sequences: ['END'] },
    });
    const chunks = await readChunks(await post(api.url, body));
    expect(chunks[0].data.delta.message.reasoning_content).toBe('Thinking. ');
    expect(answerOf(chunks)).toBe('Hello from the fake.');
    const seen = fake.requests[fake.requests.length - 1];
    expect(seen.authorization).toBe(`Bearer ${SYSTEM_KEY}`);
    expect(seen.body).toMatchObject({ stream: true, stream_options: { include_usage: true }, temperature: 0.2, stop: ['END'] });
    const usage = chunks[chunks.length - 1].data.delta.usage;
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 5, prompt_unit_price: '0.5', completion_unit_price: '1.5' });
    // 11 × 0.5 + 5 × 1.5 = 13 micro-USD
    expect(usage.total_price).toBe('0.0000130');
    expect(await poolUsed(tenant)).toBe(13n);
  });

  it('accumulates streamed tool-call fragments into one complete tool call', async () => {
    const tenant = await createTenant(tdb.db);
    const tools = [{ name: 'calculator', description: '', parameters: { type: 'object' } }];
    const chunks = await readChunks(await post(api.url, invokeBody(tenant, { provider: 'openai_compatible', model: 'fake-tools', tools })));
    const calls = chunks.flatMap((c) => c.data.delta.message.tool_calls ?? []);
    expect(calls).toEqual([{ id: 'call_abc', type: 'function', function: { name: 'calculator', arguments: '{"expression":"6*7"}' } }]);
    expect(chunks[chunks.length - 1].data.delta.finish_reason).toBe('tool_calls');
    expect(fake.requests[fake.requests.length - 1].body.tools).toEqual([
      { type: 'function', function: { name: 'calculator', description: '', parameters: { type: 'object' } } },
    ]);
  });

  // Choice: once validation and quota pass, the stream starts (HTTP 200) before the provider is
  // called, so every provider failure — even an HTTP 429 before the first token — is an error chunk.
  it.each([
    ['fake-429', 'InvokeRateLimitError', -429],
    ['fake-401-echo', 'InvokeAuthorizationError', -401],
    ['fake-400', 'InvokeBadRequestError', -400],
    ['fake-503', 'InvokeServerUnavailableError', -503],
  ])('maps upstream %s to an %s error chunk', async (model, errorType, code) => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant, { provider: 'openai_compatible', model });
    const res = await post(api.url, body);
    expect(res.status).toBe(200);
    const chunks = await readChunks(res);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ code, data: { error_type: errorType } });
    expect(JSON.stringify(chunks)).not.toContain(SYSTEM_KEY);
    expect(await ledgerRows(`${body.caller.invocation_id}:0`)).toHaveLength(0);
    expect(await poolUsed(tenant)).toBe(0n);
  });

  it('ends with a negative-code chunk when the upstream connection breaks mid-stream', async () => {
    const tenant = await createTenant(tdb.db);
    const chunks = await readChunks(await post(api.url, invokeBody(tenant, { provider: 'openai_compatible', model: 'fake-midstream' })));
    expect(answerOf(chunks.slice(0, -1))).toBe('Partial answer ');
    expect(chunks[chunks.length - 1]).toMatchObject({ code: -502, data: { error_type: 'InvokeConnectionError' } });
    for (const c of chunks) InvokeChunk.parse(c);
  });

  it('demo /fail streams a few tokens then an error chunk of the requested kind', async () => {
    const tenant = await createTenant(tdb.db);
    const chunks = await readChunks(
      await post(api.url, invokeBody(tenant, { prompt_messages: [{ role: 'user', content: '/fail InvokeServerUnavailableError' }] })),
    );
    expect(chunks.filter((c) => c.code === 0).length).toBeGreaterThanOrEqual(3);
    expect(chunks[chunks.length - 1]).toMatchObject({
      code: -503,
      message: expect.any(String),
      data: { error_type: 'InvokeServerUnavailableError', message: expect.any(String) },
    });
  });

  it('closes the upstream connection when the caller disconnects', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenant, { provider: 'openai_compatible', model: 'fake-forever' });
    const abort = new AbortController();
    const res = await post(api.url, body, { signal: abort.signal });
    const reader = res.body!.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toContain('tick0');
    abort.abort();
    await expect(
      Promise.race([fake.foreverClosed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 5000))]),
    ).resolves.toBe('closed');
    // An aborted call is never charged as complete: at most its estimate is recorded (issue 18, cut-call-usage.test.ts).
    for (const row of await ledgerRows(`${body.caller.invocation_id}:0`)) expect(row.estimated).toBe(true);
  });
});

describe('secrets', () => {
  it('never writes provider credentials or the inner key to the logs', async () => {
    // Runs last in this file: the log holds every call above (tenant credentials, system key, an upstream 401 echoing the key).
    const text = logs.text();
    expect(text).toContain('model call finished');
    expect(text).toContain('InvokeAuthorizationError');
    for (const secret of [TENANT_KEY, SYSTEM_KEY, INNER_KEY, ENCRYPTION_KEY]) expect(text).not.toContain(secret);
  });

  it('counts prompt tokens deterministically across roles', () => {
    expect(countPromptTokens([{ role: 'user', content: 'a b, c' }])).toBe(4);
  });
});
