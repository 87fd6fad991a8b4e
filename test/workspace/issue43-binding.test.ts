/**
 * Issue 43 item 2 through the real stack (HTTP → api → Temporal → agent backend → demo model → shell → shellctl): a
 * binding replaced after `binding_lost` keeps the model's memory — its first run starts from the conversation's stored
 * messages, fitted into the model's context window (activities/prepare/lost-history.ts) — for a conversation and for
 * a build draft's debugger session.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BINDING_LOST_MESSAGE } from '../../activities/classify-failure.js';
import { LOST_WORKSPACE_NOTE } from '../../activities/prepare/lost-history.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import type { LayerSpec } from '../../core/protocol/run.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;

function workspaceSoul(edit: (s: AgentSoulConfig) => void = () => undefined): AgentSoulConfig {
  const s = demoSoulConfig();
  s.runtime = { enabled: true };
  s.shell = { enabled: true, timeout_ms: 20_000 };
  edit(s);
  return AgentSoulConfig.parse(s);
}

beforeAll(async () => {
  stack = await startTestStack('issue43_binding', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', SHELL_MAX_OUTPUT_BYTES: 8192, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
}, 300_000);
afterAll(async () => stack?.stop());

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(key: string, query: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, {
    query,
    user: 'ada',
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  return { end, answer: answerOf(frames), conversationId: end.data.conversation_id as string, messageId: end.data.message_id as string };
}

async function debug(appId: string, query: string) {
  const res = await fetch(`${stack.apiUrl}/console/api/apps/${appId}/agent/debug/chat-messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, draft: 'build' }),
  });
  expect(res.status).toBe(200);
  const frames = await readFrames(res);
  const end = frames.at(-1)!;
  return { end, answer: answerOf(frames), messageId: end.data.message_id as string };
}

const layersOf = async (messageId: string) =>
  (
    (await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } })).request as {
      composition: { layers: LayerSpec[] };
    }
  ).composition.layers;
const initialMessages = async (messageId: string) =>
  ((await layersOf(messageId)).find((l) => l.name === 'history')!.config.initial_messages as PromptMessage[] | undefined) ?? [];

/** Deletes the workspace of a binding, as a wiped volume would. */
async function loseWorkspace(bindingId: string) {
  const b = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: bindingId } });
  fs.rmSync(path.join(stack.config.workspacesDir, b.workspace_id), { recursive: true, force: true });
}

describe('item 2: binding_lost keeps the model’s memory', () => {
  it('a conversation: the fresh binding’s first run starts from the thread’s messages, and says the files are gone', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Lost memory', soul: workspaceSoul() });
    const t1 = await turn(app.apiKey, 'Hello! My name is Ada.');
    const t2 = await turn(app.apiKey, '/sh echo kept > note.txt', t1.conversationId);
    expect(t2.answer).toContain('exited with code 0');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    await loseWorkspace(conv.agent_workspace_binding_id!);

    const lost = await turn(app.apiKey, 'still there?', t1.conversationId);
    expect(lost.end.data).toMatchObject({ message: BINDING_LOST_MESSAGE });

    const t4 = await turn(app.apiKey, '/echo-history', t1.conversationId);
    expect(t4.end.event).toBe('message_end');
    // The model remembers both earlier turns (not the failed one), and this turn tells it the workspace is new.
    expect(t4.answer).toContain('1. "Hello! My name is Ada."');
    expect(t4.answer).toContain('2. "/sh echo kept > note.txt"');
    expect(t4.answer).toContain('3. "/echo-history Note: your workspace was lost');
    expect(t4.answer).not.toContain('still there?');
    expect(await initialMessages(t4.messageId)).toEqual([
      { role: 'user', content: 'Hello! My name is Ada.' },
      { role: 'assistant', content: expect.stringContaining('Ada') },
      { role: 'user', content: '/sh echo kept > note.txt' },
      { role: 'assistant', content: t2.answer },
    ]);
    const text = (await layersOf(t4.messageId)).find((l) => l.name === 'agent_app_user_prompt')!.config.text as string;
    expect(text).toBe(`/echo-history\n\n${LOST_WORKSPACE_NOTE}`);

    // From then on the binding's own snapshot carries the history: nothing is rebuilt again.
    const t5 = await turn(app.apiKey, 'What was my first message?', t1.conversationId);
    expect(t5.answer).toContain('Your first message was: "Hello! My name is Ada."');
    expect(await initialMessages(t5.messageId)).toEqual([]);
  });

  it('the rebuilt history fits the model’s context window: the oldest turns that do not fit are left out', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Lost memory, small window',
      soul: workspaceSoul((s) => (s.model.context_window = 3000)),
    });
    const t1 = await turn(app.apiKey, '/long 2500');
    await turn(app.apiKey, 'My name is Ada.', t1.conversationId);
    await turn(app.apiKey, '/sh true', t1.conversationId);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    await loseWorkspace(conv.agent_workspace_binding_id!);
    expect((await turn(app.apiKey, 'lost?', t1.conversationId)).end.data).toMatchObject({ message: BINDING_LOST_MESSAGE });

    const t5 = await turn(app.apiKey, '/echo-history', t1.conversationId);
    expect(t5.end.event).toBe('message_end');
    const rebuilt = await initialMessages(t5.messageId);
    expect(rebuilt.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['My name is Ada.', '/sh true']);
    expect(t5.answer).toContain('1. "My name is Ada."');
    expect(t5.answer).not.toContain('/long 2500');
  });

  it('a build draft: the debugger session’s turns carry over to the draft’s next binding', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Lost build memory', soul: workspaceSoul() });
    const saved = await fetch(`${stack.apiUrl}/console/api/apps/${app.appId}/agent/build-draft`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config: workspaceSoul() }),
    });
    expect(saved.status).toBe(200);
    await debug(app.appId, 'I like green tea.');
    await debug(app.appId, '/sh true');
    const draft = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: app.agentId, draft_type: 'BUILD_DRAFT' } });
    await loseWorkspace(draft.agent_workspace_binding_id!);
    expect((await debug(app.appId, 'lost?')).end.data).toMatchObject({ message: BINDING_LOST_MESSAGE });

    const after = await debug(app.appId, '/echo-history');
    expect(after.end.event).toBe('message_end');
    expect(after.answer).toContain('1. "I like green tea."');
    expect(after.answer).toContain('2. "/sh true"');
  });
});
