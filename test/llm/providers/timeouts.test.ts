/**
 * Stream timeouts (issue 41 item 2, docs/models.md "Stream timeouts"): a provider that sends its headers and then
 * nothing, or stalls mid-answer, ends the call in the configured time with `provider_timeout`, through the real
 * gateway router and each provider package against its wire-format fake (fake-providers.ts). Nothing streamed yet:
 * retried (a second attempt that answers is the answer); something streamed: not retried, the partial answer
 * stays streamed and the call is billed as a cut call (estimated) — the error chunk carries that usage. The
 * catalogue gives each model its default; MODEL_*_TIMEOUT_MS win over it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelCatalogue } from '../../../core/domain/llm/catalogue/index.js';
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
  type Served,
  type TestDb,
} from '../helpers.js';
import { startFakeProvider, type FakeProvider, type Wire } from './fake-providers.js';

const LIMIT_MS = 1_000;
const SECRET = 'sk-timeouts-0123456789abcdef';
interface Case {
  provider: string;
  model: string;
  wire: Wire;
  config: (url: string) => Partial<ProviderConfig>;
}
const CASES: Case[] = [
  {
    provider: 'openai',
    model: 'gpt-4o-mini',
    wire: 'openai-responses',
    config: (u) => ({ OPENAI_API_KEY: SECRET, OPENAI_BASE_URL: `${u}/v1` }),
  },
  {
    provider: 'anthropic',
    model: 'claude-3-5-haiku-20241022',
    wire: 'anthropic',
    config: (u) => ({ ANTHROPIC_API_KEY: SECRET, ANTHROPIC_BASE_URL: `${u}/v1` }),
  },
  {
    provider: 'google',
    model: 'gemini-2.0-flash',
    wire: 'gemini',
    config: (u) => ({ GOOGLE_GENERATIVE_AI_API_KEY: SECRET, GOOGLE_BASE_URL: `${u}/v1beta` }),
  },
  {
    provider: 'bedrock',
    model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
    wire: 'bedrock',
    config: (u) => ({ AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKE', AWS_SECRET_ACCESS_KEY: SECRET, AWS_REGION: 'us-east-1', BEDROCK_BASE_URL: u }),
  },
  { provider: 'ollama', model: 'llama3.2', wire: 'ollama', config: (u) => ({ OLLAMA_BASE_URL: `${u}/api` }) },
  { provider: 'azure', model: 'gpt-4o', wire: 'openai-chat', config: (u) => ({ AZURE_API_KEY: SECRET, AZURE_BASE_URL: `${u}/openai` }) },
];

let tdb: TestDb;
let api: Served;
/** The same providers with no deployment timeouts: the catalogue's (one model overridden to 300 ms). */
let catalogueApi: Served;
const fakes = new Map<string, FakeProvider>();

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
  const retry = { baseDelayMs: 50, maxDelayMs: 2_000 };
  api = await serveRouter({
    db: tdb.db,
    logger: captureLogger().logger,
    providers: createDefaultProviders({ ...config, MODEL_FIRST_TOKEN_TIMEOUT_MS: LIMIT_MS, MODEL_IDLE_TIMEOUT_MS: LIMIT_MS }, { retry }),
  });
  const overrides = JSON.stringify([{ provider: 'anthropic', model: 'claude-3-5-haiku-20241022', timeouts: { first_token_ms: 300 } }]);
  catalogueApi = await serveRouter({
    db: tdb.db,
    logger: captureLogger().logger,
    providers: createDefaultProviders({ ...config, MODEL_CATALOGUE_OVERRIDES: overrides }, { retry }),
  });
}, 180_000);

afterAll(async () => {
  await api?.close();
  await catalogueApi?.close();
  for (const f of fakes.values()) await f.close();
  await tdb?.close();
});

async function call(base: string, c: Case, content: string) {
  const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
  const started = Date.now();
  const res = await post(base, invokeBody(tenant, { provider: c.provider, model: c.model, prompt_messages: [{ role: 'user', content }] }));
  expect(res.status).toBe(200);
  const chunks = await readChunks(res);
  for (const ch of chunks) InvokeChunk.parse(ch);
  return { tenant, chunks, elapsed: Date.now() - started };
}

describe.each(CASES)('$provider ($wire): a provider that stalls', (c) => {
  const fake = () => fakes.get(c.provider)!;
  // The package loaded and its first call made: what is timed below is the provider's silence, not a cold start.
  beforeAll(async () => expect(answerOf((await call(api.url, c, 'SCN:hello')).chunks)).toBe('Hello there!'));

  it('headers and then nothing: each attempt ends at the first-token timeout, retried twice, then provider_timeout', async () => {
    const before = fake().requests.length;
    const closedBefore = fake().stalled.length;
    const { tenant, chunks, elapsed } = await call(api.url, c, 'SCN:stall');
    const end = chunks.at(-1)!;
    expect(end).toMatchObject({ code: -502, data: { error_type: 'InvokeConnectionError', code: 'provider_timeout' } });
    expect(end.message).toContain('provider_timeout');
    expect(answerOf(chunks)).toBe('');
    expect(fake().requests.length - before).toBe(3);
    // Three attempts of a second plus backoff 50 + 100 ms: ended by the limit, not by a wall clock of minutes.
    expect(elapsed).toBeGreaterThanOrEqual(3 * LIMIT_MS);
    expect(elapsed).toBeLessThan(3 * LIMIT_MS + 6_000);
    // Each stalled request was given up on (its connection closed), and the cut call billed as estimated.
    await expect.poll(() => fake().stalled.length - closedBefore).toBe(3);
    const ledger = await tdb.db.creditLedger.findMany({ where: { tenant_id: tenant } });
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ estimated: true, completion_tokens: 0 });
    expect(end.data.usage).toMatchObject({ estimated: true, completion_tokens: 0, prompt_tokens: ledger[0]!.prompt_tokens });
  });

  it('headers and then nothing once: the retry answers', async () => {
    const before = fake().requests.length;
    const { chunks } = await call(api.url, c, 'SCN:stallonce');
    expect(answerOf(chunks)).toBe('Hello there!');
    expect(chunks.at(-1)!.data.delta.finish_reason).toBe('stop');
    expect(fake().requests.length - before).toBe(2);
  });

  it('stalls mid-answer: ends at the idle timeout, not retried; the partial answer stays streamed, billed estimated', async () => {
    const before = fake().requests.length;
    const { tenant, chunks, elapsed } = await call(api.url, c, 'SCN:stallmid');
    expect(answerOf(chunks)).toBe('Hello ');
    const end = chunks.at(-1)!;
    expect(end).toMatchObject({ code: -502, data: { code: 'provider_timeout' } });
    expect(fake().requests.length - before).toBe(1);
    expect(elapsed).toBeGreaterThanOrEqual(LIMIT_MS);
    expect(elapsed).toBeLessThan(LIMIT_MS + 5_000);
    const ledger = await tdb.db.creditLedger.findMany({ where: { tenant_id: tenant } });
    expect(ledger).toHaveLength(1);
    expect(ledger[0]!.estimated).toBe(true);
    expect(ledger[0]!.completion_tokens).toBeGreaterThan(0);
    expect(end.data.usage).toMatchObject({ estimated: true, completion_tokens: ledger[0]!.completion_tokens });
  });
});

describe('the catalogue’s timeouts', () => {
  it('without MODEL_*_TIMEOUT_MS a model’s catalogue entry decides (an override of 300 ms); others keep their default', async () => {
    const anthropic = CASES.find((c) => c.provider === 'anthropic')!;
    const { chunks, elapsed } = await call(catalogueApi.url, anthropic, 'SCN:stall');
    expect(chunks.at(-1)).toMatchObject({ data: { code: 'provider_timeout' } });
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(900 + 6_000);
    const catalogue = new ModelCatalogue();
    const { streamTimeoutsOf } = await import('../../../core/domain/llm/catalogue/index.js');
    expect(streamTimeoutsOf(catalogue.find('openai', 'gpt-4o-mini'))).toEqual({ firstTokenMs: 60_000, idleMs: 30_000 });
    expect(streamTimeoutsOf(catalogue.find('openai', 'o4-mini'))).toEqual({ firstTokenMs: 300_000, idleMs: 120_000 });
    expect(streamTimeoutsOf(catalogue.find('ollama', 'llama3.2'))).toEqual({ firstTokenMs: 120_000, idleMs: 60_000 });
    expect(streamTimeoutsOf(catalogue.find('openai', 'o4-mini'), { idleMs: 5_000 })).toEqual({ firstTokenMs: 300_000, idleMs: 5_000 });
  });
});
