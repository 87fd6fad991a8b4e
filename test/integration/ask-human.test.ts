/**
 * ask_human end to end: the agent asks, the turn answers with the question and a form, the workflow waits
 * durably; a submission resumes the run as a new message; expiry, double submission, the wrong user,
 * invalid values, a stop while waiting and the next turn's `unavailable` each behave as docs/PROTOCOL.md §5 says.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { turnStateQuery } from '../../workflows/definitions.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
const auth = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

beforeAll(async () => {
  // 3 s expiry for the expiry case; the happy path submits well within it.
  stack = await startTestStack('ask_human', { env: { HUMAN_INPUT_FORM_EXPIRY_HOURS: 3 / 3600 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

async function ask(user: string, question: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, {
    query: `/ask ${question}`,
    user,
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(status).toBe(200);
  const hir = frames.find((f) => f.event === 'human_input_required')!;
  expect(hir, JSON.stringify(frames.map((f) => f.event))).toBeDefined();
  const d = hir.data.data as { form_id: string; form_token: string; node_id: string; expiration_time: number };
  return { frames, form: d, messageId: hir.data.message_id as string, conversationId: hir.data.conversation_id as string };
}

async function submit(token: string, body: Record<string, unknown>) {
  return fetch(`${stack.apiUrl}/v1/form/human_input/${token}`, { method: 'POST', headers: auth(), body: JSON.stringify(body) });
}

async function attach(taskId: string, user: string): Promise<ClientFrame[]> {
  const res = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/events?user=${user}`, { headers: auth() });
  expect(res.status).toBe(200);
  return readFrames(res);
}

describe('ask_human', () => {
  it('pauses with the question, a form and a durable wait; a submission resumes the run as a new message', async () => {
    const { frames, form, messageId, conversationId } = await ask('hana', 'What is your name?');
    const evs = frames.map((f) => f.event);
    expect(evs.slice(-3)).toEqual(['message', 'human_input_required', 'message_end']);
    // The ask_human call is announced twice by the backend (part_start, then function_tool_call, same
    // arguments): its row reaches the client once, not as two identical agent_thought frames.
    const asked = frames.filter((f) => f.event === 'agent_thought').map((f) => JSON.stringify(f.data));
    expect(asked).toHaveLength(1);
    expect(frames.find((f) => f.event === 'message')!.data.answer).toContain('What is your name?');
    expect(form.node_id).toBe(messageId);

    const row = await stack.db.humanInputForm.findUniqueOrThrow({ where: { id: form.form_id } });
    expect(row).toMatchObject({ status: 'waiting', message_id: messageId, question: 'What is your name?' });
    const hours = (row.expires_at.getTime() - row.created_at.getTime()) / 3_600_000;
    expect(hours).toBeGreaterThan(0);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(msg.status).toBe('paused');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(conv.active_message_id).toBe(messageId);
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    expect(binding.pending_form_id).toBe(form.form_id);
    expect(binding.pending_tool_call_id).toBe(row.tool_call_id);
    expect(binding.session_snapshot).not.toBeNull();

    // Ops: the workflow says it waits for a human, and which form.
    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    const state = await handle.query(turnStateQuery);
    expect(state).toMatchObject({ phase: 'waiting_for_human', pendingFormId: form.form_id, pendingFormToken: form.form_token });

    // A new message while the form waits: 409 naming the form.
    const busy = await chat(stack.apiUrl, key, { query: 'hello?', user: 'hana', conversation_id: conversationId });
    expect(busy.status).toBe(409);
    expect(busy.frames[0]!.data).toMatchObject({ code: 'conversation_waiting_for_human', form_token: form.form_token });

    // The form to render.
    expect((await fetch(`${stack.apiUrl}/v1/form/human_input/${form.form_token}?user=mallory`, { headers: auth() })).status).toBe(404);
    const got = await fetch(`${stack.apiUrl}/v1/form/human_input/${form.form_token}?user=hana`, { headers: auth() });
    expect(got.status).toBe(200);
    const rendered = (await got.json()) as { inputs: { name: string }[]; actions: { id: string }[]; status: string };
    expect(rendered.inputs.map((i) => i.name)).toEqual(['answer']);
    expect(rendered.actions.map((a) => a.id)).toEqual(['submit']);
    expect(rendered.status).toBe('waiting');

    // Wrong user, invalid values and an unknown action lose nothing.
    expect((await submit(form.form_token, { inputs: { answer: 'Mallory' }, action: 'submit', user: 'mallory' })).status).toBe(404);
    const missing = await submit(form.form_token, { inputs: {}, action: 'submit', user: 'hana' });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { message: string }).message).toContain('answer');
    expect((await submit(form.form_token, { inputs: { answer: 'x', extra: 'y' }, action: 'submit', user: 'hana' })).status).toBe(400);
    expect((await submit(form.form_token, { inputs: { answer: 'x' }, action: 'nope', user: 'hana' })).status).toBe(400);
    expect((await stack.db.humanInputForm.findUniqueOrThrow({ where: { id: form.form_id } })).status).toBe('waiting');

    const ok = await submit(form.form_token, { inputs: { answer: 'Hana' }, action: 'submit', user: 'hana' });
    expect(ok.status).toBe(200);
    const cont = (await ok.json()) as { task_id: string; conversation_id: string };
    expect(cont.conversation_id).toBe(conversationId);

    // Exactly one submission wins.
    const again = await submit(form.form_token, { inputs: { answer: 'Twice' }, action: 'submit', user: 'hana' });
    expect(again.status).toBe(412);
    expect(await again.json()).toMatchObject({ code: 'human_input_form_submitted', status: 412 });

    const resumed = await attach(cont.task_id, 'hana');
    expect(resumed.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    // Each thought row reaches the client once per change: the continuation once began with two identical frames.
    const thoughtFrames = resumed.filter((f) => f.event === 'agent_thought').map((f) => JSON.stringify(f.data));
    expect(thoughtFrames.length).toBeGreaterThan(0);
    expect(new Set(thoughtFrames).size, thoughtFrames.join('\n')).toBe(thoughtFrames.length);
    // The paused message is a finished turn once its continuation exists (it kept `paused` for ever).
    const listed = await fetch(`${stack.apiUrl}/v1/messages?user=hana&conversation_id=${conversationId}`, { headers: auth() });
    const turns = ((await listed.json()) as { data: { id: string; turn_status: string }[] }).data;
    expect(turns.map((m) => [m.id, m.turn_status])).toEqual([
      [messageId, 'succeeded'],
      [cont.task_id, 'succeeded'],
    ]);
    expect(resumed.find((f) => f.event === 'message')!.data.answer).toContain('You answered: "Hana"');
    await expect(handle.result()).resolves.toMatchObject({ status: 'succeeded', messageId: cont.task_id });
    // Ops find the workflow by the continuation's message id too; MessageId stays the first message.
    const sa = (await handle.describe()).searchAttributes as Record<string, unknown[]>;
    expect(sa.MessageId).toEqual([messageId]);
    expect(sa.MessageIds).toEqual([messageId, cont.task_id]);
    // The form wait's timer carries a summary that names the form (the Temporal UI showed a bare "1").
    const timer = (await handle.fetchHistory()).events!.find((e) => e.timerStartedEventAttributes);
    expect(timer?.userMetadata?.summary?.data && Buffer.from(timer.userMetadata.summary.data).toString()).toContain(`form ${form.form_id}`);

    const resumeMsg = await stack.db.message.findUniqueOrThrow({ where: { id: cont.task_id } });
    expect(resumeMsg).toMatchObject({
      status: 'succeeded',
      resumed_from_message_id: messageId,
      query: '/ask What is your name?',
      workflow_id: msg.workflow_id,
    });
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: cont.task_id } });
    const calls = (
      run.request as { deferred_tool_results: { calls: Record<string, { status: string; values: unknown; action: { id: string } }> } }
    ).deferred_tool_results.calls;
    expect(calls[row.tool_call_id]).toMatchObject({ status: 'submitted', values: { answer: 'Hana' }, action: { id: 'submit' } });
    const after = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    expect(after.pending_form_id).toBeNull();
    expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id).toBeNull();
  });

  it('expires the form after its configured expiry and resumes the run with a timeout', async () => {
    const { form, messageId } = await ask('ivan', 'Are you there?');
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const result = await stack.temporal.workflow.getHandle(msg.workflow_id).result();
    expect(result.status).toBe('succeeded');
    const row = await stack.db.humanInputForm.findUniqueOrThrow({ where: { id: form.form_id } });
    expect(row.status).toBe('expired');
    const resume = await stack.db.message.findFirstOrThrow({ where: { resumed_from_message_id: messageId } });
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: resume.id } });
    expect(JSON.stringify(run.request)).toContain('"status":"timeout"');
    expect(resume.status).toBe('succeeded');
    const late = await submit(form.form_token, { inputs: { answer: 'late' }, action: 'submit', user: 'ivan' });
    expect(late.status).toBe(412);
    expect(await late.json()).toMatchObject({ code: 'human_input_form_expired' });
  });

  it('a continuation skips the input guards (docs/seeds/000): an annotation that now matches the paused query does not answer it', async () => {
    const { form, messageId } = await ask('ines', 'Which planet?');
    const paused = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    // While the form waits, the app starts answering this very query from an annotation.
    await stack.db.app.update({ where: { id: paused.app_id }, data: { annotation_reply_enabled: true, annotation_score_threshold: 0.9 } });
    const annotation = await stack.db.annotation.create({
      data: { tenant_id: paused.tenant_id, app_id: paused.app_id, question: '/ask Which planet?', content: 'Canned: Mars.' },
    });
    try {
      const ok = await submit(form.form_token, { inputs: { answer: 'Venus' }, action: 'submit', user: 'ines' });
      expect(ok.status).toBe(200);
      const cont = (await ok.json()) as { task_id: string };
      const resumed = await attach(cont.task_id, 'ines');
      expect(resumed.find((f) => f.event === 'message')!.data.answer).toContain('You answered: "Venus"');
      expect((await stack.db.annotation.findUniqueOrThrow({ where: { id: annotation.id } })).hit_count).toBe(0);
      // The same query as a fresh turn is answered by the annotation: the guard would have fired.
      const fresh = await chat(stack.apiUrl, key, { query: '/ask Which planet?', user: 'ines' });
      expect(fresh.frames.find((f) => f.event === 'message')!.data.answer).toBe('Canned: Mars.');
    } finally {
      await stack.db.app.update({ where: { id: paused.app_id }, data: { annotation_reply_enabled: false } });
      await stack.db.annotation.delete({ where: { id: annotation.id } });
    }
  });

  it('stop while waiting cancels the form and ends the workflow Cancelled; the next turn closes the call as unavailable', async () => {
    const { form, messageId, conversationId } = await ask('jane', 'Which colour?');
    const stop = await fetch(`${stack.apiUrl}/v1/chat-messages/${messageId}/stop`, {
      method: 'POST',
      headers: auth(),
      body: JSON.stringify({ user: 'jane' }),
    });
    expect(await stop.json()).toEqual({ result: 'success' });
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    expect((await stack.db.humanInputForm.findUniqueOrThrow({ where: { id: form.form_id } })).status).toBe('cancelled');
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: messageId } })).status).toBe('stopped');
    const late = await submit(form.form_token, { inputs: { answer: 'red' }, action: 'submit', user: 'jane' });
    expect(late.status).toBe(412);
    expect(await late.json()).toMatchObject({ code: 'human_input_form_cancelled', status: 412 });

    const next = await chat(stack.apiUrl, key, { query: 'Never mind.', user: 'jane', conversation_id: conversationId });
    expect(next.frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    const nextId = next.frames.at(-1)!.data.message_id as string;
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: nextId } });
    const calls = (run.request as { deferred_tool_results: { calls: Record<string, { status: string }> } }).deferred_tool_results.calls;
    expect(Object.values(calls)).toEqual([{ status: 'unavailable' }]);
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: nextId } })).status).toBe('succeeded');
  });
});
