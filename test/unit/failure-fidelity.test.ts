/**
 * Failures reach the client as the seed says (issue 18 item 6): a lost binding with the seed's message,
 * and the gateway's credit exhaustion (429 `agent_llm_quota_exceeded`) as a quota, not a rate limit.
 */
import type { LanguageModelV3CallOptions } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { ModelCallError } from '../../agent-backend/errors.js';
import { InnerLlmModel } from '../../agent-backend/model/inner-llm-model.js';
import { classifyFailure } from '../../activities/classify-failure.js';

const target = {
  runId: 'run-1',
  provider: 'demo',
  model: 'demo-chat',
  caller: { tenant_id: 't', user_id: 'u', user_from: 'end-user' as const, app_id: 'a', invoke_from: 'service-api' },
};
const call: LanguageModelV3CallOptions = { prompt: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] };

/** The inner endpoint answering every call with one HTTP status and JSON body. */
function modelAnswering(status: number, body: unknown): InnerLlmModel {
  const fetchImpl = (async () =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })) as typeof fetch;
  return new InnerLlmModel(target, 'http://inner', 'key', fetchImpl, { budgetMs: 0, baseMs: 1, maxMs: 1 });
}

async function failureOf(model: InnerLlmModel): Promise<ModelCallError> {
  const err = await model.doStream(call).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelCallError);
  return err as ModelCallError;
}

describe('a failed run as the client sees it', () => {
  it("binding_lost gets the seed's message", () => {
    expect(classifyFailure({ error: 'workspace ws-1 not found', reason: 'binding_lost' })).toEqual({
      code: 'completion_request_error',
      status: 400,
      message: 'The retained agent working environment is no longer available.',
    });
  });

  it('credit exhaustion at the gateway reaches the client as provider_quota_exceeded, not rate_limit_error', async () => {
    const err = await failureOf(
      modelAnswering(429, { code: 'agent_llm_quota_exceeded', message: "the tenant's model credits are used up" }),
    );
    expect(err.errorType).toBe('agent_llm_quota_exceeded');
    // run-task.ts passes a ModelCallError's errorType on as the run_failed reason.
    expect(classifyFailure({ error: err.message, reason: err.errorType })).toMatchObject({ code: 'provider_quota_exceeded', status: 400 });
  });

  it("a provider's own rate limit stays a rate limit", async () => {
    const err = await failureOf(modelAnswering(429, { code: 'too_many_requests', message: 'slow down' }));
    expect(err.errorType).toBe('InvokeRateLimitError');
    expect(classifyFailure({ error: err.message, reason: err.errorType })).toMatchObject({ code: 'rate_limit_error', status: 429 });
  });
});
