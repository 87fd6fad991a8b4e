/**
 * Regenerate and fork (issue 35 item 2) on the real stack: a chat request's parent_message_id branches the thread and
 * the turn's model history is the thread up to that parent (the demo model's /echo-history lists the user messages it
 * was given); GET /v1/messages shows one branch with its parents and siblings; a fork answers from the forked point
 * with a binding and workspace of its own; the per-message snapshots are pruned by their rule; bad ids are 4xx.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UUID_NIL } from '../../core/domain/message-thread.js';
import { MessageListResponse } from '../../api/schemas.js';
import type { Stack } from '../../stack/start-stack.js';
import { assertAuditClean } from '../faults/audit.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { markerPath } from '../../core/domain/workspace-marker.js';

const PER_BRANCH = 2;
let stack: Stack;
let key: string;
const since = new Date();

beforeAll(async () => {
  stack = await startTestStack('regenerate_fork', { env: { SESSION_SNAPSHOTS_PER_BRANCH: PER_BRANCH } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

interface Turn {
  messageId: string;
  conversationId: string;
  answer: string;
}

async function turn(body: Record<string, unknown>): Promise<Turn> {
  const { status, frames } = await chat(stack.apiUrl, key, body);
  expect(status, JSON.stringify(frames[0]?.data)).toBe(200);
  const end = frames.find((f: ClientFrame) => f.event === 'message_end');
  expect(end, JSON.stringify(frames.at(-1)?.data)).toBeDefined();
  return {
    messageId: end!.data.message_id as string,
    conversationId: end!.data.conversation_id as string,
    answer: String(frames.find((f) => f.event === 'message')!.data.answer),
  };
}

/** The user messages the demo model was given, from its /echo-history answer. */
const historyOf = (answer: string) => [...answer.matchAll(/^\d+\. "(.*)"$/gm)].map((m) => m[1]);

async function messages(conversationId: string, user: string, extra: Record<string, string> = {}) {
  const qs = new URLSearchParams({ conversation_id: conversationId, user, ...extra });
  const res = await fetch(`${stack.apiUrl}/v1/messages?${qs}`, { headers: { authorization: `Bearer ${key}` } });
  const json = (await res.json()) as Record<string, unknown>;
  return { status: res.status, json };
}

async function threadOf(conversationId: string, user: string, extra: Record<string, string> = {}) {
  const { status, json } = await messages(conversationId, user, extra);
  expect(status, JSON.stringify(json)).toBe(200);
  return MessageListResponse.parse(json).data;
}

const post = (path: string, body: unknown) =>
  fetch(`${stack.apiUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('regenerate', () => {
  const user = 'regen';
  let m1: Turn, m2: Turn, m2b: Turn, m3: Turn, m3b: Turn;

  it('answers a sibling from the session before it: the model sees the thread up to the parent, not the abandoned branch', async () => {
    m1 = await turn({ query: 'alpha', user });
    const conversation_id = m1.conversationId;
    m2 = await turn({ query: 'bravo', user, conversation_id });
    // A sibling of bravo under alpha (Dify's regenerate posts the parent of the answer it replaces).
    m2b = await turn({ query: 'charlie', user, conversation_id, parent_message_id: m1.messageId });
    // No parent: after the newest message, on charlie's branch.
    m3 = await turn({ query: '/echo-history', user, conversation_id });
    expect(historyOf(m3.answer)).toEqual(['alpha', 'charlie', '/echo-history']);
    // Back on bravo's branch.
    m3b = await turn({ query: '/echo-history', user, conversation_id, parent_message_id: m2.messageId });
    expect(historyOf(m3b.answer)).toEqual(['alpha', 'bravo', '/echo-history']);

    const rows = await stack.db.message.findMany({ where: { conversation_id }, orderBy: { created_at: 'asc' } });
    expect(rows.map((r) => [r.id, r.parent_message_id])).toEqual([
      [m1.messageId, UUID_NIL],
      [m2.messageId, m1.messageId],
      [m2b.messageId, m1.messageId],
      [m3.messageId, m2b.messageId],
      [m3b.messageId, m2.messageId],
    ]);
    // Every turn kept its session snapshot.
    const snapshots = await stack.db.messageSessionSnapshot.findMany({ where: { conversation_id } });
    expect(snapshots.filter((r) => r.snapshot !== null && r.pruned_at === null).length).toBe(5);
  });

  it('regenerating the same query twice gives two siblings with the same history', async () => {
    const again = await turn({ query: '/echo-history', user, conversation_id: m1.conversationId, parent_message_id: m2.messageId });
    expect(historyOf(again.answer)).toEqual(historyOf(m3b.answer));
    const stored = await stack.db.message.findUniqueOrThrow({ where: { id: again.messageId } });
    expect(stored.parent_message_id).toBe(m2.messageId);
    m3b = again;
  });

  it('regenerates the first message with UUID_NIL: a second root with a fresh session', async () => {
    const root = await turn({ query: '/echo-history', user, conversation_id: m1.conversationId, parent_message_id: UUID_NIL });
    expect(historyOf(root.answer)).toEqual(['/echo-history']);
    const thread = await threadOf(m1.conversationId, user);
    expect(thread.map((m) => [m.id, m.parent_message_id])).toEqual([[root.messageId, null]]);
    expect(thread[0]!.sibling_ids).toEqual([m1.messageId, root.messageId]);
  });

  it('GET /v1/messages: the branch ending at the newest message, another with branch_id, older pages with first_id', async () => {
    const conv = m1.conversationId;
    // bravo's branch, through the newest message below bravo (the second regenerate).
    const viaBravo = await threadOf(conv, user, { branch_id: m2.messageId });
    expect(viaBravo.map((m) => m.id)).toEqual([m1.messageId, m2.messageId, m3b.messageId]);
    expect(viaBravo.map((m) => m.parent_message_id)).toEqual([null, m1.messageId, m2.messageId]);
    expect(viaBravo[1]!.sibling_ids).toEqual([m2.messageId, m2b.messageId]);
    expect(viaBravo[2]!.sibling_ids.length).toBe(2);
    const viaCharlie = await threadOf(conv, user, { branch_id: m2b.messageId });
    expect(viaCharlie.map((m) => m.query)).toEqual(['alpha', 'charlie', '/echo-history']);
    // Dify pagination inside the thread: the page before first_id.
    const page = await threadOf(conv, user, { first_id: m3b.messageId, limit: '1' });
    expect(page.map((m) => m.id)).toEqual([m2.messageId]);
    const { json } = await messages(conv, user, { first_id: m3b.messageId, limit: '1' });
    expect(json.has_more).toBe(true);
  });

  it('refuses bad parents and branches with a 4xx code', async () => {
    const conversation_id = m1.conversationId;
    const other = await turn({ query: 'elsewhere', user });
    const cases: [Record<string, unknown>, number, string][] = [
      [{ parent_message_id: '5b0c0f4e-9d1a-4c55-8a55-0d3f7e0a1b2c', conversation_id }, 404, 'parent_message_not_exists'],
      [{ parent_message_id: other.messageId, conversation_id }, 404, 'parent_message_not_exists'],
      [{ parent_message_id: m1.messageId }, 404, 'parent_message_not_exists'],
      [{ parent_message_id: 'not-a-uuid', conversation_id }, 400, 'invalid_param'],
    ];
    for (const [extra, status, code] of cases) {
      const res = await post('/v1/chat-messages', { query: 'x', user, inputs: {}, response_mode: 'blocking', ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(status);
      expect(await res.json()).toMatchObject({ code });
    }
    expect((await messages(conversation_id, user, { branch_id: other.messageId })).status).toBe(404);
  });
});

describe('fork', () => {
  it('answers from the forked point, with its own binding and a workspace copy of its own', async () => {
    const user = 'forker';
    const a = await turn({ query: 'one', user });
    const b = await turn({ query: 'two', user, conversation_id: a.conversationId });
    await turn({ query: 'three', user, conversation_id: a.conversationId });
    const source = await stack.db.conversation.findUniqueOrThrow({ where: { id: a.conversationId }, include: { messages: true } });
    const srcBinding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: source.agent_workspace_binding_id! } });
    // The demo agent has no shell: the workspace's files are put there as a shell would.
    const srcDir = path.join(stack.config.workspacesDir, srcBinding.workspace_id);
    fs.mkdirSync(srcDir, { recursive: true });
    fs.writeFileSync(path.join(srcDir, 'notes.txt'), 'from the source');

    const res = await post(`/v1/conversations/${a.conversationId}/fork`, { user, message_id: b.messageId });
    const fork = (await res.json()) as { id: string };
    expect(res.status, JSON.stringify(fork)).toBe(201);
    expect(fork.id).not.toBe(a.conversationId);

    const copied = await threadOf(fork.id, user);
    expect(copied.map((m) => [m.query, m.answer])).toEqual([
      ['one', a.answer],
      ['two', b.answer],
    ]);
    expect(copied[0]!.id).not.toBe(a.messageId);
    expect(copied[1]!.parent_message_id).toBe(copied[0]!.id);

    const next = await turn({ query: '/echo-history', user, conversation_id: fork.id });
    expect(historyOf(next.answer)).toEqual(['one', 'two', '/echo-history']);

    const forked = await stack.db.conversation.findUniqueOrThrow({ where: { id: fork.id } });
    const forkBinding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: forked.agent_workspace_binding_id! } });
    expect(forkBinding.id).not.toBe(srcBinding.id);
    expect(forkBinding.workspace_id).not.toBe(srcBinding.workspace_id);
    const forkDir = path.join(stack.config.workspacesDir, forkBinding.workspace_id);
    expect(fs.readFileSync(path.join(forkDir, 'notes.txt'), 'utf8')).toBe('from the source');
    expect(JSON.parse(fs.readFileSync(markerPath(forkDir), 'utf8'))).toMatchObject({
      workspace_id: forkBinding.workspace_id,
    });
    fs.writeFileSync(path.join(forkDir, 'notes.txt'), 'changed in the fork');
    expect(fs.readFileSync(path.join(srcDir, 'notes.txt'), 'utf8')).toBe('from the source');

    // The source is untouched: its three messages, its branch.
    expect((await threadOf(a.conversationId, user)).map((m) => m.query)).toEqual(['one', 'two', 'three']);

    // Refusals: a message of another conversation, someone else's conversation, a malformed body.
    const bad = await post(`/v1/conversations/${a.conversationId}/fork`, { user, message_id: next.messageId });
    expect([bad.status, ((await bad.json()) as { code: string }).code]).toEqual([404, 'message_not_exists']);
    const foreign = await post(`/v1/conversations/${a.conversationId}/fork`, { user: 'someone-else', message_id: b.messageId });
    expect(foreign.status).toBe(404);
    const malformed = await post(`/v1/conversations/${a.conversationId}/fork`, { user });
    expect(malformed.status).toBe(400);
  });
});

describe('pruning', () => {
  it(`keeps the snapshots of the last ${PER_BRANCH} messages of each branch; a regenerate further back is 409`, async () => {
    const user = 'pruner';
    const turns: Turn[] = [await turn({ query: 'q1', user })];
    for (let i = 2; i <= 6; i++) turns.push(await turn({ query: `q${i}`, user, conversation_id: turns[0]!.conversationId }));
    const rows = await stack.db.messageSessionSnapshot.findMany({ where: { conversation_id: turns[0]!.conversationId } });
    const live = new Set(rows.filter((r) => r.snapshot !== null).map((r) => r.message_id));
    // Pruning runs once more than 2 x PER_BRANCH are live: after the fifth turn (q4, q5 kept), then q6 added.
    expect(turns.map((t) => live.has(t.messageId))).toEqual([false, false, false, true, true, true]);
    expect(rows.filter((r) => r.pruned_at !== null).length).toBe(3);

    const res = await post('/v1/chat-messages', {
      query: 'again',
      user,
      inputs: {},
      conversation_id: turns[0]!.conversationId,
      parent_message_id: turns[1]!.messageId,
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'session_snapshot_pruned' });

    const fromKept = await turn({
      query: '/echo-history',
      user,
      conversation_id: turns[0]!.conversationId,
      parent_message_id: turns[3]!.messageId,
    });
    expect(historyOf(fromKept.answer)).toEqual(['q1', 'q2', 'q3', 'q4', '/echo-history']);
  });
});

describe('afterwards', () => {
  it('the database audit is clean', async () => {
    await assertAuditClean({
      databaseUrl: stack.databaseUrl,
      withTemporal: async (fn) => {
        const connection = await Connection.connect({ address: stack.temporalAddress, connectTimeout: '5 seconds' });
        try {
          return await fn(new Client({ connection, namespace: stack.config.TEMPORAL_NAMESPACE }));
        } finally {
          await connection.close().catch(() => undefined);
        }
      },
      taskQueue: stack.config.TEMPORAL_TASK_QUEUE,
      since,
    });
  }, 120_000);
});
