/**
 * Operators find failed turns with one visibility query (issue 34 item 5, docs/operations.md "What to watch"):
 * a failed turn's workflow completes (its result says failed), so `ExecutionStatus = 'Failed'` finds nothing; the
 * TurnStatus and ErrorCode search attributes carry the outcome. Runs the documented queries against the suite's
 * Temporal dev server (registered with every attribute of workflows/search-attributes.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { workflowIdForMessage } from '../../workflows/definitions.js';
import { chat, postChat, FrameReader } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('turn_outcome_search');
  key = stack.demo!.apiKey;
}, 120_000);
afterAll(async () => stack?.stop());

/** Workflow ids a visibility query finds, limited to this stack's task queue (the dev server is shared). */
async function find(query: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const w of stack.temporal.workflow.list({ query: `TaskQueue = '${stack.config.TEMPORAL_TASK_QUEUE}' AND ${query}` }))
    ids.push(w.workflowId);
  return ids.sort();
}

describe('turn outcomes as search attributes', () => {
  it("TurnStatus and ErrorCode find a failed turn that ExecutionStatus = 'Failed' does not; success, stop and a waiting turn have theirs", async () => {
    const ok = await chat(stack.apiUrl, key, { query: 'Hello there', user: 'ops' });
    expect(ok.frames.at(-1)!.event).toBe('message_end');
    const okId = workflowIdForMessage(ok.frames.at(-1)!.data.message_id as string);

    const failed = await chat(stack.apiUrl, key, { query: '/fail InvokeBadRequestError', user: 'ops' });
    const error = failed.frames.at(-1)!;
    expect(error.event).toBe('error');
    const code = error.data.code as string;
    const failedId = workflowIdForMessage(error.data.message_id as string);

    const asked = await chat(stack.apiUrl, key, { query: '/ask Your name?', user: 'ops' });
    const askedId = workflowIdForMessage(asked.frames.at(-1)!.data.message_id as string);

    const res = await postChat(stack.apiUrl, key, { query: '/slow 40 /long 300', user: 'ops' });
    const reader = new FrameReader(res);
    const head = await reader.read((f) => f.event === 'agent_message');
    const taskId = head[0]!.data.task_id as string;
    await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'ops' }),
    });
    await reader.read((f) => f.event === 'message_end' || f.event === 'error');
    const stoppedId = workflowIdForMessage(taskId);

    // Visibility is eventually consistent: poll until the outcomes are indexed.
    await expect.poll(() => find(`TurnStatus = 'failed'`), { timeout: 20_000, interval: 500 }).toEqual([failedId]);
    // The query docs/operations.md gives, with the error code.
    expect(await find(`TurnStatus = 'failed' AND ErrorCode = '${code}'`)).toEqual([failedId]);
    // What operators tried first finds nothing: the failed turn's workflow completed.
    expect(await find(`ExecutionStatus = 'Failed'`)).toEqual([]);
    await expect.poll(() => find(`TurnStatus = 'succeeded'`), { timeout: 20_000, interval: 500 }).toEqual([okId]);
    await expect.poll(() => find(`TurnStatus = 'waiting_for_human'`), { timeout: 20_000, interval: 500 }).toEqual([askedId]);
    await expect.poll(() => find(`TurnStatus = 'stopped'`), { timeout: 20_000, interval: 500 }).toEqual([stoppedId]);
    const described = await stack.temporal.workflow.getHandle(failedId).describe();
    expect(described.status.name).toBe('COMPLETED');
  }, 120_000);
});
