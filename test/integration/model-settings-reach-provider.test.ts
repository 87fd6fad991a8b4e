/**
 * Every setting the studio's model picker saves reaches the provider's request (issue 42 problem 3), on the whole
 * path: the config is saved on the shared draft and published over the console api (what the agent form does), a
 * /v1 turn runs it (api → Temporal → agent backend → the inner LLM endpoint → the AI SDK provider) against a fake
 * server speaking each of the seven providers' wire formats (test/llm/providers/fake-providers.ts), and the request
 * the fake received carries temperature, top P, max tokens and the stop sequences under that provider's own names.
 * A setting the provider's API would drop is refused at save instead, next to its field: OpenAI's Responses API takes
 * no stop sequences, and Anthropic takes a temperature or a top P, not both (the AI SDK dropped top P silently).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeProvider, type FakeProvider, type Wire } from '../llm/providers/fake-providers.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { consoleClient, type Json } from '../support/console-api.js';

const STOP = ['END-OF-ANSWER', 'STOP HERE'];
const ALL = { temperature: 0.3, top_p: 0.85, max_tokens: 321, stop_sequences: STOP };

interface Case {
  provider: string;
  model: string;
  wire: Wire;
  /** What the picker saves for this model (all it declares). */
  settings: Record<string, unknown>;
  /** The settings as the provider's request names them. */
  sent: (body: Json) => Record<string, unknown>;
}
const CASES: Case[] = [
  {
    provider: 'openai',
    model: 'gpt-4o-mini',
    wire: 'openai-responses',
    settings: { temperature: 0.3, top_p: 0.85, max_tokens: 321 },
    sent: (b) => ({ temperature: b.temperature, top_p: b.top_p, max_tokens: b.max_output_tokens }),
  },
  {
    provider: 'azure',
    model: 'prod-4o-mini',
    wire: 'openai-chat',
    settings: ALL,
    sent: (b) => ({
      temperature: b.temperature,
      top_p: b.top_p,
      max_tokens: b.max_tokens ?? b.max_completion_tokens,
      stop_sequences: b.stop,
    }),
  },
  {
    provider: 'anthropic',
    model: 'claude-3-5-haiku-20241022',
    wire: 'anthropic',
    settings: { top_p: 0.85, max_tokens: 321, stop_sequences: STOP },
    sent: (b) => ({ top_p: b.top_p, max_tokens: b.max_tokens, stop_sequences: b.stop_sequences }),
  },
  {
    provider: 'google',
    model: 'gemini-2.0-flash',
    wire: 'gemini',
    settings: ALL,
    sent: (b) => ({
      temperature: b.generationConfig?.temperature,
      top_p: b.generationConfig?.topP,
      max_tokens: b.generationConfig?.maxOutputTokens,
      stop_sequences: b.generationConfig?.stopSequences,
    }),
  },
  {
    provider: 'bedrock',
    model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
    wire: 'bedrock',
    settings: ALL,
    sent: (b) => ({
      temperature: b.inferenceConfig?.temperature,
      top_p: b.inferenceConfig?.topP,
      max_tokens: b.inferenceConfig?.maxTokens,
      stop_sequences: b.inferenceConfig?.stopSequences,
    }),
  },
  {
    provider: 'ollama',
    model: 'llama3.2',
    wire: 'ollama',
    settings: ALL,
    // Ollama's /api/chat reads a model's settings from `options` only (its top-level fields are not settings).
    sent: (b) => ({
      temperature: b.options?.temperature,
      top_p: b.options?.top_p,
      max_tokens: b.options?.num_predict,
      stop_sequences: b.options?.stop,
    }),
  },
  {
    provider: 'openai_compatible',
    model: 'my-vllm-model',
    wire: 'openai-chat',
    settings: ALL,
    sent: (b) => ({ temperature: b.temperature, top_p: b.top_p, max_tokens: b.max_tokens, stop_sequences: b.stop }),
  },
];

let stack: Stack;
const fakes: Record<string, FakeProvider> = {};

beforeAll(async () => {
  for (const c of CASES) fakes[c.provider] = await startFakeProvider(c.wire);
  stack = await startTestStack('model_settings', {
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      OPENAI_API_KEY: 'sk-openai-settings-0123456789',
      OPENAI_BASE_URL: `${fakes.openai!.url}/v1`,
      AZURE_API_KEY: 'azure-settings-key-0123456789',
      AZURE_BASE_URL: `${fakes.azure!.url}/openai`,
      ANTHROPIC_API_KEY: 'sk-ant-settings-0123456789',
      ANTHROPIC_BASE_URL: `${fakes.anthropic!.url}/v1`,
      GOOGLE_GENERATIVE_AI_API_KEY: 'AIza-settings-0123456789',
      GOOGLE_BASE_URL: `${fakes.google!.url}/v1beta`,
      AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKE',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-0123456789abcdef',
      AWS_REGION: 'us-east-1',
      BEDROCK_BASE_URL: fakes.bedrock!.url,
      OLLAMA_BASE_URL: `${fakes.ollama!.url}/api`,
      OPENAI_COMPATIBLE_BASE_URL: `${fakes.openai_compatible!.url}/v1`,
      OPENAI_COMPATIBLE_API_KEY: 'sk-compat-0123456789',
      OPENAI_COMPATIBLE_MODEL: 'my-vllm-model',
      MODEL_CATALOGUE_OVERRIDES: JSON.stringify([{ provider: 'azure', model: 'prod-4o-mini', like: 'gpt-4o-mini' }]),
    },
  });
}, 240_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});

const api = consoleClient(() => stack);

/** A new app (its API key) and a save of its shared draft with `model`, as the agent form makes it. */
async function appWith(name: string) {
  const created = await api('POST', '/apps', { name, system_prompt: 'Be brief.' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const key = await api('POST', `/apps/${created.body.id}/api-keys`, { name: 'test' });
  expect(key.status).toBe(201);
  const draft = await api('GET', `/apps/${created.body.id}/agent/draft`);
  const config = draft.body.config;
  // A new app takes image uploads; three of these models read no images.
  const features = { ...config.features, file_upload: { ...config.features?.file_upload, image_enabled: false } };
  const save = (model: Record<string, unknown>) =>
    api('PUT', `/apps/${created.body.id}/agent/draft`, { config: { ...config, features, model } });
  return { id: created.body.id as string, key: key.body.key as string, save };
}

describe.each(CASES)('$provider', (c) => {
  it('a turn sends every setting the picker saved, under the provider’s names', async () => {
    // The picker shows (and so saves) only what the catalogue says the model takes: each of these is offered.
    const listed = await api('GET', `/model-providers/${c.provider}/models`);
    expect(listed.status).toBe(200);
    const params = (listed.body.data as Json[]).find((m) => m.model === c.model)?.parameters;
    expect(params, `${c.provider}/${c.model} listed`).toBeDefined();
    for (const key of Object.keys(c.settings)) expect(params[key], key).not.toBeNull();

    const app = await appWith(`Settings on ${c.provider}`);
    const saved = await app.save({ provider: c.provider, model: c.model, model_settings: c.settings });
    expect(saved.status, JSON.stringify(saved.body)).toBe(200);
    expect((await api('POST', `/apps/${app.id}/agent/publish`, { from: 'draft' })).status).toBe(201);
    const fake = fakes[c.provider]!;
    const before = fake.requests.length;
    const { status, frames } = await chat(stack.apiUrl, app.key, { query: 'SCN:hello Hi!', user: 'settings' });
    expect(status).toBe(200);
    expect(frames.at(-1)?.event, JSON.stringify(frames.at(-1))).toBe('message_end');
    const sent = fake.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(c.sent(JSON.parse(sent[0]!.body))).toEqual(c.settings);
  });
});

describe('a setting the provider would drop is refused at save, next to its field', () => {
  it('stop sequences on OpenAI (the Responses API takes none): not offered, and a save is a 400 naming the field', async () => {
    const listed = await api('GET', '/model-providers/openai/models');
    expect((listed.body.data as Json[]).find((m) => m.model === 'gpt-4o-mini').parameters.stop_sequences).toBeNull();
    const app = await appWith('Stop on openai');
    const saved = await app.save({ provider: 'openai', model: 'gpt-4o-mini', model_settings: { stop_sequences: STOP } });
    expect(saved.status).toBe(400);
    expect(saved.body.code).toBe('invalid_agent_config');
    expect(saved.body.issues.map((i: Json) => i.path)).toContain('model.model_settings.stop_sequences');
  });

  it('a temperature and a top P together on Anthropic: a 400 naming top P', async () => {
    const app = await appWith('Both on anthropic');
    const saved = await app.save({
      provider: 'anthropic',
      model: 'claude-3-5-haiku-20241022',
      model_settings: { temperature: 0.3, top_p: 0.85 },
    });
    expect(saved.status).toBe(400);
    expect(saved.body.code).toBe('invalid_agent_config');
    expect(saved.body.issues.map((i: Json) => i.path)).toContain('model.model_settings.top_p');
    // Either one alone is saved.
    expect(
      (await app.save({ provider: 'anthropic', model: 'claude-3-5-haiku-20241022', model_settings: { temperature: 0.3 } })).status,
    ).toBe(200);
  });

  it('a temperature or top P with a thinking budget on Anthropic (dropped while it thinks): declared, and a 400 naming each', async () => {
    const listed = ((await api('GET', '/model-providers/anthropic/models')).body.data as Json[]).find(
      (m) => m.model === 'claude-sonnet-4-20250514',
    ).parameters;
    expect(listed.thinking_budget.excludes).toEqual(['temperature', 'top_p']);
    const app = await appWith('Sampling while thinking');
    const saved = await app.save({
      provider: 'anthropic',
      model: 'claude-sonnet-4-20250514',
      model_settings: { thinking_budget: 2048, temperature: 0.5 },
    });
    expect(saved.status).toBe(400);
    expect(saved.body.issues).toEqual([
      {
        path: 'model.model_settings.temperature',
        message: 'anthropic takes no temperature while it thinks: clear it or the thinking budget',
      },
    ]);
  });

  it('a reasoning setting the model does not declare: a thinking budget on o3, a reasoning effort on Claude, each a 400 naming it', async () => {
    const listed = async (provider: string, model: string) =>
      ((await api('GET', `/model-providers/${provider}/models`)).body.data as Json[]).find((m) => m.model === model).parameters;
    expect((await listed('openai', 'o3')).thinking_budget).toBeNull();
    expect((await listed('anthropic', 'claude-sonnet-4-20250514')).reasoning_effort).toBeNull();
    const app = await appWith('Reasoning settings');
    const budget = await app.save({ provider: 'openai', model: 'o3', model_settings: { thinking_budget: 2048 } });
    expect(budget.status).toBe(400);
    expect(budget.body.code).toBe('invalid_agent_config');
    expect(budget.body.issues).toEqual([
      { path: 'model.model_settings.thinking_budget', message: 'openai/o3 takes no thinking budget: set its reasoning effort instead' },
    ]);
    const effort = await app.save({
      provider: 'anthropic',
      model: 'claude-sonnet-4-20250514',
      model_settings: { reasoning_effort: 'high' },
    });
    expect(effort.status).toBe(400);
    expect(effort.body.issues.map((i: Json) => i.path)).toEqual(['model.model_settings.reasoning_effort']);
    // The one each declares is saved.
    expect((await app.save({ provider: 'openai', model: 'o3', model_settings: { reasoning_effort: 'high' } })).status).toBe(200);
  });
});
