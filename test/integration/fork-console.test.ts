/**
 * Fork, the console's side and the usage side (issue 35 item 2): the console forks one of the caller's debugger
 * conversations at any message (api/console/fork.ts, the service route's forkConversation) and the fork answers from
 * that point as a debugger conversation of the same account; another account or tenant gets 404. A fork's copied
 * messages carry no usage of their own, so the app's token and price totals over its messages (what per-app stats
 * sum) do not grow by forking; the fork's own next turn adds exactly what it was billed. Database audit after.
 */
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureAccount, ensureAgentApp, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import { DebugForkResponse } from '../../api/openapi/automation.js';
import { CONSOLE_DEBUGGER_RESPONSES } from '../../api/openapi/console-debugger.js';
import type { Stack } from '../../stack/start-stack.js';
import { assertAuditClean } from '../faults/audit.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let appId: string;
const keys = { owner: '', colleague: '', stranger: '' };
let strangerAppId: string;
const since = new Date();

beforeAll(async () => {
  stack = await startTestStack('fork_console');
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
function consoleFetch(path: string, opts: { method?: string; body?: unknown; who?: Who; app?: string } = {}) {
  return fetch(`${stack.apiUrl}/console/api/apps/${opts.app ?? appId}${path}`, {
    method: opts.method ?? 'GET',
    headers: { authorization: `Bearer ${keys[opts.who ?? 'owner']}`, 'content-type': 'application/json' },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
}

interface Turn {
  messageId: string;
  conversationId: string;
  answer: string;
}

function turnOf(frames: ClientFrame[]): Turn {
  const end = frames.find((f) => f.event === 'message_end');
  expect(end, JSON.stringify(frames.at(-1)?.data)).toBeDefined();
  return {
    messageId: end!.data.message_id as string,
    conversationId: end!.data.conversation_id as string,
    answer: String(frames.find((f) => f.event === 'message')!.data.answer),
  };
}

async function debugTurn(body: Record<string, unknown>): Promise<Turn> {
  const res = await consoleFetch('/agent/debug/chat-messages', { method: 'POST', body });
  expect(res.status).toBe(200);
  return turnOf(await readFrames(res));
}

async function serviceTurn(body: Record<string, unknown>): Promise<Turn> {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, body);
  expect(status, JSON.stringify(frames[0]?.data)).toBe(200);
  return turnOf(frames);
}

/** The user messages the demo model was given, from its /echo-history answer. */
const historyOf = (answer: string) => [...answer.matchAll(/^\d+\. "(.*)"$/gm)].map((m) => m[1]);

/** What per-app usage stats sum over an app's messages (Dify's token-costs: tokens and price), and its ledger. */
async function appTotals() {
  const [m] = await stack.db.$queryRaw<{ tokens: number; split: number; price: string }[]>`
    select coalesce(sum(total_tokens), 0)::int as tokens, coalesce(sum(message_tokens + answer_tokens), 0)::int as split,
           coalesce(sum(total_price), 0)::text as price
      from messages where app_id = ${appId}::uuid`;
  const [l] = await stack.db.$queryRaw<{ tokens: number }[]>`
    select coalesce(sum(l.prompt_tokens + l.completion_tokens), 0)::int as tokens
      from credit_ledger l join agent_backend_runs r on r.backend_run_id = l.agent_run_id
      join messages m on m.id = r.message_id where m.app_id = ${appId}::uuid`;
  return { ...m!, ledger: l!.tokens };
}

describe('console fork', () => {
  it('forks a debugger conversation at a message: a debugger conversation of the same account answering from there', async () => {
    const a = await debugTurn({ query: 'one' });
    const b = await debugTurn({ query: 'two', conversation_id: a.conversationId });
    await debugTurn({ query: 'three', conversation_id: a.conversationId });
    const path = `/agent/debug/conversations/${a.conversationId}/fork`;

    const res = await consoleFetch(path, { method: 'POST', body: { message_id: b.messageId } });
    const json = (await res.json()) as Record<string, unknown>;
    expect(res.status, JSON.stringify(json)).toBe(201);
    const fork = DebugForkResponse.parse(json);
    expect(fork.id).not.toBe(a.conversationId);
    expect(fork.active_message_id).toBeNull();

    // Listed among the account's debugger conversations, with the thread up to the fork point.
    const list = CONSOLE_DEBUGGER_RESPONSES.DebugConversationListResponse.parse(
      await (await consoleFetch('/agent/debug/conversations')).json(),
    );
    expect(list.data.map((c) => c.id)).toContain(fork.id);
    const msgs = CONSOLE_DEBUGGER_RESPONSES.DebugMessageListResponse.parse(
      await (await consoleFetch(`/agent/debug/messages?conversation_id=${fork.id}`)).json(),
    );
    expect(msgs.data.map((m) => m.query)).toEqual(['one', 'two']);
    expect(msgs.data.map((m) => m.id)).not.toContain(b.messageId);

    // The next debugger turn on the fork answers from the forked point; the source keeps its three.
    const next = await debugTurn({ query: '/echo-history', conversation_id: fork.id });
    expect(next.conversationId).toBe(fork.id);
    expect(historyOf(next.answer)).toEqual(['one', 'two', '/echo-history']);
    const source = await (await consoleFetch(`/agent/debug/messages?conversation_id=${a.conversationId}`)).json();
    expect((source as { data: { query: string }[] }).data.map((m) => m.query)).toEqual(['one', 'two', 'three']);

    // Hidden from another account of the tenant and from another tenant (on our app id and on its own).
    for (const [who, app] of [
      ['colleague', appId],
      ['stranger', appId],
      ['stranger', strangerAppId],
    ] as [Who, string][]) {
      const r = await consoleFetch(path, { method: 'POST', body: { message_id: b.messageId }, who, app });
      expect(r.status, `${who} on ${app === appId ? 'our' : 'their'} app`).toBe(404);
    }
    // A message of another conversation, a malformed body, and a service-API conversation (not a debugger one).
    const bad = await consoleFetch(path, { method: 'POST', body: { message_id: next.messageId } });
    expect([bad.status, ((await bad.json()) as { code: string }).code]).toEqual([404, 'message_not_exists']);
    expect((await consoleFetch(path, { method: 'POST', body: {} })).status).toBe(400);
    const svc = await serviceTurn({ query: 'a service turn', user: 'svc-user' });
    const notDebug = await consoleFetch(`/agent/debug/conversations/${svc.conversationId}/fork`, {
      method: 'POST',
      body: { message_id: svc.messageId },
    });
    expect([notDebug.status, ((await notDebug.json()) as { code: string }).code]).toEqual([404, 'conversation_not_exists']);
  });
});

describe('fork and usage', () => {
  it("the app's usage totals do not grow when a conversation is forked; the fork's own turn adds what it was billed", async () => {
    const user = 'counter';
    const a = await serviceTurn({ query: 'count one', user });
    const b = await serviceTurn({ query: 'count two', user, conversation_id: a.conversationId });
    const before = await appTotals();
    expect(before.tokens).toBeGreaterThan(0);
    expect(before.tokens).toBe(before.ledger);

    const res = await fetch(`${stack.apiUrl}/v1/conversations/${a.conversationId}/fork`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user, message_id: b.messageId }),
    });
    expect(res.status).toBe(201);
    const fork = (await res.json()) as { id: string };
    const after = await appTotals();
    expect(after).toEqual(before);

    // The copies carry no usage, and say where it was billed; the sources keep theirs.
    const copies = await stack.db.message.findMany({ where: { conversation_id: fork.id } });
    expect(copies).toHaveLength(2);
    for (const c of copies) {
      expect([c.message_tokens, c.answer_tokens, c.total_tokens, c.total_price.toString(), c.usage]).toEqual([0, 0, 0, '0', null]);
      expect((c.metadata as { forked_from_message_id?: string }).forked_from_message_id).toMatch(/^[0-9a-f-]{36}$/);
    }
    const sources = await stack.db.message.findMany({ where: { id: { in: [a.messageId, b.messageId] } } });
    for (const s of sources) expect(s.total_tokens).toBeGreaterThan(0);

    // A turn of the fork is billed like any other: the totals grow by its own tokens, equal to its ledger rows.
    const next = await serviceTurn({ query: 'count three', user, conversation_id: fork.id });
    const own = await stack.db.message.findUniqueOrThrow({ where: { id: next.messageId } });
    expect(own.total_tokens).toBeGreaterThan(0);
    const grown = await appTotals();
    expect(grown.tokens).toBe(before.tokens + own.total_tokens);
    expect(grown.tokens).toBe(grown.ledger);
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
