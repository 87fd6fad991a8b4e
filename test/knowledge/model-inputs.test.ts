/**
 * Issue 42's inspector context view on the real stack: a turn with a tool call and knowledge records what each model
 * request was sent (the api's inner LLM endpoint), and GET …/agent/messages/{id}/model-inputs shows the system prompt,
 * the user's text, the knowledge block, the assistant's tool call and the tool result, each with its token count.
 * Another tenant's console key reads it as missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelInputsResponse } from '../../api/console/studio.js';
import { ensureAccount, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let strangerKey: string;

const call = async (path: string, method = 'GET', body?: unknown, key = stack.demo!.consoleKey) => {
  const res = await fetch(`${stack.apiUrl}/console/api${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reads the JSON answers field by field
  return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, any> };
};

beforeAll(async () => {
  stack = await startTestStack('model_inputs');
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
}, 120_000);
afterAll(async () => stack?.stop());

describe('the model inputs of a turn', () => {
  it('shows system, user, knowledge, tool call and tool result parts with token counts', async () => {
    const ds = await call('/datasets', 'POST', { name: 'Office', embedding: { provider: 'demo', model: 'demo-embedding' } });
    expect(ds.status).toBe(201);
    const doc = await call(`/datasets/${ds.body.id}/documents`, 'POST', { name: 'office.md', text: 'The canteen closes at three.' });
    expect(doc.status).toBe(201);
    const soul = demoSoulConfig();
    // Threshold 0 with embeddings: the eager retrieval returns the passage for any query.
    soul.knowledge = { enabled: true, dataset_ids: [ds.body.id], top_k: 3, score_threshold: 0, search_tool: false };
    const app = `/apps/${stack.demo!.appId}`;
    expect((await call(`${app}/agent/draft`, 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
    expect((await call(`${app}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);

    const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: '/calc 6*7', user: 'ada', inputs: {} });
    const end = turn.frames.find((f) => f.event === 'message_end')!;
    expect(end).toBeDefined();
    const messageId = end.data.message_id as string;

    const got = await call(`${app}/agent/messages/${messageId}/model-inputs`);
    expect(got.status).toBe(200);
    expect(ModelInputsResponse.safeParse(got.body).error).toBeUndefined();
    const calls = got.body.data as {
      call_index: number;
      total_tokens: number;
      parts: { kind: string; name: string | null; text: string; tokens: number }[];
    }[];
    expect(calls.map((c) => c.call_index)).toEqual([0, 1]);
    const kinds = calls[1]!.parts.map((p) => p.kind);
    for (const k of ['system', 'user', 'knowledge', 'assistant', 'tool_result']) expect(kinds, k).toContain(k);
    expect(calls[0]!.parts.map((p) => p.kind)).not.toContain('tool_result');
    for (const p of calls[1]!.parts) expect(p.tokens, p.kind).toBeGreaterThan(0);
    const of = (k: string) => calls[1]!.parts.find((p) => p.kind === k)!;
    expect(of('user').text).toBe('/calc 6*7');
    expect(of('knowledge').text).toContain('The canteen closes at three.');
    expect(of('assistant').text).toContain('6*7');
    expect(of('tool_result').text).toContain('42');
    expect(calls[1]!.total_tokens).toBe(calls[1]!.parts.reduce((n, p) => n + p.tokens, 0));
    // No credential of the demo provider or the api is in what is kept.
    expect(JSON.stringify(got.body)).not.toMatch(/Bearer|api_key|sk-/);

    expect((await call(`${app}/agent/messages/${messageId}/model-inputs`, 'GET', undefined, strangerKey)).status).toBe(404);
    expect((await call(`${app}/agent/messages/00000000-0000-4000-8000-000000000000/model-inputs`)).status).toBe(404);
  });
});
