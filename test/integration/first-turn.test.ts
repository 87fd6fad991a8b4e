/**
 * Foundation end to end: a chat turn through HTTP → api → Temporal workflow → agent backend → inner LLM →
 * demo model, streamed back over SSE from the PostgreSQL event log; a second turn that remembers the first
 * through the binding's session snapshot; the workflows findable by their search attributes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('first_turn');
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

const names = (frames: ClientFrame[]) => frames.map((f) => f.event);

describe('a first turn, streamed end to end through Temporal', () => {
  let conversationId: string;
  let firstMessageId: string;
  let firstFrames: ClientFrame[];

  it('streams agent_message deltas, one final message equal to their concatenation, and message_end with usage', async () => {
    const { status, frames } = await chat(stack.apiUrl, key, { query: 'My name is Ada and I like tea.', user: 'alice' });
    expect(status).toBe(200);
    firstFrames = frames;
    const evs = names(frames);
    expect(evs.filter((e) => e === 'agent_message').length).toBeGreaterThan(0);
    expect(evs.slice(-2)).toEqual(['message', 'message_end']);
    expect(evs.filter((e) => e === 'message')).toHaveLength(1);
    // ids are dense and increasing from 1
    expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_, i) => i + 1));
    const deltas = frames
      .filter((f) => f.event === 'agent_message')
      .map((f) => f.data.answer as string)
      .join('');
    const final = frames.find((f) => f.event === 'message')!.data;
    expect(final.answer).toBe(deltas);
    expect(final.answer).toContain('Ada');
    const end = frames.at(-1)!.data as { metadata: { usage: Record<string, unknown> }; conversation_id: string; message_id: string };
    expect(end.metadata.usage.total_tokens).toBeGreaterThan(0);
    expect(end.metadata.usage.currency).toBeTypeOf('string');
    for (const f of frames) {
      expect(f.data.event).toBe(f.event);
      expect(f.data.conversation_id).toBe(end.conversation_id);
      expect(f.data.message_id).toBe(end.message_id);
      expect(f.data.task_id).toBe(end.message_id);
      expect(f.data.created_at).toBeTypeOf('number');
    }
    conversationId = end.conversation_id;
    firstMessageId = end.message_id;
  });

  it('persists the Conversation and Message rows with answer, status and usage', async () => {
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: firstMessageId } });
    expect(msg.status).toBe('succeeded');
    expect(msg.conversation_id).toBe(conversationId);
    expect(msg.answer).toBe(firstFrames.find((f) => f.event === 'message')!.data.answer);
    expect(msg.total_tokens).toBeGreaterThan(0);
    expect(msg.total_tokens).toBe(msg.message_tokens + msg.answer_tokens);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(conv.active_message_id).toBeNull();
    expect(conv.agent_workspace_binding_id).not.toBeNull();
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    expect(binding.owner_type).toBe('CONVERSATION');
    expect(binding.agent_config_version_id).toBe(stack.demo!.configVersionId);
    const snapshot = binding.session_snapshot as { layers: { name: string; runtime_state: { messages?: unknown[] } }[] };
    const history = snapshot.layers.find((l) => l.name === 'history')!;
    expect(JSON.stringify(history.runtime_state)).toContain('My name is Ada');
  });

  it('answers a second message using the first, through the session snapshot reused from the binding', async () => {
    const before = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const { frames } = await chat(stack.apiUrl, key, { query: 'What did I say earlier?', user: 'alice', conversation_id: conversationId });
    expect(names(frames).slice(-2)).toEqual(['message', 'message_end']);
    const answer = frames.find((f) => f.event === 'message')!.data.answer as string;
    expect(answer).toContain('My name is Ada and I like tea.');
    const after = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(after.agent_workspace_binding_id).toBe(before.agent_workspace_binding_id);
    // the run request of turn two carried turn one's snapshot
    const secondId = frames.at(-1)!.data.message_id as string;
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: secondId } });
    const req = run.request as { session_snapshot: { layers: { name: string; runtime_state: unknown }[] } | null };
    expect(JSON.stringify(req.session_snapshot)).toContain('My name is Ada');
  });

  it('lists the conversation history with GET /v1/messages', async () => {
    const res = await fetch(`${stack.apiUrl}/v1/messages?conversation_id=${conversationId}&user=alice`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { query: string; answer: string; agent_thoughts: unknown[] }[]; has_more: boolean };
    expect(body.data.map((m) => m.query)).toEqual(['My name is Ada and I like tea.', 'What did I say earlier?']);
    expect(body.has_more).toBe(false);
    expect(body.data[1]!.answer).toContain('My name is Ada');
  });

  it('makes both workflows findable in Temporal by ConversationId, with every search attribute', async () => {
    const found: string[] = [];
    // Visibility is eventually consistent: poll briefly.
    for (let i = 0; i < 50 && found.length < 2; i++) {
      found.length = 0;
      for await (const wf of stack.temporal.workflow.list({ query: `ConversationId = '${conversationId}'` })) found.push(wf.workflowId);
      if (found.length < 2) await new Promise((r) => setTimeout(r, 200));
    }
    expect(found).toHaveLength(2);
    expect(found).toContain(`agent-turn-${firstMessageId}`);
    const desc = await stack.temporal.workflow.getHandle(`agent-turn-${firstMessageId}`).describe();
    const sa = desc.searchAttributes as Record<string, unknown[]>;
    expect(sa.TenantId).toEqual([stack.demo!.tenantId]);
    expect(sa.AppId).toEqual([stack.demo!.appId]);
    expect(sa.AgentId).toEqual([stack.demo!.agentId]);
    expect(sa.ConversationId).toEqual([conversationId]);
    expect(sa.MessageId).toEqual([firstMessageId]);
    expect(sa.MessageIds).toEqual([firstMessageId]);
    expect(sa.InvokeFrom).toEqual(['service-api']);
    expect(desc.status.name).toBe('COMPLETED');
    expect(await stack.temporal.workflow.getHandle(`agent-turn-${firstMessageId}`).result()).toMatchObject({ status: 'succeeded' });
  });

  it('re-attaches to a finished turn with Last-Event-ID and replays only what follows', async () => {
    const res = await fetch(`${stack.apiUrl}/v1/chat-messages/${firstMessageId}/events?user=alice`, {
      headers: { authorization: `Bearer ${key}`, 'last-event-id': String(firstFrames.length - 2) },
    });
    const { readFrames } = await import('../support/sse.js');
    const frames = await readFrames(res);
    expect(names(frames)).toEqual(['message', 'message_end']);
    expect(frames.map((f) => f.id)).toEqual([String(firstFrames.length - 1), String(firstFrames.length)]);
  });

  it('starts every turn when a new user sends several first messages at once', async () => {
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => chat(stack.apiUrl, key, { query: `parallel ${i}`, user: 'brand-new-user' })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    for (const r of results) expect(r.frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    expect(await stack.db.endUser.count({ where: { session_id: 'brand-new-user' } })).toBe(1);
  });

  it('refuses a bad key and a bad body with clear 4xx errors', async () => {
    const noKey = await fetch(`${stack.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ code: 'unauthorized', status: 401 });
    const bad = await chat(stack.apiUrl, key, { user: 'alice' });
    expect(bad.status).toBe(400);
    expect(bad.frames[0]!.data).toMatchObject({ code: 'invalid_param', status: 400 });
    expect(String(bad.frames[0]!.data.message)).toContain('query');
  });
});
