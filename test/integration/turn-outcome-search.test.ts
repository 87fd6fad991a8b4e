/**
 * Operators find failed turns with one visibility query (issue 34 item 5, docs/operations.md "What to watch"): the
 * TurnStatus and ErrorCode search attributes carry the outcome, and (issue 42) a failed turn's workflow ends Failed
 * with its error code as the failure's type, so the UI's badge, its Failures count and `ExecutionStatus = 'Failed'`
 * see it too; a stopped turn ends Cancelled. Runs the documented queries against the suite's
 * Temporal dev server (registered with every attribute of core/protocol/workflow-contract.ts).
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
  it("a failed turn's workflow is FAILED with its code, found by TurnStatus, ErrorCode and ExecutionStatus; success, stop and a waiting turn have theirs", async () => {
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
    // What operators try first finds it too: the failed turn's workflow failed (and nothing else did).
    await expect.poll(() => find(`ExecutionStatus = 'Failed'`), { timeout: 20_000, interval: 500 }).toEqual([failedId]);
    await expect.poll(() => find(`TurnStatus = 'succeeded'`), { timeout: 20_000, interval: 500 }).toEqual([okId]);
    await expect.poll(() => find(`TurnStatus = 'waiting_for_human'`), { timeout: 20_000, interval: 500 }).toEqual([askedId]);
    await expect.poll(() => find(`TurnStatus = 'stopped'`), { timeout: 20_000, interval: 500 }).toEqual([stoppedId]);
    const handle = stack.temporal.workflow.getHandle(failedId);
    expect((await handle.describe()).status.name).toBe('FAILED');
    // The failure carries the code (its type), is non-retryable, and comes after the outcome was stored.
    const failure = await handle.result().then(
      () => null,
      (e: unknown) => e as { cause?: { type?: string; nonRetryable?: boolean; message?: string } },
    );
    expect(failure?.cause).toMatchObject({ type: code, nonRetryable: true });
    expect(failure?.cause?.message).toContain(code);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: error.data.message_id as string } });
    expect([msg.status, msg.error_code]).toEqual(['failed', code]);
    expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } })).active_message_id).toBeNull();
    // Stop stays as designed: cancelled (or completed when the run had ended first), never failed.
    expect(['CANCELLED', 'COMPLETED']).toContain((await stack.temporal.workflow.getHandle(stoppedId).describe()).status.name);
    expect((await stack.temporal.workflow.getHandle(okId).describe()).status.name).toBe('COMPLETED');
  }, 120_000);

  it('a turn is shape 2: one patch marker and its TemporalChangeVersion update, one outcome update, no release step after the terminal commit (issue 40 item 4)', async () => {
    for (const query of ['Hello there', '/fail InvokeBadRequestError']) {
      const turn = await chat(stack.apiUrl, key, { query, user: 'ops-history' });
      const end = turn.frames.at(-1)!;
      expect(['message_end', 'error']).toContain(end.event);
      const messageId = end.data.message_id as string;
      const handle = stack.temporal.workflow.getHandle(workflowIdForMessage(messageId));
      await handle.result().catch(() => undefined);
      const events = (await handle.fetchHistory()).events ?? [];
      // Markers are patch decisions (the SDK upserts TemporalChangeVersion with each) and local activities (releaseTurn).
      // Before shape 2: 19 events, 4 markers (three patches, the release), 4 upserts.
      expect({
        upserts: events.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes).length,
        markers: events.filter((e) => e.markerRecordedEventAttributes).length,
      }).toEqual({ upserts: 2, markers: 1 });
      expect(events.length).toBeLessThanOrEqual(14);
      // runAgent's terminal transaction freed the conversation.
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
      expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } })).active_message_id).toBeNull();
    }
  }, 60_000);
});
