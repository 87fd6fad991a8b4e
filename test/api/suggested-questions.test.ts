/**
 * Dify's suggested questions after an answer over HTTP (issue 42, api/service/suggested.ts): the agent's
 * `features.suggested_questions_after_answer` flag as GET /v1/parameters reports it, 403 while it is off, and once on
 * three questions from the agent's model (the demo model's deterministic answer, DEMO_MODEL.md) for the message's own
 * user; the model call is one ledger row under the message's billing id, and a second or concurrent GET is answered
 * from the per-message store without another. Another user's message is 404 (never 403), a turn in flight 409. The
 * studio debugger's twin (GET /console/api/apps/{id}/agent/debug/messages/{id}/suggested-questions, Dify's `{data}`)
 * follows the draft the debugger turn ran on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { consoleClient } from '../support/console-api.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { api } from './helpers.js';

let stack: Stack;
let key: string;
const consoleApi = consoleClient(() => stack);

beforeAll(async () => {
  stack = await startTestStack('api_suggested', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
}, 300_000);
afterAll(async () => stack?.stop());

async function publish(enabled: boolean): Promise<void> {
  const soul = demoSoulConfig();
  soul.features.suggested_questions_after_answer = { enabled };
  const draft = await consoleApi('PUT', `/apps/${stack.demo!.appId}/agent/draft`, { config: soul });
  expect(draft.status, JSON.stringify(draft.body)).toBe(200);
  expect((await consoleApi('POST', `/apps/${stack.demo!.appId}/agent/publish`, { from: 'draft' })).status).toBe(201);
}

async function answered(user: string, query: string): Promise<string> {
  const { frames } = await chat(stack.apiUrl, key, { query, user });
  const end = frames.at(-1)!;
  expect(end.event).toBe('message_end');
  return end.data.message_id as string;
}

const suggested = (messageId: string, user: string) => api(stack.apiUrl, key, 'GET', `/v1/messages/${messageId}/suggested?user=${user}`);
const ledgerRows = (messageId: string) =>
  stack.db.creditLedger.findMany({ where: { billing_request_id: `suggested-questions-${messageId}:0` } });

describe('GET /v1/messages/{id}/suggested', () => {
  it('is refused with 403 app_suggested_questions_after_answer_disabled while the feature is off, and calls no model', async () => {
    await publish(false);
    const params = await api(stack.apiUrl, key, 'GET', '/v1/parameters?user=alice');
    expect((params.body as { suggested_questions_after_answer: unknown }).suggested_questions_after_answer).toEqual({ enabled: false });
    const messageId = await answered('alice', 'What is Temporal?');
    const res = await suggested(messageId, 'alice');
    expect(res).toMatchObject({ status: 403, body: { code: 'app_suggested_questions_after_answer_disabled', status: 403 } });
    expect(await ledgerRows(messageId)).toEqual([]);
  });

  it("answers three questions from the agent's model once on, billed once, a second GET from the store", async () => {
    await publish(true);
    const params = await api(stack.apiUrl, key, 'GET', '/v1/parameters?user=bob');
    expect((params.body as { suggested_questions_after_answer: unknown }).suggested_questions_after_answer).toEqual({ enabled: true });
    const messageId = await answered('bob', 'How do durable workflows work?');

    const first = await suggested(messageId, 'bob');
    expect(first).toMatchObject({ status: 200 });
    expect(first.body).toEqual({
      result: 'success',
      data: ['Tell me more about: How do durable workflows work?', 'Can you give an example?', 'What should I ask next?'],
    });
    // The agent's model, through the gateway's ledger (system-hosted demo model: billable), under the message's id.
    const rows = await ledgerRows(messageId);
    expect(rows).toEqual([expect.objectContaining({ provider: 'demo', model: 'demo-chat', billable: true })]);
    expect(rows[0]!.prompt_tokens).toBeGreaterThan(0);
    expect(rows[0]!.completion_tokens).toBeGreaterThan(0);

    // Stored: the same answer, no second ledger row, even after the row's questions changed (proof it is the store).
    await stack.db.messageSuggestedQuestion.update({ where: { message_id: messageId }, data: { questions: ['from the store', 'b', 'c'] } });
    const second = await suggested(messageId, 'bob');
    expect(second).toMatchObject({ status: 200, body: { result: 'success', data: ['from the store', 'b', 'c'] } });
    expect(await ledgerRows(messageId)).toHaveLength(1);
    expect(await stack.db.creditLedger.count({ where: { billing_request_id: { startsWith: `suggested-questions-${messageId}` } } })).toBe(
      1,
    );
  });

  it('agrees on one answer and one ledger row when GETs race on a fresh message', async () => {
    await publish(true);
    const messageId = await answered('carol', 'Race me');
    const all = await Promise.all([1, 2, 3, 4].map(() => suggested(messageId, 'carol')));
    expect(all.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const bodies = all.map((r) => JSON.stringify(r.body));
    expect(new Set(bodies).size).toBe(1);
    expect((all[0]!.body as { data: string[] }).data).toHaveLength(3);
    expect(await ledgerRows(messageId)).toHaveLength(1);
    expect(await stack.db.messageSuggestedQuestion.count({ where: { message_id: messageId } })).toBe(1);
  });

  it("answers 404 message_not_exists for another user's message, an unknown one and a deleted conversation's", async () => {
    await publish(true);
    const messageId = await answered('dave', 'Only mine');
    expect(await suggested(messageId, 'eve')).toMatchObject({ status: 404, body: { code: 'message_not_exists' } });
    expect(await suggested(crypto.randomUUID(), 'dave')).toMatchObject({ status: 404, body: { code: 'message_not_exists' } });
    expect(await ledgerRows(messageId)).toEqual([]);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect((await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${msg.conversation_id}?user=dave`)).status).toBe(204);
    expect(await suggested(messageId, 'dave')).toMatchObject({ status: 404, body: { code: 'message_not_exists' } });
    // `user` is required, and the id must be one.
    expect(await api(stack.apiUrl, key, 'GET', `/v1/messages/${messageId}/suggested`)).toMatchObject({
      status: 400,
      body: { code: 'invalid_param' },
    });
    expect(await suggested('not-a-uuid', 'dave')).toMatchObject({ status: 400, body: { code: 'invalid_param' } });
  });

  it('answers 409 message_not_finished while the turn waits for a human', async () => {
    await publish(true);
    const { frames } = await chat(stack.apiUrl, key, { query: '/ask What should I call you?', user: 'frank' });
    expect(frames.map((f) => f.event)).toContain('human_input_required');
    const messageId = frames.at(-1)!.data.message_id as string;
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: messageId } })).status).toBe('paused');
    expect(await suggested(messageId, 'frank')).toMatchObject({ status: 409, body: { code: 'message_not_finished' } });
    expect(await ledgerRows(messageId)).toEqual([]);
  });
});

describe('GET /v1/messages/{id}/suggested on used-up credits', () => {
  it("answers 400 provider_quota_exceeded when the tenant's credit pool is used up, and bills nothing", async () => {
    await publish(true);
    const messageId = await answered('heidi', 'Credits please');
    const tenantId = stack.demo!.tenantId;
    // The demo tenant's pool (if any) used up, then put back as it was.
    const before = await stack.db.creditPool.findUnique({ where: { tenant_id: tenantId } });
    await stack.db.creditPool.upsert({
      where: { tenant_id: tenantId },
      create: { tenant_id: tenantId, quota_limit: 10n, quota_used: 10n },
      update: { quota_used: before?.quota_limit ?? 10n },
    });
    try {
      expect(await suggested(messageId, 'heidi')).toMatchObject({ status: 400, body: { code: 'provider_quota_exceeded' } });
      expect(await ledgerRows(messageId)).toEqual([]);
      expect(await stack.db.messageSuggestedQuestion.count({ where: { message_id: messageId } })).toBe(0);
    } finally {
      if (before) await stack.db.creditPool.update({ where: { tenant_id: tenantId }, data: { quota_used: before.quota_used } });
      else await stack.db.creditPool.delete({ where: { tenant_id: tenantId } });
    }
    // With credits again, the same message gets its questions.
    expect((await suggested(messageId, 'heidi')).status).toBe(200);
  });
});

describe('GET /console/api/apps/{app_id}/agent/debug/messages/{id}/suggested-questions', () => {
  async function saveDraft(enabled: boolean): Promise<void> {
    const soul = demoSoulConfig();
    soul.features.suggested_questions_after_answer = { enabled };
    expect((await consoleApi('PUT', `/apps/${stack.demo!.appId}/agent/draft`, { config: soul })).status).toBe(200);
  }
  async function debugAnswer(query: string): Promise<string> {
    const res = await fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/agent/debug/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query, draft: 'draft' }),
    });
    expect(res.status).toBe(200);
    const end = (await readFrames(res)).at(-1)!;
    expect(end.event).toBe('message_end');
    return end.data.message_id as string;
  }
  const debugSuggested = (messageId: string) =>
    consoleApi('GET', `/apps/${stack.demo!.appId}/agent/debug/messages/${messageId}/suggested-questions`);

  it("follows the debugger turn's draft: 403 while off, then three questions billed once", async () => {
    // Published on, the shared draft off: the debugger tries the draft.
    await publish(true);
    await saveDraft(false);
    const messageId = await debugAnswer('Draft question');
    expect(await debugSuggested(messageId)).toMatchObject({ status: 403, body: { code: 'app_suggested_questions_after_answer_disabled' } });
    await saveDraft(true);
    const first = await debugSuggested(messageId);
    expect(first).toEqual({
      status: 200,
      body: { data: ['Tell me more about: Draft question', 'Can you give an example?', 'What should I ask next?'] },
    });
    expect(await debugSuggested(messageId)).toEqual(first);
    expect(await ledgerRows(messageId)).toHaveLength(1);
  });

  it("answers 404 for an end user's message: the debugger's route sees only the account's debugger turns", async () => {
    await publish(true);
    await saveDraft(true);
    const messageId = await answered('grace', 'An end user asks');
    expect(await debugSuggested(messageId)).toMatchObject({ status: 404, body: { code: 'message_not_exists' } });
    // And the service route never serves a debugger turn.
    const debugId = await debugAnswer('Console only');
    expect(await suggested(debugId, 'grace')).toMatchObject({ status: 404, body: { code: 'message_not_exists' } });
  });
});
