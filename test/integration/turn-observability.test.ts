/**
 * What ops see of a turn in the Temporal UI without a query (issue 18 item 8): the static summary and
 * details the api starts each workflow with, and the "current details" naming the phase as it changes
 * (running the agent, waiting for a human with the form's id, completed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('observability', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

/** The workflow's "current details" (what the UI shows), read through the SDK's built-in metadata query. */
async function currentDetails(workflowId: string): Promise<string> {
  const meta = (await stack.temporal.workflow.getHandle(workflowId).query('__temporal_workflow_metadata')) as { currentDetails?: string };
  return meta.currentDetails ?? '';
}

/** `read()` once `done` holds (or its last value after 10 s). */
async function settled<T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const end = Date.now() + 10_000;
  let v = await read();
  while (!done(v) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100));
    v = await read();
  }
  return v;
}

async function workflowOf(messageId: string): Promise<string> {
  return (await stack.db.message.findUniqueOrThrow({ where: { id: messageId } })).workflow_id;
}

describe('a turn in the Temporal UI', () => {
  it('carries a static summary and details naming the app, the query, the conversation, the message and the user', async () => {
    const { frames } = await chat(stack.apiUrl, key, { query: 'Hello *there*, observer!', user: 'olga' });
    const end = frames.at(-1)!;
    expect(end.event).toBe('message_end');
    const messageId = end.data.message_id as string;
    const conversationId = end.data.conversation_id as string;
    const d = await stack.temporal.workflow.getHandle(await workflowOf(messageId)).describe();
    const summary = (await d.staticSummary())!;
    // The app's name and the start of the query, markdown escaped (the UI renders summaries as markdown).
    expect(summary).toMatch(/^Agent turn · Demo Agent · "Hello \\\*th/);
    const details = (await d.staticDetails())!;
    expect(details).toContain(conversationId);
    expect(details).toContain(messageId);
    expect(details).toContain('olga');
    expect(
      await settled(
        () => currentDetails(d.workflowId),
        (v) => v === 'phase: completed',
      ),
    ).toBe('phase: completed');
  });

  it('names the phase while the agent runs and while a form waits', async () => {
    const res = await postChat(stack.apiUrl, key, { query: '/slow 100 /long 30', user: 'olga' });
    const reader = new FrameReader(res);
    const first = await reader.read((f) => f.event === 'agent_message');
    const workflowId = await workflowOf(first.at(-1)!.data.message_id as string);
    expect(await currentDetails(workflowId)).toBe('phase: running_agent');
    await reader.read();

    const asked = await chat(stack.apiUrl, key, { query: '/ask Which colour?', user: 'olga' });
    const form = asked.frames.find((f) => f.event === 'human_input_required')!.data.data as { form_id: string };
    const pausedId = asked.frames.at(-1)!.data.message_id as string;
    // The client has the form as soon as runAgent committed it; the workflow enters the wait right after.
    const workflow = await workflowOf(pausedId);
    expect(
      await settled(
        () => currentDetails(workflow),
        (v) => v !== 'phase: running_agent',
      ),
    ).toBe(`phase: waiting_for_human · form ${form.form_id}`);
  });
});
