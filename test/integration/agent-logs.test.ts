/**
 * Per-iteration usage (issue 18) and Dify's agent log: every model request of a turn is recorded with its tokens,
 * price and latency; each thought row names the request that produced it; tool rows keep their time cost and
 * error. GET /console/api/apps/{app_id}/agent/logs groups them into iterations whose tokens add up to the message's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_RESPONSES } from '../../api/openapi/console.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startTestStack('agent_logs');
});
afterAll(async () => stack?.stop());

const logs = (appId: string, q: Record<string, string>, key = stack.demo!.consoleKey) =>
  fetch(`${stack.apiUrl}/console/api/apps/${appId}/agent/logs?${new URLSearchParams(q)}`, { headers: { authorization: `Bearer ${key}` } });

interface Iteration {
  call_index: number | null;
  tokens: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_price: string;
  latency: number | null;
  thought: string;
  tool_calls: { status: string; error: string | null; time_cost: number; tool_name: string; tool_input: unknown; tool_output: unknown }[];
}

async function turn(query: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query, user: 'logs-user' });
  expect(status).toBe(200);
  const end = frames.find((f) => f.event === 'message_end');
  expect(end, JSON.stringify(frames.at(-1))).toBeDefined();
  return { messageId: String(end!.data.message_id), conversationId: String(end!.data.conversation_id), frames };
}

describe('agent log: one iteration per model request with its own usage', () => {
  it('a tool turn has two iterations: the tool call with its time cost, then the answer; tokens add up', async () => {
    const { messageId, conversationId } = await turn('/calc 6*7');
    const res = await logs(stack.demo!.appId, { conversation_id: conversationId, message_id: messageId });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { meta: Record<string, unknown>; iterations: Iteration[] };
    // The shape the OpenAPI document gives it (api/openapi/console.ts).
    expect(CONSOLE_RESPONSES.AgentLogResponse.safeParse(body).error).toBeUndefined();
    expect(body.meta).toMatchObject({ status: 'success', executor: 'end_user', agent_mode: 'function_call', iterations: 2 });
    const [first, second] = body.iterations;
    expect(first.call_index).toBe(0);
    expect(second.call_index).toBe(1);
    expect(first.tool_calls).toHaveLength(1);
    expect(first.tool_calls[0]).toMatchObject({
      status: 'success',
      error: null,
      tool_name: 'calculator',
      tool_input: { expression: '6*7' },
    });
    expect(JSON.stringify(first.tool_calls[0].tool_output)).toContain('42');
    expect(first.tool_calls[0].time_cost).toBeGreaterThanOrEqual(0);
    expect(second.tool_calls).toHaveLength(0);
    for (const it of body.iterations) {
      expect(it.prompt_tokens).toBeGreaterThan(0);
      expect(it.tokens).toBe(it.prompt_tokens + it.completion_tokens);
      expect(Number(it.total_price)).toBeGreaterThan(0);
      expect(it.latency).toBeGreaterThan(0);
    }
    // The second request carries the first one's exchange: its prompt is longer.
    expect(second.prompt_tokens).toBeGreaterThan(first.prompt_tokens);

    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(first.tokens + second.tokens).toBe(msg.total_tokens);
    expect(first.prompt_tokens + second.prompt_tokens).toBe(msg.message_tokens);
    // Stored once per request, whatever the number of commits.
    expect(await stack.db.messageModelCall.count({ where: { message_id: messageId } })).toBe(2);
    const rows = await stack.db.messageAgentThought.findMany({ where: { message_id: messageId } });
    expect(rows.filter((r) => r.kind === 'tool').map((r) => r.call_index)).toEqual([0]);
  });

  it('a failing tool call is an error iteration entry', async () => {
    const { messageId, conversationId } = await turn('/tool calculator {"expression":"1/"}');
    const body = (await (await logs(stack.demo!.appId, { conversation_id: conversationId, message_id: messageId })).json()) as {
      iterations: Iteration[];
    };
    const call = body.iterations[0].tool_calls[0];
    expect(call.status).toBe('error');
    expect(call.error).toMatch(/Cannot evaluate/);
  });

  it('a plain turn is one iteration whose tokens are the message’s', async () => {
    const { messageId, conversationId } = await turn('Hello there');
    const body = (await (await logs(stack.demo!.appId, { conversation_id: conversationId, message_id: messageId })).json()) as {
      iterations: Iteration[];
    };
    expect(body.iterations).toHaveLength(1);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(body.iterations[0].tokens).toBe(msg.total_tokens);
  });

  it('answers 404 for another conversation’s message and 400 for a malformed id; needs a console key', async () => {
    const { messageId } = await turn('Another hello');
    const other = await logs(stack.demo!.appId, { conversation_id: '00000000-0000-4000-8000-000000000000', message_id: messageId });
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ code: 'message_not_found' });
    const bad = await logs(stack.demo!.appId, { conversation_id: 'nope', message_id: messageId });
    expect(bad.status).toBe(400);
    expect((await logs(stack.demo!.appId, { conversation_id: 'x', message_id: 'y' }, 'wrong-key')).status).toBe(401);
  });
});
