/**
 * Models end to end (issue 29), on the whole stack with fake providers speaking their real wire formats
 * (test/llm/providers/fake-providers.ts): Anthropic hosted by the deployment (ANTHROPIC_API_KEY, billed), the
 * workspace's own OpenAI and Gemini credentials (console /model-providers: checked with a real call, masked,
 * rotated, deleted; unbilled), two agents on two providers answering real turns with message_end prices from the
 * catalogue, and the fail-fast checks at save, publish and before a turn.
 */
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_CATALOGUE } from '../../core/domain/llm/catalogue/index.js';
import { priceUsage } from '../../core/domain/llm/pricing.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeProvider, USAGE, type FakeProvider } from '../llm/providers/fake-providers.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { consoleClient, type Json } from '../support/console-api.js';

const HOSTED_KEY = 'sk-ant-hosted-0123456789abcdef';
const OPENAI_KEY = 'sk-tenant-openai-0123456789';
const ROTATED_KEY = 'sk-tenant-rotated-9876543210';
let stack: Stack;
let anthropic: FakeProvider;
let openai: FakeProvider;
let gemini: FakeProvider;
let compat: FakeProvider;
/** The deployment's price override of a demo model (MODEL_CATALOGUE_OVERRIDES): what a stopped turn is billed at. */
const OVERRIDE_PRICES = { input: '7', output: '13', currency: 'USD' };

beforeAll(async () => {
  [anthropic, openai, gemini, compat] = await Promise.all([
    startFakeProvider('anthropic'),
    startFakeProvider('openai-responses'),
    startFakeProvider('gemini'),
    startFakeProvider('openai-chat'),
  ]);
  stack = await startTestStack('models', {
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      ANTHROPIC_API_KEY: HOSTED_KEY,
      ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
      MODEL_CATALOGUE_OVERRIDES: JSON.stringify([{ provider: 'demo', model: 'demo-text', prices: OVERRIDE_PRICES }]),
    },
  });
}, 240_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all([anthropic, openai, gemini, compat].map((f) => f?.close()));
});

const consoleApi = consoleClient(() => stack);

const soulOn = (provider: string, model: string, extra: Record<string, unknown> = {}) =>
  AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider, model }, tools: { core: ['calculator'] }, ...extra });

describe('credentials per workspace, several providers at once', () => {
  it('lists the providers: hosted ones usable and billed, the others waiting for credentials', async () => {
    const res = await consoleApi('GET', '/model-providers');
    expect(res.status).toBe(200);
    const by = Object.fromEntries((res.body.data as { provider: string }[]).map((p) => [p.provider, p]));
    expect(by.anthropic).toMatchObject({ system_hosted: true, usable: true, billed: true, credentials: null });
    expect(by.openai).toMatchObject({ system_hosted: false, usable: false, credentials: null });
    expect(Object.keys(by)).toEqual(
      expect.arrayContaining(['demo', 'openai', 'anthropic', 'google', 'azure', 'bedrock', 'ollama', 'openai_compatible']),
    );
    const models = await consoleApi('GET', '/model-providers/anthropic/models');
    expect(models.body.data.find((m: { model: string }) => m.model === 'claude-3-5-haiku-20241022')).toMatchObject({
      features: { vision: true, tool_calls: true },
      prices: { input: '0.8', output: '4', cached_input: '0.08' },
    });
  });

  it('checks credentials with a real call before saving them, showing the provider’s error', async () => {
    const bad = await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: 'sk-bad-key-000000000000', base_url: `${openai.url}/v1` },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('provider_credentials_invalid');
    expect(bad.body.message).toContain('Incorrect API key provided');
    expect(bad.body.provider_error).toMatchObject({ code: 'provider_auth_failed' });
    expect(JSON.stringify(bad.body)).not.toContain('sk-bad-key-000000000000');
    expect(
      (await consoleApi('GET', '/model-providers')).body.data.find((p: { provider: string }) => p.provider === 'openai').credentials,
    ).toBeNull();

    const unknownField = await consoleApi('PUT', '/model-providers/openai/credentials', { credentials: { key: 'x' } });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.message).toContain('credentials.api_key');
  });

  it('adds, lists masked, validates, rotates and deletes; encrypted at rest', async () => {
    const add = await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: OPENAI_KEY, base_url: `${openai.url}/v1` },
    });
    expect(add.status).toBe(200);
    expect(add.body).toMatchObject({
      provider: 'openai',
      validated: true,
      credentials: { api_key: 'sk-…6789', base_url: `${openai.url}/v1` },
    });
    expect(openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    const row = await stack.db.modelProviderCredential.findFirstOrThrow({ where: { tenant_id: stack.demo!.tenantId, provider: 'openai' } });
    expect(row.encrypted_config).not.toContain(OPENAI_KEY);

    const gem = await consoleApi('PUT', '/model-providers/google/credentials', {
      credentials: { api_key: 'AIza-tenant-gemini-123', base_url: `${gemini.url}/v1beta` },
    });
    expect(gem.status).toBe(200);

    const listed = (await consoleApi('GET', '/model-providers')).body.data as { provider: string; credentials: unknown; billed: boolean }[];
    expect(listed.find((p) => p.provider === 'openai')).toMatchObject({ credentials: { api_key: 'sk-…6789' }, billed: false });
    expect(listed.find((p) => p.provider === 'google')).toMatchObject({ credentials: { api_key: 'AIz…-123' }, billed: false });
    expect(JSON.stringify(listed)).not.toContain(OPENAI_KEY);

    expect((await consoleApi('POST', '/model-providers/openai/credentials/validate', {})).body).toEqual({
      provider: 'openai',
      valid: true,
    });
    const rotated = await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: ROTATED_KEY, base_url: `${openai.url}/v1` },
    });
    expect(rotated.status).toBe(200);
    expect(openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ROTATED_KEY}`);

    // A third provider, added then deleted.
    await consoleApi('PUT', '/model-providers/ollama/credentials', {
      credentials: { base_url: 'http://127.0.0.1:9/api' },
      validate: false,
    });
    expect((await consoleApi('DELETE', '/model-providers/ollama/credentials')).status).toBe(204);
    expect((await consoleApi('DELETE', '/model-providers/ollama/credentials')).status).toBe(404);
    expect((await consoleApi('GET', '/model-providers/nope/models')).status).toBe(404);
  });

  it('runs two agents on two providers of one workspace, priced from the catalogue; own credentials unbilled, hosted billed', async () => {
    const tenantId = stack.demo!.tenantId;
    const onOpenAi = await createAgentApp(stack.db, tenantId, { name: 'On OpenAI', soul: soulOn('openai', 'gpt-4o-mini') });
    const onGemini = await createAgentApp(stack.db, tenantId, { name: 'On Gemini', soul: soulOn('google', 'gemini-2.0-flash') });
    const onClaude = await createAgentApp(stack.db, tenantId, {
      name: 'On Claude',
      soul: soulOn('anthropic', 'claude-3-5-haiku-20241022'),
    });
    const poolBefore = (await stack.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenantId } })).quota_used;

    for (const [app, provider, model, fake] of [
      [onOpenAi, 'openai', 'gpt-4o-mini', openai],
      [onGemini, 'google', 'gemini-2.0-flash', gemini],
      [onClaude, 'anthropic', 'claude-3-5-haiku-20241022', anthropic],
    ] as const) {
      const { status, frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:hello Hi!', user: 'models-user' });
      expect(status).toBe(200);
      const events = frames.map((f) => f.event);
      expect(events.slice(-2), JSON.stringify(frames.at(-1))).toEqual(['message', 'message_end']);
      expect(frames.find((f) => f.event === 'message')!.data.answer).toBe('Hello there!');
      const usage = (frames.at(-1)!.data as { metadata: { usage: Record<string, string | number> } }).metadata.usage;
      const prices = BUILTIN_CATALOGUE.find(provider, model)!.prices;
      const expected = priceUsage(
        { prompt_tokens: USAGE.prompt, completion_tokens: USAGE.completion, cached_prompt_tokens: USAGE.cached },
        prices,
      );
      expect(usage).toMatchObject({
        prompt_tokens: USAGE.prompt,
        completion_tokens: USAGE.completion,
        total_price: expected.usage.total_price,
      });
      expect(usage.prompt_unit_price).toBe(prices.input);
      const sent = fake.requests.at(-1)!;
      if (provider === 'openai') expect(sent.headers.authorization).toBe(`Bearer ${ROTATED_KEY}`);
      if (provider === 'anthropic') expect(sent.headers['x-api-key']).toBe(HOSTED_KEY);
    }
    // Only the hosted (Anthropic) call moved credits.
    const claudePrice = priceUsage(
      { prompt_tokens: USAGE.prompt, completion_tokens: USAGE.completion, cached_prompt_tokens: USAGE.cached },
      BUILTIN_CATALOGUE.find('anthropic', 'claude-3-5-haiku-20241022')!.prices,
    );
    const poolAfter = (await stack.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenantId } })).quota_used;
    expect(poolAfter - poolBefore).toBe(claudePrice.credits);
  });
});

describe('fail fast: the model section is checked at save, publish and before a turn', () => {
  const draft = async (config: unknown) => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: `ff-${crypto.randomUUID().slice(0, 8)}` });
    return consoleApi('PUT', `/apps/${app.appId}/agent/draft`, { config });
  };
  const base = () => structuredClone(demoSoulConfig()) as unknown as Record<string, Record<string, unknown>>;

  it('a turn whose provider refuses ends with the code a user can act on, not a generic completion error', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Refused by Claude',
      soul: soulOn('anthropic', 'claude-3-5-haiku-20241022'),
    });
    for (const [scenario, code, status] of [
      ['SCN:401', 'provider_auth_failed', 400],
      ['SCN:429', 'provider_rate_limited', 429],
      ['SCN:overflow', 'context_window_exceeded', 400],
    ] as const) {
      const { frames } = await chat(stack.apiUrl, app.apiKey, { query: `${scenario} Hi!`, user: 'models-refused' });
      const error = frames.find((f) => f.event === 'error')?.data;
      expect(error, `${scenario}: ${JSON.stringify(frames.at(-1))}`).toMatchObject({ code, status });
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: error!.message_id as string } });
      expect(msg.status).toBe('failed');
      expect(JSON.stringify(msg.error)).not.toContain(HOSTED_KEY);
    }
  });

  it('refuses an unknown provider, a model not in the catalogue, a provider without credentials, settings out of bounds', async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ provider: 'openai-ish', model: 'gpt-4o' }, 'model.provider', /unknown model provider 'openai-ish'/],
      [{ provider: 'openai', model: 'gpt-9-imaginary' }, 'model.model', /not a openai model of the catalogue/],
      [{ provider: 'bedrock', model: 'anthropic.claude-3-5-haiku-20241022-v1:0' }, 'model.provider', /no credentials for this workspace/],
      [
        { provider: 'anthropic', model: 'claude-3-5-haiku-20241022', model_settings: { max_tokens: 999_999 } },
        'model.model_settings.max_tokens',
        /above the 8192 output tokens/,
      ],
      [
        { provider: 'anthropic', model: 'claude-3-5-haiku-20241022', model_settings: { temperature: 1.5 } },
        'model.model_settings.temperature',
        /from 0 to 1/,
      ],
      [{ provider: 'anthropic', model: 'claude-3-5-haiku-20241022', context_window: 10_000_000 }, 'model.context_window', /context window/],
      [
        { provider: 'anthropic', model: 'claude-3-5-haiku-20241022', model_settings: { thinking_budget: 2048 } },
        'model.model_settings.thinking_budget',
        /not a reasoning model/,
      ],
      [
        { provider: 'anthropic', model: 'claude-3-7-sonnet-20250219', model_settings: { thinking_budget: 100 } },
        'model.model_settings.thinking_budget',
        /at least 1024/,
      ],
    ];
    for (const [model, path, message] of cases) {
      const s = base();
      s.model = model;
      const res = await draft(s);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.code).toBe('invalid_agent_config');
      expect(res.body.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path, message: expect.stringMatching(message) })]));
    }
    const ok = base();
    ok.model = { provider: 'anthropic', model: 'claude-3-5-haiku-20241022', model_settings: { max_tokens: 4096 } };
    expect((await draft(ok)).status).toBe(200);
    const thinking = base();
    thinking.model = {
      provider: 'anthropic',
      model: 'claude-3-7-sonnet-20250219',
      model_settings: { max_tokens: 8192, thinking_budget: 2048 },
    };
    expect((await draft(thinking)).status).toBe(200);
  });

  it('refuses to publish a draft stored before the checks (its provider has no credentials)', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: `pub-${crypto.randomUUID().slice(0, 8)}` });
    const stale = { ...demoSoulConfig(), model: { provider: 'azure', model: 'gpt-4o', model_settings: {} } };
    await stack.db.agentConfigDraft.updateMany({
      where: { agent_id: app.agentId, draft_type: 'DRAFT' },
      data: { config: stale as object },
    });
    const res = await consoleApi('POST', `/apps/${app.appId}/agent/publish`, {});
    expect(res.status).toBe(400);
    expect(res.body.issues).toEqual([
      expect.objectContaining({ path: 'model.provider', message: expect.stringMatching(/no credentials/) }),
    ]);
  });

  it('a text-only model refuses image uploads at save, and /v1/parameters offers none', async () => {
    const s = base();
    s.model = { provider: 'ollama', model: 'llama3.2' };
    s.features = { ...s.features, file_upload: { enabled: true, image_enabled: true, max_files: 3 } };
    await consoleApi('PUT', '/model-providers/ollama/credentials', {
      credentials: { base_url: 'http://127.0.0.1:9/api' },
      validate: false,
    });
    const res = await draft(s);
    expect(res.status).toBe(400);
    expect(res.body.issues).toEqual([
      expect.objectContaining({ path: 'features.file_upload.image_enabled', message: expect.stringMatching(/takes no images/) }),
    ]);

    const textApp = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Text only', soul: soulOn('ollama', 'llama3.2') });
    const visionApp = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Vision',
      soul: soulOn('anthropic', 'claude-3-5-haiku-20241022'),
    });
    const params = async (key: string) =>
      (await (await fetch(`${stack.apiUrl}/v1/parameters?user=u`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        file_upload: { image: { enabled: boolean } };
      };
    expect((await params(textApp.apiKey)).file_upload.image.enabled).toBe(false);
    expect((await params(visionApp.apiKey)).file_upload.image.enabled).toBe(true);
    await consoleApi('DELETE', '/model-providers/ollama/credentials');
  });

  it('a turn on a stored config naming a model the catalogue lacks fails before any model call', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Stale model' });
    const bad = { ...demoSoulConfig(), model: { provider: 'openai', model: 'gpt-9-imaginary', model_settings: {} } };
    await stack.db.agentConfigVersion.update({ where: { id: app.configVersionId }, data: { config_snapshot: bad as object } });
    const before = openai.requests.length;
    const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'hello', user: 'ff' });
    const error = frames.find((f) => f.event === 'error')?.data;
    expect(error).toMatchObject({ code: 'agent_config_invalid' });
    expect(String(error!.message)).toContain('model.model');
    expect(openai.requests.length).toBe(before);
  });
});

describe('the models a workspace sees', () => {
  it('a model declared in the workspace’s own credentials is listed, counts for /v1/parameters, and sizes its runs', async () => {
    const declared = {
      model: 'our-vision-llm',
      label: 'Our vision LLM',
      vision: true,
      context_window: 16_000,
      max_output: 2_000,
      prices: { input: '0.25', output: '0.75', currency: 'USD' },
    };
    const put = await consoleApi('PUT', '/model-providers/openai_compatible/credentials', {
      credentials: { base_url: `${compat.url}/v1`, api_key: 'sk-own-compat-0123456789', models: [declared] },
      validate: false,
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const listed = (await consoleApi('GET', '/model-providers/openai_compatible/models')).body.data as Json[];
    expect(listed.find((m) => m.model === 'our-vision-llm')).toMatchObject({
      label: 'Our vision LLM',
      context_window: 16_000,
      max_output: 2_000,
      features: { vision: true, tool_calls: true },
      prices: { input: '0.25', output: '0.75' },
      custom: true,
    });

    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Own vision model',
      soul: soulOn('openai_compatible', 'our-vision-llm'),
    });
    const params = (await (
      await fetch(`${stack.apiUrl}/v1/parameters?user=u`, { headers: { authorization: `Bearer ${app.apiKey}` } })
    ).json()) as {
      file_upload: { image: { enabled: boolean }; allowed_file_types: string[] };
    };
    expect(params.file_upload.image.enabled).toBe(true);
    expect(params.file_upload.allowed_file_types).toContain('image');

    const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:hello Hi!', user: 'own-model' });
    expect(frames.at(-1)!.event, JSON.stringify(frames.at(-1))).toBe('message_end');
    // The run request carries the declared window, max output and prices (the backend fits prompts and prices cut calls by them).
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: frames.at(-1)!.data.message_id as string } });
    const llm = (run.request as Json).composition.layers.find((l: Json) => l.name === 'llm');
    expect(llm.config).toMatchObject({ context_window: 16_000, max_output: 2_000, prices: declared.prices });
    expect((await consoleApi('DELETE', '/model-providers/openai_compatible/credentials')).status).toBe(204);
  });

  it('a stopped turn’s cut call is billed at the deployment’s override price, on message_end and in the ledger', async () => {
    const soul = AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider: 'demo', model: 'demo-text' } });
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Overridden price', soul });
    const res = await postChat(stack.apiUrl, app.apiKey, { query: '/slow 30 /long 400', user: 'stopper' });
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 10);
    const taskId = head[0]!.data.task_id as string;
    const stopped = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${app.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'stopper' }),
    });
    expect(stopped.status).toBe(200);
    const end = [...head, ...(await reader.read())].at(-1)!;
    expect(end.event).toBe('message_end');
    const usage = (end.data.metadata as { usage: Json }).usage;
    expect(usage.estimated).toBe(true);
    expect([usage.prompt_unit_price, usage.completion_unit_price]).toEqual([OVERRIDE_PRICES.input, OVERRIDE_PRICES.output]);
    const expected = priceUsage({ prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens }, OVERRIDE_PRICES);
    expect(Number(usage.total_price)).toBe(Number(expected.usage.total_price));
    expect(Number(usage.total_price)).toBeGreaterThan(0);
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: taskId } });
    const ledger = await stack.db.creditLedger.findMany({ where: { agent_run_id: run.backend_run_id! } });
    expect(ledger).toHaveLength(1);
    const billed = priceUsage(
      { prompt_tokens: ledger[0]!.prompt_tokens, completion_tokens: ledger[0]!.completion_tokens },
      OVERRIDE_PRICES,
    );
    expect(Number(ledger[0]!.total_price)).toBe(Number(billed.usage.total_price));
  });
});
