/**
 * Stop is workflow cancellation (docs/seeds/001): the partial answer, the thoughts, the usage and the backend's
 * post-cancel snapshot are all kept, the client gets the partial `message` and `message_end`, and the
 * workflow ends Cancelled. Every window: before the backend run exists, mid-stream, racing success, twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { killWorkerChild } from '../support/processes.js';

let stack: Stack;
let key: string;
const headers = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });
const stop = (taskId: string, user: string) =>
  fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, { method: 'POST', headers: headers(), body: JSON.stringify({ user }) });

beforeAll(async () => {
  stack = await startTestStack('stop', { worker: 'child', env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

function deltasOf(frames: ClientFrame[]) {
  return frames
    .filter((f) => f.event === 'agent_message')
    .map((f) => f.data.answer as string)
    .join('');
}

describe('stop', () => {
  it('mid-stream: keeps the partial answer, thoughts, usage and snapshot; the client gets message + message_end; the workflow ends Cancelled', async () => {
    // Thinking first (a thought row), then a long, slow answer to stop in the middle of.
    const first = await chat(stack.apiUrl, key, { query: 'Remember me: I am Otto.', user: 'otto' });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const res = await postChat(stack.apiUrl, key, { query: '/think /slow 40 /long 300', user: 'otto', conversation_id: conversationId });
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 3);
    const taskId = head[0]!.data.task_id as string;
    const r1 = await stop(taskId, 'otto');
    expect(r1.status).toBe(200);
    expect(await r1.json()).toEqual({ result: 'success' });
    const frames = [...head, ...(await reader.read())];
    expect(frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    const partial = frames.find((f) => f.event === 'message')!.data.answer as string;
    expect(partial).toBe(deltasOf(frames));
    const words = partial.trim().split(/\s+/).length;
    expect(words).toBeGreaterThan(0);
    expect(words).toBeLessThan(300);

    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe('stopped');
    expect(msg.answer).toBe(partial);
    expect(msg.usage).not.toBeNull();
    const usage = frames.at(-1)!.data.metadata as { usage: { total_tokens: number } };
    expect(msg.total_tokens).toBe(usage.usage.total_tokens);
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: taskId } });
    expect(run.terminal_type).toBe('run_cancelled');
    const thoughts = await stack.db.messageAgentThought.findMany({ where: { message_id: taskId } });
    expect(thoughts.map((t) => t.kind)).toEqual(['thinking']);
    expect(thoughts[0]!.thought).toContain('The user asks');
    expect(frames.filter((f) => f.event === 'agent_thought').at(-1)!.data.thought).toBe(thoughts[0]!.thought);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(conv.active_message_id).toBeNull();
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    expect(binding.session_snapshot).not.toBeNull();
    expect(JSON.stringify(binding.session_snapshot)).toContain('/think /slow 40 /long 300');

    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');

    // Stop twice: still success, nothing changes.
    const r2 = await stop(taskId, 'otto');
    expect(await r2.json()).toEqual({ result: 'success' });
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: taskId } })).status).toBe('stopped');

    // The conversation goes on, remembering what was said before the stop.
    const next = await chat(stack.apiUrl, key, { query: 'Your first message was?', user: 'otto', conversation_id: conversationId });
    expect(next.frames.at(-1)!.event).toBe('message_end');
  });

  it('before the backend run exists: no run is created afterwards', async () => {
    // No worker: the workflow is started but no activity can run yet.
    await killWorkerChild(stack);
    const res = await postChat(stack.apiUrl, key, { query: 'this will be stopped', user: 'early' });
    expect(res.status).toBe(200);
    const msg = await stack.db.message.findFirstOrThrow({ where: { query: 'this will be stopped' } });
    expect(await (await stop(msg.id, 'early')).json()).toEqual({ result: 'success' });
    await stack.startWorkerChild();
    const frames = await new FrameReader(res).read();
    expect(frames.map((f) => f.event)).toEqual(['message', 'message_end']);
    const after = await stack.db.message.findUniqueOrThrow({ where: { id: msg.id } });
    expect(after.status).toBe('stopped');
    const run = await stack.db.agentBackendRun.findUnique({ where: { message_id: msg.id } });
    expect(run?.backend_run_id ?? null).toBeNull();
    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
  });

  it('racing the run’s own success: one consistent outcome', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await postChat(stack.apiUrl, key, { query: '/long 8', user: `racer-${i}` });
      const reader = new FrameReader(res);
      const head = await reader.read(() => true);
      const taskId = head[0]!.data.task_id as string;
      await stop(taskId, `racer-${i}`);
      const frames = [...head, ...(await reader.read())];
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
      const status = await stack.temporal.workflow
        .getHandle(msg.workflow_id)
        .describe()
        .then(async (d) => {
          for (let k = 0; k < 50 && d.status.name === 'RUNNING'; k++) {
            await new Promise((r) => setTimeout(r, 100));
            d = await stack.temporal.workflow.getHandle(msg.workflow_id).describe();
          }
          return d.status.name;
        });
      expect(frames.filter((f) => f.event === 'message')).toHaveLength(1);
      expect(frames.filter((f) => f.event === 'message_end')).toHaveLength(1);
      expect(frames.find((f) => f.event === 'message')!.data.answer).toBe(msg.answer);
      if (msg.status === 'succeeded') expect(['COMPLETED', 'CANCELLED']).toContain(status);
      else {
        expect(msg.status).toBe('stopped');
        expect(status).toBe('CANCELLED');
      }
    }
  });

  it('refuses an unknown task and another user with 404', async () => {
    const unknown = await stop('00000000-0000-4000-8000-000000000000', 'otto');
    expect(unknown.status).toBe(404);
    const { frames } = await chat(stack.apiUrl, key, { query: 'mine', user: 'owner' });
    const taskId = frames.at(-1)!.data.task_id as string;
    expect((await stop(taskId, 'intruder')).status).toBe(404);
    const bad = await stop('not-a-uuid', 'otto');
    expect(bad.status).toBe(400);
  });
});
