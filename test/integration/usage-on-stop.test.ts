/**
 * A stopped turn reports what its model calls cost (issue 18 item 3; docs/seeds/001: cancelled runs carry
 * usage). The model call the stop cut never reported usage: its tokens are estimated with a tokenizer,
 * flagged `estimated`, and billed exactly once under the call's billing id (`<run id>:<call index>`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('usage-on-stop', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

interface UsageOut {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  total_price: string;
  estimated?: boolean;
  time_to_generate?: number | null;
}

describe('usage of a stopped turn', () => {
  it('counts the cut model call (estimated) and bills it once', async () => {
    const res = await postChat(stack.apiUrl, key, { query: '/slow 30 /long 400', user: 'stopper' });
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 10);
    const taskId = head[0]!.data.task_id as string;
    const stopped = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'stopper' }),
    });
    expect(stopped.status).toBe(200);
    const frames = [...head, ...(await reader.read())];
    const end = frames.at(-1)!;
    expect(end.event).toBe('message_end');
    const usage = (end.data.metadata as { usage: UsageOut }).usage;
    const words = (frames.find((f) => f.event === 'message')!.data.answer as string).trim().split(/\s+/).length;
    expect(words).toBeLessThan(400);

    // The prompt was sent and at least the streamed words were generated: neither is zero any more.
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThanOrEqual(words);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    expect(Number(usage.total_price)).toBeGreaterThan(0);
    expect(usage.estimated).toBe(true);
    expect(usage.time_to_generate).toBeGreaterThan(0);

    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect([msg.status, msg.total_tokens]).toEqual(['stopped', usage.total_tokens]);
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: taskId } });
    // One ledger row for the one model call, estimated, charged.
    const ledger = await stack.db.creditLedger.findMany({ where: { agent_run_id: run.backend_run_id! } });
    expect(ledger.map((l) => [l.billing_request_id, l.estimated])).toEqual([[`${run.backend_run_id}:0`, true]]);
    expect(ledger[0]!.completion_tokens).toBeGreaterThanOrEqual(words);
  });
});
