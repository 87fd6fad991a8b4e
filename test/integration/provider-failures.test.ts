/**
 * What a turn shows when its model provider fails (issue 41 items 2 and 3), on the whole stack (api + worker +
 * agent backend + gateway + the provider package) against the provider's wire-format fake: a provider that stalls
 * ends the turn in the configured time with `provider_timeout`, the partial answer kept and the usage estimated as
 * for a cut call; a credentials error that is not a 401 (Gemini's 400 `API_KEY_INVALID`) is `provider_auth_failed`;
 * a private base URL is refused when saved, whatever `validate` says; a system-hosted Ollama (free) is not billed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeProvider, type FakeProvider } from '../llm/providers/fake-providers.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { consoleClient } from '../support/console-api.js';

const FIRST_TOKEN_MS = 500;
const IDLE_MS = 500;
let stack: Stack;
let anthropic: FakeProvider;
let gemini: FakeProvider;
let ollama: FakeProvider;

beforeAll(async () => {
  [anthropic, gemini, ollama] = await Promise.all([
    startFakeProvider('anthropic'),
    startFakeProvider('gemini'),
    startFakeProvider('ollama'),
  ]);
  stack = await startTestStack('provider-failures', {
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      // The deployment's own endpoints (these variables) are trusted; a workspace's base_url is guarded.
      ANTHROPIC_API_KEY: 'sk-ant-failures-0123456789',
      ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
      GOOGLE_GENERATIVE_AI_API_KEY: 'AIza-failures-0123456789',
      GOOGLE_BASE_URL: `${gemini.url}/v1beta`,
      OLLAMA_BASE_URL: `${ollama.url}/api`,
      MODEL_ALLOW_PRIVATE_NETWORK: false,
      MODEL_FIRST_TOKEN_TIMEOUT_MS: FIRST_TOKEN_MS,
      MODEL_IDLE_TIMEOUT_MS: IDLE_MS,
    },
  });
}, 240_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all([anthropic, gemini, ollama].map((f) => f?.close()));
});

const consoleApi = consoleClient(() => stack);

const soul = AgentSoulConfig.parse({
  prompt: { system_prompt: 'Be brief.' },
  model: { provider: 'anthropic', model: 'claude-3-5-haiku-20241022' },
});

describe('a provider that stalls', () => {
  it('mid-answer: the turn ends at the idle timeout with provider_timeout, the partial answer kept, usage estimated', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Stalls mid-answer', soul });
    const started = Date.now();
    const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:stallmid Hi', user: 'stall' });
    const elapsed = Date.now() - started;
    const error = frames.find((f) => f.event === 'error')!;
    expect(error.data).toMatchObject({ code: 'provider_timeout', status: 504 });
    expect(String(error.data.message)).toContain('provider_timeout');
    // The words streamed before the stall reached the client and stay the message's answer.
    const streamed = frames
      .filter((f) => f.event === 'agent_message')
      .map((f) => f.data.answer)
      .join('');
    expect(streamed).toBe('Hello ');
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: error.data.message_id as string } });
    expect(msg).toMatchObject({ status: 'failed', error_code: 'provider_timeout', answer: 'Hello ' });
    // Billed as a cut call: estimated, in the ledger and on the message alike.
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: msg.id } });
    const ledger = await stack.db.creditLedger.findMany({ where: { agent_run_id: run.backend_run_id! } });
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ estimated: true });
    expect(ledger[0]!.completion_tokens).toBeGreaterThan(0);
    expect(msg.total_tokens).toBe(ledger[0]!.prompt_tokens + ledger[0]!.completion_tokens);
    expect((error.data.metadata as { usage: { estimated?: boolean } }).usage.estimated).toBe(true);
    // Ended by the idle limit, not by the run's wall clock (minutes).
    expect(elapsed).toBeLessThan(30_000);
  }, 120_000);

  it('before its first token: retried, then the turn ends with provider_timeout and no answer', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Never answers', soul });
    const before = anthropic.requests.length;
    const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:stall Hi', user: 'stall' });
    expect(frames.find((f) => f.event === 'error')!.data).toMatchObject({ code: 'provider_timeout' });
    expect(frames.filter((f) => f.event === 'agent_message')).toEqual([]);
    expect(anthropic.requests.length - before).toBe(3);
  }, 120_000);
});

describe('credentials errors that are not a 401', () => {
  it('Gemini’s 400 INVALID_ARGUMENT with reason API_KEY_INVALID ends the turn provider_auth_failed, not completion_request_error', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Gemini with a bad key',
      soul: AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider: 'google', model: 'gemini-2.0-flash' } }),
    });
    gemini.respondNext({
      status: 400,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        error: {
          code: 400,
          message: 'API key not valid. Please pass a valid API key.',
          status: 'INVALID_ARGUMENT',
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }],
        },
      }),
    });
    const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'Hi', user: 'bad-key' });
    const error = frames.find((f) => f.event === 'error')!;
    expect(error.data).toMatchObject({ code: 'provider_auth_failed', status: 400 });
    expect(String(error.data.message)).toContain('credentials');
  }, 60_000);
});

describe('a workspace’s base_url', () => {
  const PRIVATE = [
    'http://127.0.0.1:11434/api',
    'http://localhost:8080/v1',
    'http://169.254.169.254/latest',
    'http://[::1]:8080/v1',
    'http://0x7f.1/v1',
    'http://10.0.0.7/v1',
    'http://[::ffff:192.168.1.1]/v1',
    // Four more of the issue 41 probe's spellings: decimal loopback, the unspecified address, CGNAT, AWS's IPv6 metadata.
    'http://2130706433:8080/v1',
    'http://0.0.0.0:11434/v1',
    'http://100.64.0.1/v1',
    'http://[fd00:ec2::254]/latest',
  ];
  it.each(PRIVATE)('%s is refused when saved with validate:false (and with validate:true, before any call)', async (url) => {
    for (const validate of [false, true]) {
      const res = await consoleApi('PUT', '/model-providers/openai/credentials', {
        credentials: { api_key: 'sk-tenant-0123456789', base_url: url },
        validate,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.code).toBe('invalid_base_url');
      expect(res.body.message).toContain('MODEL_ALLOW_PRIVATE_NETWORK');
    }
    const listed = (await consoleApi('GET', '/model-providers')).body.data.find((p: { provider: string }) => p.provider === 'openai');
    expect(listed.credentials).toBeNull();
  });

  it('user:password@ is refused whatever the network; a public address is saved without a call', async () => {
    const creds = await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: 'sk-tenant-0123456789', base_url: 'https://user:secret@8.8.8.8/v1' },
      validate: false,
    });
    expect(creds).toMatchObject({ status: 400, body: { code: 'invalid_base_url' } });
    expect(JSON.stringify(creds.body)).not.toContain('secret');
    const ok = await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: 'sk-tenant-0123456789', base_url: 'https://8.8.8.8/v1' },
      validate: false,
    });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await consoleApi('DELETE', '/model-providers/openai/credentials')).status).toBe(204);
  });
});

describe('a system-hosted Ollama costs nothing', () => {
  it('is listed not billed, and a tenant whose credit pool is used up still gets its answers (recorded unbilled)', async () => {
    const listed = (await consoleApi('GET', '/model-providers')).body.data as {
      provider: string;
      billed: boolean;
      system_hosted: boolean;
    }[];
    expect(listed.find((p) => p.provider === 'ollama')).toMatchObject({ system_hosted: true, billed: false });
    expect(listed.find((p) => p.provider === 'anthropic')).toMatchObject({ system_hosted: true, billed: true });

    const tenant = await stack.db.tenant.create({ data: { name: 'pool used up' } });
    await stack.db.creditPool.create({ data: { tenant_id: tenant.id, quota_limit: 10n, quota_used: 10n } });
    const local = await createAgentApp(stack.db, tenant.id, {
      name: 'On Ollama',
      soul: AgentSoulConfig.parse({ prompt: { system_prompt: 'Be brief.' }, model: { provider: 'ollama', model: 'llama3.2' } }),
    });
    const { frames } = await chat(stack.apiUrl, local.apiKey, { query: 'SCN:hello Hi', user: 'local' });
    expect(frames.find((f) => f.event === 'message')?.data.answer, JSON.stringify(frames.at(-1))).toBe('Hello there!');
    const ledger = await stack.db.creditLedger.findMany({ where: { tenant_id: tenant.id } });
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ billable: false, credits: 0n });
    const pool = await stack.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenant.id } });
    expect(pool.quota_used).toBe(10n);
    // A billed provider is still refused for that tenant.
    const billed = await createAgentApp(stack.db, tenant.id, { name: 'On Anthropic', soul });
    const refused = await chat(stack.apiUrl, billed.apiKey, { query: 'SCN:hello Hi', user: 'local' });
    expect(refused.frames.find((f) => f.event === 'error')?.data).toMatchObject({ code: 'provider_quota_exceeded' });
  }, 90_000);
});
