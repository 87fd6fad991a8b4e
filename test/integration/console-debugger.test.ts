/**
 * The builder's loop over the console API (issue 19 §1–2), on the real stack over HTTP + SSE: debugger turns that
 * pause for a form, resume on the draft they ran on, stop and re-attach; the account's debugger history; a build
 * draft merged into the shared draft (clean, conflict, rebase, force) and published. Every route answers 404 to
 * another account of the tenant and to another tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureAccount, ensureAgentApp, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let appId: string;
/** The demo account (owner of the debugger turns), another account of its tenant, and an account of another tenant. */
const keys = { owner: '', colleague: '', stranger: '' };
/** The stranger's own app: its key is valid there, and still finds nothing of ours. */
let strangerAppId: string;

beforeAll(async () => {
  stack = await startTestStack('console_debugger');
  const d = stack.demo!;
  appId = d.appId;
  keys.owner = d.consoleKey;
  const colleague = await ensureAccount(stack.db, { tenantId: d.tenantId, email: 'colleague@example.com', name: 'Colleague' });
  keys.colleague = await issueConsoleKey(stack.db, { tenantId: d.tenantId, accountId: colleague.id });
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  keys.stranger = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
  strangerAppId = (await ensureAgentApp(stack.db, { tenantId: tenant.id, name: 'Theirs', createdBy: stranger.id }, demoSoulConfig())).appId;
});
afterAll(async () => stack?.stop());

type Who = keyof typeof keys;
function consoleFetch(
  path: string,
  opts: { method?: string; body?: unknown; who?: Who; app?: string; headers?: Record<string, string> } = {},
) {
  return fetch(`${stack.apiUrl}/console/api/apps/${opts.app ?? appId}${path}`, {
    method: opts.method ?? 'GET',
    headers: { authorization: `Bearer ${keys[opts.who ?? 'owner']}`, 'content-type': 'application/json', ...opts.headers },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
}

/** Another account of the tenant, the other tenant on our app id, and the other tenant on its own app: 404 each. */
async function expectHiddenFromOthers(path: string, method = 'GET', body?: unknown) {
  for (const [who, app] of [
    ['colleague', appId],
    ['stranger', appId],
    ['stranger', strangerAppId],
  ] as [Who, string][]) {
    const res = await consoleFetch(path, { method, body, who, app });
    expect(res.status, `${who} ${method} ${path} on ${app === appId ? 'our' : 'their'} app`).toBe(404);
    expect(((await res.json()) as { status: number }).status).toBe(404);
  }
}

function soulWith(edit: (s: AgentSoulConfig) => void): AgentSoulConfig {
  const s = demoSoulConfig();
  edit(s);
  return AgentSoulConfig.parse(s);
}

async function debugChat(body: Record<string, unknown>): Promise<ClientFrame[]> {
  const res = await consoleFetch('/agent/debug/chat-messages', { method: 'POST', body });
  expect(res.status).toBe(200);
  return readFrames(res);
}

const events = (frames: ClientFrame[]) => frames.map((f) => f.event);
const answerOf = (frames: ClientFrame[]) => frames.find((f) => f.event === 'message')!.data.answer as string;

async function requestOf(messageId: string) {
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
  const request = run.request as {
    composition: { layers: { name: string; config: Record<string, unknown> }[] };
    session_snapshot: unknown;
    deferred_tool_results?: { calls: Record<string, { status: string; values?: Record<string, string> }> };
  };
  const prompt = request.composition.layers.find((l) => l.name === 'agent_soul_prompt')!.config.system_prompt;
  return { bindingId: run.binding_id, request, prompt };
}

/** A debugger turn that asks; answers the form's token and ids. */
async function askOnDraft(draft: 'draft' | 'build', question: string) {
  const frames = await debugChat({ query: `/ask ${question}`, draft });
  expect(events(frames).slice(-3)).toEqual(['message', 'human_input_required', 'message_end']);
  const hir = frames.find((f) => f.event === 'human_input_required')!;
  const form = hir.data.data as { form_id: string; form_token: string };
  return { form, messageId: hir.data.message_id as string, conversationId: hir.data.conversation_id as string };
}

describe('debugger ask_human', () => {
  it('a build-draft turn pauses, its form is read and submitted over the console, and it resumes on the same build draft', async () => {
    const put = await consoleFetch('/agent/build-draft', {
      method: 'PUT',
      body: { config: soulWith((s) => (s.prompt.system_prompt = 'The build draft asks.')) },
    });
    expect(put.status).toBe(200);
    const { form, messageId, conversationId } = await askOnDraft('build', 'What is your name?');
    const build = await stack.db.agentConfigDraft.findFirstOrThrow({
      where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: stack.demo!.accountId },
    });
    const paused = await requestOf(messageId);
    expect(paused.prompt).toBe('The build draft asks.');
    expect(paused.bindingId).toBe(build.agent_workspace_binding_id);
    const bindingBefore = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: build.agent_workspace_binding_id! } });
    expect(bindingBefore).toMatchObject({ owner_type: 'BUILD_DRAFT', owner_id: build.id, pending_form_id: form.form_id });
    expect(bindingBefore.session_snapshot).not.toBeNull();

    // The form: the owner reads it; nobody else learns it exists — not over the console, not over the service API.
    const got = await consoleFetch(`/agent/debug/forms/${form.form_token}`);
    expect(got.status).toBe(200);
    expect(await got.json()).toMatchObject({
      form_id: form.form_id,
      status: 'waiting',
      message_id: messageId,
      conversation_id: conversationId,
      inputs: [{ name: 'answer', type: 'paragraph', required: true }],
      actions: [{ id: 'submit' }],
    });
    await expectHiddenFromOthers(`/agent/debug/forms/${form.form_token}`);
    await expectHiddenFromOthers(`/agent/debug/forms/${form.form_token}`, 'POST', { inputs: { answer: 'Mallory' }, action: 'submit' });
    const service = await fetch(`${stack.apiUrl}/v1/form/human_input/${form.form_token}?user=anyone`, {
      headers: { authorization: `Bearer ${stack.demo!.apiKey}` },
    });
    expect(service.status).toBe(404);

    // Invalid values lose nothing; then exactly one submission wins.
    const missing = await consoleFetch(`/agent/debug/forms/${form.form_token}`, { method: 'POST', body: { inputs: {}, action: 'submit' } });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { message: string }).message).toContain('answer');
    const ok = await consoleFetch(`/agent/debug/forms/${form.form_token}`, {
      method: 'POST',
      body: { inputs: { answer: 'Hana' }, action: 'submit' },
    });
    expect(ok.status).toBe(200);
    const cont = (await ok.json()) as { task_id: string; conversation_id: string };
    expect(cont.conversation_id).toBe(conversationId);
    const again = await consoleFetch(`/agent/debug/forms/${form.form_token}`, {
      method: 'POST',
      body: { inputs: { answer: 'x' }, action: 'submit' },
    });
    expect(again.status).toBe(412);
    expect(await again.json()).toMatchObject({ code: 'human_input_form_submitted' });

    // The continuation, followed over the console: it finishes with the human's answer.
    const resumed = await readFrames(await consoleFetch(`/agent/debug/chat-messages/${cont.task_id}/events`));
    expect(events(resumed).slice(-2)).toEqual(['message', 'message_end']);
    expect(answerOf(resumed)).toContain('Thanks! You answered: "Hana"');

    // Same draft scope, binding and snapshot, with the deferred result of the paused call.
    const resumeMsg = await stack.db.message.findUniqueOrThrow({ where: { id: cont.task_id } });
    expect(resumeMsg).toMatchObject({
      status: 'succeeded',
      invoke_from: 'debugger',
      account_id: stack.demo!.accountId,
      resumed_from_message_id: messageId,
      metadata: expect.objectContaining({ draft_type: 'BUILD_DRAFT' }),
    });
    const r = await requestOf(cont.task_id);
    expect(r.bindingId).toBe(build.agent_workspace_binding_id);
    expect(r.prompt).toBe('The build draft asks.');
    expect(r.request.session_snapshot).toEqual(bindingBefore.session_snapshot);
    expect(r.request.deferred_tool_results?.calls[bindingBefore.pending_tool_call_id!]).toMatchObject({
      status: 'submitted',
      values: { answer: 'Hana' },
    });
    // No second binding for the conversation: the build draft's is the session.
    expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).agent_workspace_binding_id).toBeNull();
    const bindingAfter = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: build.agent_workspace_binding_id! } });
    expect(bindingAfter.pending_form_id).toBeNull();

    // The debugger history shows both turns on the build draft; only to the owner.
    const listed = await consoleFetch(`/agent/debug/messages?conversation_id=${conversationId}`);
    expect(listed.status).toBe(200);
    const turns = ((await listed.json()) as { data: { id: string; turn_status: string; draft_type: string }[] }).data;
    expect(turns.map((m) => [m.id, m.turn_status, m.draft_type])).toEqual([
      [messageId, 'succeeded', 'BUILD_DRAFT'],
      [cont.task_id, 'succeeded', 'BUILD_DRAFT'],
    ]);
    await expectHiddenFromOthers(`/agent/debug/messages?conversation_id=${conversationId}`);
    const convs = (await (await consoleFetch('/agent/debug/conversations')).json()) as { data: { id: string; active_message_id: null }[] };
    expect(convs.data.map((c) => c.id)).toContain(conversationId);
    const theirs = await consoleFetch('/agent/debug/conversations', { who: 'colleague' });
    expect(theirs.status).toBe(200);
    expect(((await theirs.json()) as { data: unknown[] }).data).toEqual([]);
  });

  it('a shared-draft turn resumes on its conversation’s binding, still on the shared draft', async () => {
    const { form, messageId, conversationId } = await askOnDraft('draft', 'Which colour?');
    const ok = await consoleFetch(`/agent/debug/forms/${form.form_token}`, {
      method: 'POST',
      body: { inputs: { answer: 'Blue' }, action: 'submit' },
    });
    expect(ok.status).toBe(200);
    const cont = (await ok.json()) as { task_id: string };
    const resumed = await readFrames(await consoleFetch(`/agent/debug/chat-messages/${cont.task_id}/events`));
    expect(answerOf(resumed)).toContain('Thanks! You answered: "Blue"');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect((await requestOf(messageId)).bindingId).toBe(conv.agent_workspace_binding_id);
    expect((await requestOf(cont.task_id)).bindingId).toBe(conv.agent_workspace_binding_id);
    expect((await requestOf(cont.task_id)).prompt).toBe(demoSoulConfig().prompt.system_prompt);
  });
});

describe('debugger stop and re-attach', () => {
  it('stops a debugger turn mid-stream (only for its account); the partial answer is kept', async () => {
    const res = await consoleFetch('/agent/debug/chat-messages', { method: 'POST', body: { query: '/slow 100 /long 200' } });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 2);
    const taskId = head[0]!.data.task_id as string;
    await expectHiddenFromOthers(`/agent/debug/chat-messages/${taskId}/stop`, 'POST', {});
    const stop = await consoleFetch(`/agent/debug/chat-messages/${taskId}/stop`, { method: 'POST', body: {} });
    expect(stop.status).toBe(200);
    expect(await stop.json()).toEqual({ result: 'success' });
    const frames = [...head, ...(await reader.read())];
    expect(events(frames).slice(-2)).toEqual(['message', 'message_end']);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe('stopped');
    expect(msg.answer).toBe(answerOf(frames));
    expect(msg.answer.trim().split(/\s+/).length).toBeLessThan(200);
    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
  });

  it('stops a debugger turn that waits for its form: the form is cancelled', async () => {
    const { form, messageId } = await askOnDraft('draft', 'Still there?');
    const stop = await consoleFetch(`/agent/debug/chat-messages/${messageId}/stop`, { method: 'POST', body: {} });
    expect(stop.status).toBe(200);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    await expect(stack.temporal.workflow.getHandle(msg.workflow_id).result()).rejects.toThrow();
    expect((await stack.db.humanInputForm.findUniqueOrThrow({ where: { id: form.form_id } })).status).toBe('cancelled');
    const late = await consoleFetch(`/agent/debug/forms/${form.form_token}`, {
      method: 'POST',
      body: { inputs: { answer: 'x' }, action: 'submit' },
    });
    expect(late.status).toBe(412);
  });

  it('re-attaches with Last-Event-ID: every event exactly once, across a dropped connection', async () => {
    const abort = new AbortController();
    const res = await fetch(`${stack.apiUrl}/console/api/apps/${appId}/agent/debug/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.owner}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '/slow 20 /long 40' }),
      signal: abort.signal,
    });
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 5);
    abort.abort();
    const taskId = head[0]!.data.task_id as string;
    await expectHiddenFromOthers(`/agent/debug/chat-messages/${taskId}/events`);

    const rest = await readFrames(
      await consoleFetch(`/agent/debug/chat-messages/${taskId}/events`, { headers: { 'Last-Event-ID': head.at(-1)!.id! } }),
    );
    const all = await readFrames(await consoleFetch(`/agent/debug/chat-messages/${taskId}/events`));
    const ids = [...head, ...rest].map((f) => Number(f.id));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...head, ...rest].map((f) => [f.id, f.event, JSON.stringify(f.data)])).toEqual(
      all.map((f) => [f.id, f.event, JSON.stringify(f.data)]),
    );
    expect(events(all).slice(-2)).toEqual(['message', 'message_end']);
    expect(answerOf(all).trim().split(/\s+/)).toHaveLength(40);
    // The query-string form resumes the same way.
    const tail = await readFrames(await consoleFetch(`/agent/debug/chat-messages/${taskId}/events?last_event_id=${all.at(-2)!.id}`));
    expect(events(tail)).toEqual(['message_end']);
  });
});

describe('draft lifecycle', () => {
  const shared = async () => (await (await consoleFetch('/agent/draft')).json()) as { revision: number; config: AgentSoulConfig };
  const putBuild = (prompt: string, extra: Record<string, unknown> = {}) =>
    consoleFetch('/agent/build-draft', { method: 'PUT', body: { config: soulWith((s) => (s.prompt.system_prompt = prompt)), ...extra } });
  const merge = (body: Record<string, unknown> = {}, who: Who = 'owner') =>
    consoleFetch('/agent/build-draft/merge', { method: 'POST', body, who });

  it('merges a build draft into the shared draft; a shared draft saved since is a conflict until rebased or forced', async () => {
    // Rebase onto the shared draft as it is, then merge: clean.
    const start = await shared();
    expect((await putBuild('Merged once.', { base_revision: start.revision })).status).toBe(200);
    const m1 = await merge();
    expect(m1.status).toBe(200);
    const merged = (await m1.json()) as { draft: { revision: number; config: AgentSoulConfig }; build_draft: { base_revision: number } };
    expect(merged.draft.revision).toBe(start.revision + 1);
    expect(merged.draft.config.prompt.system_prompt).toBe('Merged once.');
    expect(merged.build_draft.base_revision).toBe(merged.draft.revision);
    expect((await shared()).config.prompt.system_prompt).toBe('Merged once.');

    // A colleague saves the shared draft; my next merge would drop their edit: 409, nothing changes.
    expect((await putBuild('Mine, second.')).status).toBe(200);
    const theirs = await consoleFetch('/agent/draft', {
      method: 'PUT',
      who: 'colleague',
      body: { config: soulWith((s) => (s.prompt.system_prompt = 'The colleague’s edit.')) },
    });
    expect(theirs.status).toBe(200);
    const now = await shared();
    expect(now.revision).toBe(merged.draft.revision + 1);
    const conflict = await merge();
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({
      code: 'agent_draft_conflict',
      status: 409,
      shared_revision: now.revision,
      base_revision: merged.draft.revision,
    });
    expect((await shared()).config.prompt.system_prompt).toBe('The colleague’s edit.');

    // Resolved by hand and rebased: clean again. A base past the shared draft is refused.
    expect((await putBuild('Mine, on top of theirs.', { base_revision: now.revision + 5 })).status).toBe(400);
    expect((await putBuild('Mine, on top of theirs.', { base_revision: now.revision })).status).toBe(200);
    const m2 = await merge();
    expect(m2.status).toBe(200);
    expect((await shared()).config.prompt.system_prompt).toBe('Mine, on top of theirs.');

    // Another conflict, overridden with force.
    await consoleFetch('/agent/draft', {
      method: 'PUT',
      who: 'colleague',
      body: { config: soulWith((s) => (s.prompt.system_prompt = 'Again theirs.')) },
    });
    expect((await merge()).status).toBe(409);
    const forced = await merge({ force: true });
    expect(forced.status).toBe(200);
    expect((await shared()).config.prompt.system_prompt).toBe('Mine, on top of theirs.');
    expect((await merge()).status).toBe(200);

    // Others: the colleague has no build draft of their own to merge, the other tenant no such app.
    expect(await (await merge({}, 'colleague')).json()).toMatchObject({ code: 'agent_build_draft_not_found', status: 404 });
    for (const app of [appId, strangerAppId]) {
      const res = await consoleFetch('/agent/build-draft/merge', { method: 'POST', body: {}, who: 'stranger', app });
      expect(res.status).toBe(404);
    }
    expect((await merge({ force: 'yes' })).status).toBe(400);
  });

  it('publishes from a build draft: new conversations run it, the build draft is based on it', async () => {
    expect((await putBuild('Published from my build draft.')).status).toBe(200);
    const pub = await consoleFetch('/agent/publish', { method: 'POST', body: { from: 'build-draft' } });
    expect(pub.status).toBe(201);
    const v = (await pub.json()) as { id: string; version: number };
    const agent = await stack.db.agent.findUniqueOrThrow({ where: { id: stack.demo!.agentId } });
    expect(agent.active_config_snapshot_id).toBe(v.id);
    const build = (await (await consoleFetch('/agent/build-draft')).json()) as { base_version_id: string };
    expect(build.base_version_id).toBe(v.id);
    // The shared draft is not touched by a publish from the build draft.
    expect((await shared()).config.prompt.system_prompt).not.toBe('Published from my build draft.');
    const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'hello', user: 'after-publish' });
    expect((await requestOf(turn.frames.at(-1)!.data.message_id as string)).prompt).toBe('Published from my build draft.');
    // The colleague has no build draft to publish; the other tenant does not see the app.
    expect((await consoleFetch('/agent/publish', { method: 'POST', body: { from: 'build-draft' }, who: 'colleague' })).status).toBe(404);
    expect((await consoleFetch('/agent/publish', { method: 'POST', body: { from: 'build-draft' }, who: 'stranger' })).status).toBe(404);
  });
});
