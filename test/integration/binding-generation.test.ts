/**
 * A conversation's binding whose workspace moved to another generation (it was reset) is stale: the next
 * turn retires the binding and fails with 409 `agent_binding_generation_mismatch` instead of continuing
 * on a working environment that is not the one the session snapshot belongs to (issue 18 item 9).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('binding_generation', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

describe('binding generation', () => {
  it('a binding of an older workspace generation is retired and the turn fails with agent_binding_generation_mismatch', async () => {
    const first = await chat(stack.apiUrl, key, { query: 'Remember: I am Gen.', user: 'gen' });
    expect(first.frames.at(-1)!.event).toBe('message_end');
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    // The workspace is reset behind the conversation's back.
    await stack.db.agentWorkspace.update({ where: { id: binding.workspace_id }, data: { generation: { increment: 1 } } });

    const next = await chat(stack.apiUrl, key, { query: 'Who am I?', user: 'gen', conversation_id: conversationId });
    const error = next.frames.find((f) => f.event === 'error');
    expect(error?.data, JSON.stringify(next.frames.map((f) => f.event))).toMatchObject({
      code: 'agent_binding_generation_mismatch',
      status: 409,
    });
    expect((await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: binding.id } })).retired_at).not.toBeNull();
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: next.frames.at(-1)!.data.message_id as string } });
    expect([msg.status, msg.error_code]).toEqual(['failed', 'agent_binding_generation_mismatch']);
    // No backend run was started for it.
    expect(await stack.db.agentBackendRun.findUnique({ where: { message_id: msg.id } })).toBeNull();
  });
});
