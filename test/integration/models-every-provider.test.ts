/**
 * A real turn on every provider of issue 29 (POST /v1/chat-messages → api → Temporal → agent backend → the
 * inner LLM gateway → the AI SDK provider → a fake server speaking that provider's wire format,
 * test/llm/providers/fake-providers.ts). openai, anthropic and google run in models.test.ts; here azure (an
 * override-declared deployment `like` a catalogue model), bedrock (a catalogue model id), ollama and
 * openai_compatible (any model name), all hosted by the deployment's variables: a streamed answer, message_end
 * usage priced from the catalogue, and a calculator round trip on each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_CATALOGUE } from '../../core/domain/llm/catalogue/index.js';
import { priceUsage } from '../../core/domain/llm/pricing.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeProvider, TOOL_CALL_ID, USAGE, type FakeProvider, type Wire } from '../llm/providers/fake-providers.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const AZURE_KEY = 'azure-hosted-key-0123456789';
const AWS_SECRET = 'aws-secret-0123456789abcdef';
const COMPAT_KEY = 'sk-compat-0123456789';

interface Case {
  provider: string;
  /** The model the agent names. */
  model: string;
  /** The catalogue entry it is priced by. */
  priced: [string, string];
  wire: Wire;
  path: RegExp;
}
const CASES: Case[] = [
  {
    provider: 'azure',
    model: 'prod-4o-mini',
    priced: ['azure', 'gpt-4o-mini'],
    wire: 'openai-chat',
    path: /^\/openai\/v1\/chat\/completions\?api-version=v1$/,
  },
  {
    provider: 'bedrock',
    model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
    priced: ['bedrock', 'anthropic.claude-3-5-haiku-20241022-v1:0'],
    wire: 'bedrock',
    path: /^\/model\/anthropic\.claude-3-5-haiku-20241022-v1(:|%3A)0\/converse-stream$/,
  },
  { provider: 'ollama', model: 'llama3.2', priced: ['ollama', 'llama3.2'], wire: 'ollama', path: /^\/api\/chat$/ },
  {
    provider: 'openai_compatible',
    model: 'my-vllm-model',
    priced: ['openai_compatible', 'my-vllm-model'],
    wire: 'openai-chat',
    path: /^\/v1\/chat\/completions$/,
  },
];

let stack: Stack;
const fakes: Record<string, FakeProvider> = {};

beforeAll(async () => {
  for (const c of CASES) fakes[c.provider] = await startFakeProvider(c.wire);
  stack = await startTestStack('models-every-provider', {
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      AZURE_API_KEY: AZURE_KEY,
      AZURE_BASE_URL: `${fakes.azure!.url}/openai`,
      AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKE',
      AWS_SECRET_ACCESS_KEY: AWS_SECRET,
      AWS_REGION: 'us-east-1',
      BEDROCK_BASE_URL: fakes.bedrock!.url,
      OLLAMA_BASE_URL: `${fakes.ollama!.url}/api`,
      OPENAI_COMPATIBLE_BASE_URL: `${fakes.openai_compatible!.url}/v1`,
      OPENAI_COMPATIBLE_API_KEY: COMPAT_KEY,
      OPENAI_COMPATIBLE_MODEL: 'my-vllm-model',
      MODEL_CATALOGUE_OVERRIDES: JSON.stringify([{ provider: 'azure', model: 'prod-4o-mini', like: 'gpt-4o-mini' }]),
    },
  });
}, 240_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});

const soulOn = (provider: string, model: string) =>
  AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider, model }, tools: { core: ['calculator'] } });

function pricesOf(c: Case) {
  const [provider, model] = c.priced;
  // An open provider's undeclared model is priced by its catalogue defaults.
  const entry = provider === 'openai_compatible' ? BUILTIN_CATALOGUE.resolve(provider, model) : BUILTIN_CATALOGUE.find(provider, model);
  expect(entry, `${provider}/${model} in the catalogue`).toBeDefined();
  return entry!.prices;
}

describe.each(CASES)('a real turn on $provider', (c) => {
  it('streams the answer and prices message_end from the catalogue', async () => {
    const fake = fakes[c.provider]!;
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: `On ${c.provider}`, soul: soulOn(c.provider, c.model) });
    const before = fake.requests.length;
    const { status, frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:hello Hi!', user: 'every-provider' });
    expect(status).toBe(200);
    expect(frames.map((f) => f.event).slice(-2), JSON.stringify(frames.at(-1))).toEqual(['message', 'message_end']);
    expect(
      frames
        .filter((f) => f.event === 'message')
        .map((f) => f.data.answer)
        .join(''),
    ).toBe('Hello there!');
    const usage = (frames.at(-1)!.data as { metadata: { usage: Record<string, string | number> } }).metadata.usage;
    const prices = pricesOf(c);
    const expected = priceUsage(
      {
        prompt_tokens: USAGE.prompt,
        completion_tokens: USAGE.completion,
        cached_prompt_tokens: c.provider === 'ollama' ? 0 : USAGE.cached,
      },
      prices,
    );
    expect(usage).toMatchObject({
      prompt_tokens: USAGE.prompt,
      completion_tokens: USAGE.completion,
    });
    // The same decimal, whatever trailing zeros (a free Ollama model reports "0").
    expect(Number(usage.total_price)).toBe(Number(expected.usage.total_price));
    if (c.provider !== 'ollama') expect(Number(usage.total_price)).toBeGreaterThan(0);
    expect(usage.prompt_unit_price).toBe(prices.input);

    const sent = fake.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.url).toMatch(c.path);
    expect(sent[0]!.body).toContain('SCN:hello');
    if (c.provider === 'azure') {
      expect(sent[0]!.headers['api-key']).toBe(AZURE_KEY);
      expect(sent[0]!.body).toContain('"model":"prod-4o-mini"');
    }
    if (c.provider === 'bedrock') expect(String(sent[0]!.headers.authorization)).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAFAKEFAKE\//);
    if (c.provider === 'openai_compatible') expect(sent[0]!.headers.authorization).toBe(`Bearer ${COMPAT_KEY}`);
  });

  it('runs one calculator round trip', async () => {
    const fake = fakes[c.provider]!;
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: `Tool on ${c.provider}`,
      soul: soulOn(c.provider, c.model),
    });
    const before = fake.requests.length;
    const { status, frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:tool What is 6*7?', user: 'every-provider' });
    expect(status).toBe(200);
    expect(frames.at(-1)!.event, JSON.stringify(frames.at(-1))).toBe('message_end');
    expect(
      frames
        .filter((f) => f.event === 'message')
        .map((f) => f.data.answer)
        .join(''),
    ).toBe('The answer is 42.');
    const sent = fake.requests.slice(before);
    // The call, then the follow-up carrying the calculator's result.
    expect(sent).toHaveLength(2);
    expect(sent[1]!.body).toContain('42');
    if (c.provider !== 'ollama') expect(sent[1]!.body).toContain(TOOL_CALL_ID);
  });
});
