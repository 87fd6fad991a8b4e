/**
 * Every AI SDK provider through the gateway (POST /inner/api/agent/llm/invoke, the real router and database),
 * each against a fake server speaking its real wire format (fake-providers.ts): a streamed answer with
 * reasoning, a tool-call round trip (streamed arguments in, the tool result back out), usage with cached
 * tokens priced from the catalogue, an abort reaching the provider, and 401 / 429 / context overflow mapped
 * to what a user can act on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_CATALOGUE } from '../../../core/domain/llm/catalogue/index.js';
import { priceUsage } from '../../../core/domain/llm/pricing.js';
import { createDefaultProviders, type ProviderConfig } from '../../../core/domain/llm/providers/index.js';
import { InvokeChunk } from '../../../core/protocol/inner-llm.js';
import {
  answerOf,
  captureLogger,
  createTenant,
  invokeBody,
  post,
  readChunks,
  serveRouter,
  startTestDb,
  type Chunk,
  type Served,
  type TestDb,
} from '../helpers.js';
import { startFakeProvider, USAGE, type FakeProvider, type Wire } from './fake-providers.js';

interface Case {
  provider: string;
  model: string;
  wire: Wire;
  config: (url: string) => Partial<ProviderConfig>;
  /** The request path the provider calls. */
  path: RegExp;
  reasoning: boolean;
  cached: boolean;
}

const SECRET = 'sk-system-secret-abcdef0123456789';
const CASES: Case[] = [
  {
    provider: 'openai',
    model: 'gpt-4o-mini',
    wire: 'openai-responses',
    config: (u) => ({ OPENAI_API_KEY: SECRET, OPENAI_BASE_URL: `${u}/v1` }),
    path: /^\/v1\/responses$/,
    reasoning: true,
    cached: true,
  },
  {
    provider: 'anthropic',
    model: 'claude-3-5-haiku-20241022',
    wire: 'anthropic',
    config: (u) => ({ ANTHROPIC_API_KEY: SECRET, ANTHROPIC_BASE_URL: `${u}/v1` }),
    path: /^\/v1\/messages$/,
    reasoning: true,
    cached: true,
  },
  {
    provider: 'google',
    model: 'gemini-2.0-flash',
    wire: 'gemini',
    config: (u) => ({ GOOGLE_GENERATIVE_AI_API_KEY: SECRET, GOOGLE_BASE_URL: `${u}/v1beta` }),
    path: /^\/v1beta\/models\/gemini-2\.0-flash:streamGenerateContent\?alt=sse$/,
    reasoning: true,
    cached: true,
  },
  {
    provider: 'azure',
    model: 'gpt-4o',
    wire: 'openai-chat',
    config: (u) => ({ AZURE_API_KEY: SECRET, AZURE_BASE_URL: `${u}/openai` }),
    // A proxy in front of Azure gets what the resource would: /v1 and ?api-version=v1 (providers/azure.ts proxyBaseUrl).
    path: /^\/openai\/v1\/chat\/completions\?api-version=v1$/,
    reasoning: false,
    cached: true,
  },
  {
    provider: 'bedrock',
    model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
    wire: 'bedrock',
    config: (u) => ({ AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKE', AWS_SECRET_ACCESS_KEY: SECRET, AWS_REGION: 'us-east-1', BEDROCK_BASE_URL: u }),
    path: /^\/model\/anthropic\.claude-3-5-haiku-20241022-v1(:|%3A)0\/converse-stream$/,
    reasoning: true,
    cached: true,
  },
  {
    provider: 'ollama',
    model: 'llama3.2',
    wire: 'ollama',
    config: (u) => ({ OLLAMA_BASE_URL: `${u}/api` }),
    path: /^\/api\/chat$/,
    reasoning: true,
    cached: false,
  },
  {
    provider: 'openai_compatible',
    model: 'my-vllm-model',
    wire: 'openai-chat',
    config: (u) => ({ OPENAI_COMPATIBLE_BASE_URL: `${u}/v1`, OPENAI_COMPATIBLE_API_KEY: SECRET, OPENAI_COMPATIBLE_MODEL: 'my-vllm-model' }),
    path: /^\/v1\/chat\/completions$/,
    reasoning: true,
    cached: true,
  },
];

const CALCULATOR = {
  name: 'calculator',
  description: 'Evaluates an arithmetic expression.',
  parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
};

let tdb: TestDb;
let api: Served;
let registry: ReturnType<typeof createDefaultProviders>;
const fakes = new Map<string, FakeProvider>();
const logs = captureLogger();

beforeAll(async () => {
  tdb = await startTestDb();
  let config: ProviderConfig = {
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: undefined,
    OPENAI_COMPATIBLE_API_KEY: undefined,
    OPENAI_COMPATIBLE_MODEL: undefined,
  };
  for (const c of CASES) {
    const fake = await startFakeProvider(c.wire);
    fakes.set(c.provider, fake);
    config = { ...config, ...c.config(fake.url) };
  }
  const providers = createDefaultProviders(config, { retry: { baseDelayMs: 5, maxDelayMs: 2_000 } });
  registry = providers;
  api = await serveRouter({ db: tdb.db, logger: logs.logger, providers });
}, 180_000);

afterAll(async () => {
  await api?.close();
  for (const f of fakes.values()) await f.close();
  await tdb?.close();
});

const last = (chunks: Chunk[]) => chunks[chunks.length - 1]!;

describe.each(CASES)('$provider ($wire) through the gateway', (c) => {
  const fake = () => fakes.get(c.provider)!;
  const call = async (content: string, extra: Record<string, unknown> = {}) => {
    const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
    const res = await post(
      api.url,
      invokeBody(tenant, { provider: c.provider, model: c.model, prompt_messages: [{ role: 'user', content }], ...extra }),
    );
    expect(res.status).toBe(200);
    const chunks = await readChunks(res);
    for (const ch of chunks) InvokeChunk.parse(ch);
    return { tenant, chunks };
  };

  it('streams the answer (and its reasoning) and ends with usage priced from the catalogue', async () => {
    const before = fake().requests.length;
    const { tenant, chunks } = await call('SCN:hello');
    expect(fake().requests.at(-1)!.url).toMatch(c.path);
    expect(fake().requests.length).toBe(before + 1);
    expect(chunks.filter((ch) => ch.code === 0).length).toBeGreaterThan(2);
    expect(answerOf(chunks)).toBe('Hello there!');
    if (c.reasoning) expect(chunks.map((ch) => ch.data.delta?.message?.reasoning_content ?? '').join('')).toBe('The user greets me.');
    const end = last(chunks);
    expect(end.code).toBe(0);
    expect(end.data.delta.finish_reason).toBe('stop');
    const usage = end.data.delta.usage;
    expect(usage).toMatchObject({
      prompt_tokens: USAGE.prompt,
      completion_tokens: USAGE.completion,
      total_tokens: USAGE.prompt + USAGE.completion,
    });
    if (c.cached) expect(usage.prompt_cached_tokens).toBe(USAGE.cached);
    const entry = BUILTIN_CATALOGUE.resolve(c.provider, c.model)!;
    const expected = priceUsage(
      { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, cached_prompt_tokens: usage.prompt_cached_tokens },
      entry.prices,
    );
    expect(usage).toMatchObject({
      prompt_unit_price: entry.prices.input,
      completion_unit_price: entry.prices.output,
      total_price: expected.usage.total_price,
    });
    // System-hosted: billed through the pool, exactly those credits.
    const pool = await tdb.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenant } });
    expect(pool.quota_used).toBe(expected.credits);
  });

  it('round-trips a tool call: streamed arguments arrive as one complete call, the tool result reaches the provider', async () => {
    const { chunks } = await call('SCN:tool please compute', { tools: [CALCULATOR] });
    const calls = chunks.flatMap((ch) => ch.data.delta?.message?.tool_calls ?? []);
    expect(calls).toHaveLength(1);
    expect(calls[0].function.name).toBe('calculator');
    expect(JSON.parse(calls[0].function.arguments)).toEqual({ expression: '6*7' });
    expect(last(chunks).data.delta.finish_reason).toBe('tool_calls');

    const tenant = await createTenant(tdb.db);
    const res = await post(
      api.url,
      invokeBody(tenant, {
        provider: c.provider,
        model: c.model,
        tools: [CALCULATOR],
        prompt_messages: [
          { role: 'user', content: 'SCN:tool please compute' },
          { role: 'assistant', content: '', tool_calls: [calls[0]] },
          { role: 'tool', tool_call_id: calls[0].id, content: 'TOOLRESULT-42' },
        ],
      }),
    );
    const second = await readChunks(res);
    expect(answerOf(second)).toBe('The answer is 42.');
    const sent = fake().requests.at(-1)!.body;
    expect(sent).toContain('TOOLRESULT-42');
    expect(sent).toContain('calculator');
  });

  it('an abort (the caller disconnecting) closes the provider connection', async () => {
    const tenant = await createTenant(tdb.db);
    const abort = new AbortController();
    const res = await post(
      api.url,
      invokeBody(tenant, { provider: c.provider, model: c.model, prompt_messages: [{ role: 'user', content: 'SCN:hang' }] }),
      {
        signal: abort.signal,
      },
    );
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    abort.abort();
    await fake().closed;
  });

  it('maps 401 to provider_auth_failed, 429 (retried) to provider_rate_limited, an overflow to context_window_exceeded', async () => {
    const auth = last((await call('SCN:401')).chunks);
    expect(auth).toMatchObject({ code: -401, data: { error_type: 'InvokeAuthorizationError', code: 'provider_auth_failed' } });
    expect(JSON.stringify(auth)).not.toContain(SECRET);

    const before = fake().requests.length;
    const rate = last((await call('SCN:429')).chunks);
    expect(rate).toMatchObject({ code: -429, data: { error_type: 'InvokeRateLimitError', code: 'provider_rate_limited' } });
    expect(fake().requests.length - before).toBe(3); // the first try and two retries inside the gateway

    const overflow = last((await call('SCN:overflow')).chunks);
    expect(overflow).toMatchObject({ code: -400, data: { error_type: 'InvokeBadRequestError', code: 'context_window_exceeded' } });
  });

  it('waits out a Retry-After and then answers', async () => {
    const before = fake().requests.length;
    const started = Date.now();
    const { chunks } = await call('SCN:429once');
    expect(answerOf(chunks)).toBe('Hello there!');
    expect(fake().requests.length - before).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});

describe('content filters', () => {
  it('Azure’s content-filter refusal is content_filtered; Gemini’s SAFETY stop is finish_reason content_filter', async () => {
    const tenant = await createTenant(tdb.db);
    const azure = await readChunks(
      await post(
        api.url,
        invokeBody(tenant, { provider: 'azure', model: 'gpt-4o', prompt_messages: [{ role: 'user', content: 'SCN:filter' }] }),
      ),
    );
    expect(last(azure)).toMatchObject({ code: -400, data: { error_type: 'InvokeBadRequestError', code: 'content_filtered' } });
    const gemini = await readChunks(
      await post(
        api.url,
        invokeBody(tenant, { provider: 'google', model: 'gemini-2.0-flash', prompt_messages: [{ role: 'user', content: 'SCN:filter' }] }),
      ),
    );
    expect(last(gemini)).toMatchObject({ code: 0, data: { delta: { finish_reason: 'content_filter' } } });
  });
});

describe('reasoning settings reach the provider’s wire (agent config model_settings → gateway → provider request)', () => {
  // [provider, a reasoning model of the catalogue, model_parameters, what the provider's request body must hold]
  const WIRE: [string, string, Record<string, unknown>, (body: Record<string, unknown>) => unknown, unknown][] = [
    [
      'anthropic',
      'claude-3-7-sonnet-20250219',
      { max_tokens: 4_000, thinking_budget: 2_048 },
      (b) => b.thinking,
      { type: 'enabled', budget_tokens: 2_048 },
    ],
    ['openai', 'gpt-5', { reasoning_effort: 'high' }, (b) => (b.reasoning as { effort?: string } | undefined)?.effort, 'high'],
    [
      'google',
      'gemini-2.5-flash',
      { thinking_budget: 1_024 },
      (b) => (b.generationConfig as { thinkingConfig?: { thinkingBudget?: number } } | undefined)?.thinkingConfig?.thinkingBudget,
      1_024,
    ],
    [
      'bedrock',
      'anthropic.claude-sonnet-4-20250514-v1:0',
      { max_tokens: 4_000, thinking_budget: 2_048 },
      (b) => (b.additionalModelRequestFields as { thinking?: unknown } | undefined)?.thinking,
      { type: 'enabled', budget_tokens: 2_048 },
    ],
  ];
  it.each(WIRE)('%s %s', async (provider, model, params, pick, expected) => {
    const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
    const fake = fakes.get(provider)!;
    const before = fake.requests.length;
    const chunks = await readChunks(
      await post(
        api.url,
        invokeBody(tenant, { provider, model, prompt_messages: [{ role: 'user', content: 'SCN:hello' }], model_parameters: params }),
      ),
    );
    expect(answerOf(chunks)).toBe('Hello there!');
    const body = JSON.parse(fake.requests[before]!.body) as Record<string, unknown>;
    expect(pick(body)).toEqual(expected);
  });

  it('a model that does not reason gets none of it', async () => {
    const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
    const fake = fakes.get('anthropic')!;
    const before = fake.requests.length;
    await readChunks(
      await post(
        api.url,
        invokeBody(tenant, {
          provider: 'anthropic',
          model: 'claude-3-5-haiku-20241022',
          prompt_messages: [{ role: 'user', content: 'SCN:hello' }],
          model_parameters: { thinking_budget: 2_048 },
        }),
      ),
    );
    expect((JSON.parse(fake.requests[before]!.body) as { thinking?: unknown }).thinking).toBeUndefined();
  });
});

describe('embeddings through the providers (knowledge datasets)', () => {
  it.each([
    ['openai', 'text-embedding-3-small', /^\/v1\/embeddings$/],
    ['google', 'text-embedding-004', /^\/v1beta\/models\/text-embedding-004:batchEmbedContents$/],
    ['azure', 'text-embedding-3-small', /^\/openai\/v1\/embeddings\?api-version=v1$/],
    ['ollama', 'nomic-embed-text', /^\/api\/embed$/],
    ['openai_compatible', 'bge-m3', /^\/v1\/embeddings$/],
  ])('%s embeds texts in input order', async (provider, model, path) => {
    const p = registry.get(provider)!;
    const vectors = await p.embed!({ model, texts: ['alpha', 'beta', 'gamma'], credentials: null, signal: AbortSignal.timeout(10_000) });
    expect(vectors).toEqual([
      [0, 0.5, 1],
      [1, 0.5, 1],
      [2, 0.5, 1],
    ]);
    expect(fakes.get(provider)!.requests.at(-1)!.url).toMatch(path);
  });
});

describe('a workspace’s own base_url', () => {
  it('may not reach loopback or private addresses unless MODEL_ALLOW_PRIVATE_NETWORK', async () => {
    const strict = createDefaultProviders({
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      OPENAI_COMPATIBLE_BASE_URL: undefined,
      OPENAI_COMPATIBLE_API_KEY: undefined,
      OPENAI_COMPATIBLE_MODEL: undefined,
      MODEL_ALLOW_PRIVATE_NETWORK: false,
    });
    const fake = fakes.get('openai_compatible')!;
    const before = fake.requests.length;
    const p = strict.get('openai_compatible')!;
    const run = async () => {
      for await (const ev of p.invoke({
        model: 'm',
        prompt_messages: [{ role: 'user', content: 'SCN:hello' }],
        tools: [],
        model_parameters: {},
        credentials: { base_url: `${fake.url}/v1` },
        signal: AbortSignal.timeout(5_000),
      }))
        void ev;
    };
    await expect(run()).rejects.toMatchObject({ errorType: 'InvokeBadRequestError', message: expect.stringContaining('base_url refused') });
    await expect(
      p.checkCredentials!({ base_url: 'http://169.254.169.254/v1' }, { model: 'm', signal: AbortSignal.timeout(5_000) }),
    ).rejects.toMatchObject({
      message: expect.stringContaining('base_url refused'),
    });
    expect(fake.requests.length).toBe(before);
    // The deployment's own endpoints are trusted: system-hosted calls on loopback still work.
    const hosted = createDefaultProviders({
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      OPENAI_COMPATIBLE_BASE_URL: `${fake.url}/v1`,
      OPENAI_COMPATIBLE_API_KEY: undefined,
      OPENAI_COMPATIBLE_MODEL: 'm',
      MODEL_ALLOW_PRIVATE_NETWORK: false,
    }).get('openai_compatible')!;
    const events = [];
    for await (const ev of hosted.invoke({
      model: 'm',
      prompt_messages: [{ role: 'user', content: 'SCN:hello' }],
      tools: [],
      model_parameters: {},
      credentials: null,
      signal: AbortSignal.timeout(5_000),
    }))
      events.push(ev);
    expect(events.at(-1)).toMatchObject({ type: 'finish', finish_reason: 'stop' });
  });
});

it('never logs a provider secret', () => {
  expect(logs.text()).not.toContain(SECRET);
});
