/**
 * Turn semantics of seeds 000/001 through the public and console APIs: config resolution (published,
 * pinned, draft, build draft), session scopes that never mix, the snapshot topology check, input guards
 * (keyword moderation, annotation reply), output moderation, and failure classification with usage.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_CONFIG_CHANGED_MESSAGE } from '../../activities/errors.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
let consoleKey: string;
let appId: string;

beforeAll(async () => {
  stack = await startTestStack('turn_semantics');
  key = stack.demo!.apiKey;
  consoleKey = stack.demo!.consoleKey;
  appId = stack.demo!.appId;
});
afterAll(async () => stack?.stop());

const consoleFetch = (path: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${appId}${path}`, {
    method,
    headers: { authorization: `Bearer ${consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function debugChat(body: Record<string, unknown>): Promise<ClientFrame[]> {
  const res = await consoleFetch('/agent/debug/chat-messages', 'POST', body);
  expect(res.status).toBe(200);
  return readFrames(res);
}

function soulWith(edit: (s: ReturnType<typeof demoSoulConfig>) => void) {
  const s = demoSoulConfig();
  edit(s);
  return AgentSoulConfig.parse(s);
}

async function requestOf(messageId: string) {
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
  return run.request as { composition: { layers: { name: string; config: Record<string, unknown> }[] }; session_snapshot: unknown };
}

const systemPromptOf = async (messageId: string) =>
  (await requestOf(messageId)).composition.layers.find((l) => l.name === 'agent_soul_prompt')!.config.system_prompt;
const endOf = (frames: ClientFrame[]) => frames.at(-1)!;

describe('config resolution', () => {
  it('pins an existing conversation to the version it started with, even after a newer publish', async () => {
    const first = await chat(stack.apiUrl, key, { query: 'hi', user: 'pin' });
    const conversationId = endOf(first.frames).data.conversation_id as string;
    expect(await systemPromptOf(endOf(first.frames).data.message_id as string)).toBe(demoSoulConfig().prompt.system_prompt);

    const put = await consoleFetch('/agent/draft', 'PUT', {
      config: soulWith((s) => (s.prompt.system_prompt = 'Version two. Use [§tool:calculator:the calculator§] please.')),
    });
    expect(put.status).toBe(200);
    const pub = await consoleFetch('/agent/publish', 'POST', {});
    expect(pub.status).toBe(201);
    const v2 = (await pub.json()) as { id: string; version: number };
    expect(v2.version).toBe(2);
    const versions = (await (await consoleFetch('/agent/versions')).json()) as { data: { version: number; active: boolean }[] };
    expect(versions.data.map((v) => [v.version, v.active])).toEqual([
      [2, true],
      [1, false],
    ]);

    const again = await chat(stack.apiUrl, key, { query: 'still v1?', user: 'pin', conversation_id: conversationId });
    const againId = endOf(again.frames).data.message_id as string;
    expect(await systemPromptOf(againId)).toBe(demoSoulConfig().prompt.system_prompt);
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: againId } })).agent_config_version_id).toBe(
      stack.demo!.configVersionId,
    );

    const fresh = await chat(stack.apiUrl, key, { query: 'new conversation', user: 'pin' });
    const freshId = endOf(fresh.frames).data.message_id as string;
    // Mentions are expanded before the prompt reaches the model.
    expect(await systemPromptOf(freshId)).toBe('Version two. Use calculator please.');
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: freshId } })).agent_config_version_id).toBe(v2.id);
  });

  it('debugger turns run the draft in their own session scope; build drafts own theirs; published never shares', async () => {
    const published = await chat(stack.apiUrl, key, { query: 'published', user: 'scope' });
    const pubConv = await stack.db.conversation.findUniqueOrThrow({
      where: { id: endOf(published.frames).data.conversation_id as string },
    });
    const pubBinding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: pubConv.agent_workspace_binding_id! } });
    expect(pubBinding).toMatchObject({ config_kind: 'published', owner_type: 'CONVERSATION' });

    const dbg = await debugChat({ query: 'debugging the draft' });
    expect(endOf(dbg).event).toBe('message_end');
    const dbgConv = await stack.db.conversation.findUniqueOrThrow({ where: { id: endOf(dbg).data.conversation_id as string } });
    const draft = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
    const dbgBinding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: dbgConv.agent_workspace_binding_id! } });
    expect(dbgBinding).toMatchObject({
      config_kind: 'draft',
      session_scope_config_version_id: draft.id,
      agent_config_version_id: null,
      owner_type: 'CONVERSATION',
    });
    expect(dbgBinding.id).not.toBe(pubBinding.id);
    expect(dbgBinding.scope_key).not.toBe(pubBinding.scope_key);
    expect(dbgConv.account_id).toBe(stack.demo!.accountId);

    // A personal build draft: its binding is owned by the draft row and continues across its conversations.
    expect(
      (await consoleFetch('/agent/build-draft', 'PUT', { config: soulWith((s) => (s.prompt.system_prompt = 'My build draft.')) })).status,
    ).toBe(200);
    const b1 = await debugChat({ query: 'Remember: my build word is kiwi.', draft: 'build' });
    const buildDraft = await stack.db.agentConfigDraft.findFirstOrThrow({
      where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: stack.demo!.accountId },
    });
    expect(buildDraft.agent_workspace_binding_id).not.toBeNull();
    const buildBinding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: buildDraft.agent_workspace_binding_id! } });
    expect(buildBinding).toMatchObject({
      owner_type: 'BUILD_DRAFT',
      owner_id: buildDraft.id,
      config_kind: 'draft',
      session_scope_config_version_id: buildDraft.id,
    });
    expect(await systemPromptOf(endOf(b1).data.message_id as string)).toBe('My build draft.');
    const b2 = await debugChat({ query: 'What did I say earlier?', draft: 'build' });
    expect(b2.find((f) => f.event === 'message')!.data.answer).toContain('kiwi');
  });

  it('keeps the session across value-only draft edits and refuses a changed layer topology with 409', async () => {
    const t1 = await debugChat({ query: 'topology one' });
    const conversationId = endOf(t1).data.conversation_id as string;
    expect(
      (await consoleFetch('/agent/draft', 'PUT', { config: soulWith((s) => (s.prompt.system_prompt = 'Only the words changed.')) })).status,
    ).toBe(200);
    const t2 = await debugChat({ query: 'topology two', conversation_id: conversationId });
    expect(endOf(t2).event).toBe('message_end');
    expect((await requestOf(endOf(t2).data.message_id as string)).session_snapshot).not.toBeNull();

    // Removing ask_human removes a layer: the retained snapshot no longer fits.
    expect((await consoleFetch('/agent/draft', 'PUT', { config: soulWith((s) => (s.ask_human.enabled = false)) })).status).toBe(200);
    const t3 = await debugChat({ query: 'topology three', conversation_id: conversationId });
    expect(endOf(t3).event).toBe('error');
    expect(endOf(t3).data).toMatchObject({
      code: 'agent_session_configuration_changed',
      status: 409,
      message: SESSION_CONFIG_CHANGED_MESSAGE,
    });
    const failed = await stack.db.message.findUniqueOrThrow({ where: { id: endOf(t3).data.message_id as string } });
    expect(failed.status).toBe('failed');
    expect(await stack.db.agentBackendRun.findUnique({ where: { message_id: failed.id } })).toBeNull();
    // Only an existing conversation can see it (issue 34 item 3): a new conversation on the changed draft runs.
    const fresh = await debugChat({ query: 'topology four' });
    expect(endOf(fresh).event).toBe('message_end');
    // And a build draft whose topology changes gets a fresh binding: its next turn runs too (test/workspace/issue31.test.ts item 7).
    expect(
      (await consoleFetch('/agent/build-draft', 'PUT', { config: soulWith((s) => (s.prompt.system_prompt = 'Build, with ask_human.')) }))
        .status,
    ).toBe(200);
    expect(endOf(await debugChat({ query: 'build one', draft: 'build' })).event).toBe('message_end');
    expect((await consoleFetch('/agent/build-draft', 'PUT', { config: soulWith((s) => (s.ask_human.enabled = false)) })).status).toBe(200);
    expect(endOf(await debugChat({ query: 'build two', draft: 'build' })).event).toBe('message_end');
    await consoleFetch('/agent/draft', 'PUT', { config: demoSoulConfig() });
  });
});

describe('input guards and output moderation', () => {
  it('answers a moderated query with the preset answer without calling the backend', async () => {
    const soul = soulWith((s) => {
      s.features.moderation = {
        enabled: true,
        keywords: ['forbidden'],
        preset_answer: 'I cannot help with that.',
        output_enabled: true,
        output_preset_answer: 'Answer withheld.',
      };
    });
    await consoleFetch('/agent/draft', 'PUT', { config: soul });
    const pub = await consoleFetch('/agent/publish', 'POST', {});
    expect(pub.status).toBe(201);

    const { frames } = await chat(stack.apiUrl, key, { query: 'tell me the FORBIDDEN thing', user: 'mod' });
    expect(frames.map((f) => f.event)).toEqual(['message', 'message_end']);
    expect(frames[0]!.data.answer).toBe('I cannot help with that.');
    const id = endOf(frames).data.message_id as string;
    expect(await stack.db.agentBackendRun.findUnique({ where: { message_id: id } })).toBeNull();
    expect((await stack.db.message.findUniqueOrThrow({ where: { id } })).status).toBe('succeeded');

    // Inputs are moderated too.
    const viaInputs = await chat(stack.apiUrl, key, { query: 'harmless', inputs: { topic: 'forbidden lore' }, user: 'mod' });
    expect(viaInputs.frames[0]!.data.answer).toBe('I cannot help with that.');

    // Output moderation: the demo echoes the query, so the keyword reaches the answer through a clean query.
    const out = await chat(stack.apiUrl, key, { query: '/echo-history', user: 'mod-out' });
    expect(out.frames.map((f) => f.event)).not.toContain('message_replace');
    const out2 = await chat(stack.apiUrl, key, { query: '/think /long 3', user: 'mod-out2' });
    expect(out2.frames.find((f) => f.event === 'message')!.data.answer).toBe('alpha bravo charlie');
  });

  it('replaces a flagged answer with message_replace', async () => {
    const soul = soulWith((s) => {
      s.features.moderation = {
        enabled: false,
        keywords: ['bravo'],
        preset_answer: 'x',
        output_enabled: true,
        output_preset_answer: 'Answer withheld.',
      };
    });
    await consoleFetch('/agent/draft', 'PUT', { config: soul });
    await consoleFetch('/agent/publish', 'POST', {});
    const { frames } = await chat(stack.apiUrl, key, { query: '/long 3', user: 'mod-replace' });
    const evs = frames.map((f) => f.event);
    expect(evs.slice(-3)).toEqual(['message_replace', 'message', 'message_end']);
    expect(frames.find((f) => f.event === 'message_replace')!.data).toMatchObject({
      answer: 'Answer withheld.',
      reason: 'output_moderation',
    });
    expect(frames.find((f) => f.event === 'message')!.data.answer).toBe('Answer withheld.');
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: endOf(frames).data.message_id as string } });
    expect(msg.answer).toBe('Answer withheld.');
  });

  it('answers from an annotation above the similarity threshold, with annotation_reply metadata', async () => {
    await consoleFetch('/agent/draft', 'PUT', { config: demoSoulConfig() });
    await consoleFetch('/agent/publish', 'POST', {});
    const ann = await consoleFetch('/annotations', 'POST', {
      question: 'What are your opening hours?',
      content: 'We are open 9 to 5, Monday to Friday.',
    });
    expect(ann.status).toBe(201);
    const { id: annotationId } = (await ann.json()) as { id: string };
    expect((await consoleFetch('/annotation-settings', 'PUT', { enabled: true, score_threshold: 0.5 })).status).toBe(200);

    const hit = await chat(stack.apiUrl, key, { query: 'what are your opening hours', user: 'ann' });
    expect(hit.frames.map((f) => f.event)).toEqual(['message', 'message_end']);
    expect(hit.frames[0]!.data.answer).toBe('We are open 9 to 5, Monday to Friday.');
    const meta = endOf(hit.frames).data.metadata as { annotation_reply: { id: string; score: number } };
    expect(meta.annotation_reply.id).toBe(annotationId);
    expect(meta.annotation_reply.score).toBeGreaterThanOrEqual(0.5);
    expect((await stack.db.annotation.findUniqueOrThrow({ where: { id: annotationId } })).hit_count).toBe(1);

    const miss = await chat(stack.apiUrl, key, { query: 'tell me a joke about penguins', user: 'ann' });
    expect(miss.frames.map((f) => f.event)).not.toEqual(['message', 'message_end']);
    expect(miss.frames.find((f) => f.event === 'message')!.data.answer).toContain('penguins');
    await consoleFetch('/annotation-settings', 'PUT', { enabled: false });
  });
});

describe('failures', () => {
  it.each([
    ['InvokeRateLimitError', 'rate_limit_error', 429],
    ['InvokeBadRequestError', 'completion_request_error', 400],
    ['InvokeConnectionError', 'completion_request_error', 400],
  ])('classifies a provider %s as %s (%i), keeping usage and the partial answer', async (kind, code, status) => {
    const { frames } = await chat(stack.apiUrl, key, { query: `/fail ${kind}`, user: `fail-${kind}` });
    expect(endOf(frames).event).toBe('error');
    expect(endOf(frames).data).toMatchObject({ code, status });
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: endOf(frames).data.message_id as string } });
    expect(msg).toMatchObject({ status: 'failed', error_code: code });
    expect(msg.usage).not.toBeNull();
    const deltas = frames
      .filter((f) => f.event === 'agent_message')
      .map((f) => f.data.answer)
      .join('');
    expect(msg.answer).toBe(deltas);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } });
    expect(conv.active_message_id).toBeNull();
  });
});
