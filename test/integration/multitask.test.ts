/**
 * Multitask (double-texting) strategies on POST /v1/chat-messages (issue 35 item 1, docs/ARCHITECTURE.md "Multitask
 * strategies"): a message for a busy conversation is refused (reject, Dify's 409), queued and run in order (enqueue,
 * across a worker SIGKILL), or run after stopping the turn in flight (interrupt keeps it, rollback hides it). Each test
 * audits the database after: messages, runs, ledger rows, the model's history (session snapshot, run requests).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { killWorkerChild } from '../support/processes.js';

/** The issue's figure: parallel follow-ups queued behind one turn (the queue limit must hold them all). */
const FOLLOW_UPS = 50;
const QUEUE_LIMIT = FOLLOW_UPS;
let stack: Stack;
let key: string;
const headers = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

beforeAll(async () => {
  stack = await startTestStack('multitask', {
    worker: 'child',
    env: { DEMO_MODEL_TOKEN_DELAY_MS: 0, CONVERSATION_QUEUE_LIMIT: QUEUE_LIMIT },
  });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

async function blocking(body: Record<string, unknown>) {
  const res = await fetch(`${stack.apiUrl}/v1/chat-messages`, {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({ inputs: {}, ...body, response_mode: 'blocking' }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const stop = (taskId: string, user: string) =>
  fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, { method: 'POST', headers: headers(), body: JSON.stringify({ user }) });

/** A conversation with one finished turn, then a long slow turn streaming (its reader and message id, after 3 deltas). */
async function busyConversation(user: string, query = '/slow 40 /long 300') {
  const first = await chat(stack.apiUrl, key, { query: `Remember me: I am ${user}.`, user });
  const conversationId = first.frames.at(-1)!.data.conversation_id as string;
  const res = await postChat(stack.apiUrl, key, { query, user, conversation_id: conversationId });
  const reader = new FrameReader(res);
  let n = 0;
  const head = await reader.read((f) => f.event === 'agent_message' && ++n === 3);
  return { conversationId, reader, head, runningId: head[0]!.data.task_id as string };
}

/** Polls a database condition (the queue is rows: a test waits for what it then acts on), for up to `ms`. */
async function until(cond: () => Promise<boolean>, ms = 30_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end && !(await cond());) await new Promise((r) => setTimeout(r, 50));
}

function answerOf(frames: ClientFrame[]) {
  return frames.find((f) => f.event === 'message')?.data.answer as string | undefined;
}

async function runRequestSnapshot(messageId: string): Promise<string> {
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
  return JSON.stringify((run.request as { session_snapshot?: unknown }).session_snapshot ?? null);
}

async function ledgerRows(messageId: string) {
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
  return stack.db.$queryRaw<{ total_tokens: number }[]>`
    select (prompt_tokens + completion_tokens)::int as total_tokens from credit_ledger where agent_run_id = ${run.backend_run_id}`;
}

describe('multitask strategies', () => {
  it('reject (and no strategy): 409 conversation_busy naming the turn in flight, nothing written', async () => {
    const busy = await busyConversation('rita');
    for (const extra of [{}, { multitask_strategy: 'reject' }, { multitask_strategy: null }]) {
      const r = await blocking({ query: 'me too', user: 'rita', conversation_id: busy.conversationId, ...extra });
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ code: 'conversation_busy', task_id: busy.runningId });
    }
    expect(await stack.db.message.count({ where: { conversation_id: busy.conversationId, query: 'me too' } })).toBe(0);
    const bad = await blocking({ query: 'x', user: 'rita', conversation_id: busy.conversationId, multitask_strategy: 'later' });
    expect(bad.status).toBe(400);
    await stop(busy.runningId, 'rita');
    await busy.reader.read();
  });

  it(`enqueue: ${FOLLOW_UPS} parallel follow-ups all run, in order, one at a time, each exactly once — across a worker SIGKILL`, async () => {
    const user = 'quinn';
    // Long enough (three minutes) to outlast queueing them all on a loaded machine; it is stopped once they are.
    const busy = await busyConversation(user, '/slow 100 /long 1800');
    const queries = Array.from({ length: FOLLOW_UPS }, (_, i) => `follow-up ${String(i + 1).padStart(2, '0')}`);
    const pending = queries.map((query) => blocking({ query, user, conversation_id: busy.conversationId, multitask_strategy: 'enqueue' }));
    // All of them are queued behind the running turn before it ends.
    const queued = () => stack.db.message.count({ where: { conversation_id: busy.conversationId, status: 'queued' } });
    await until(async () => (await queued()) === FOLLOW_UPS, 150_000);
    expect(await queued()).toBe(FOLLOW_UPS);
    await stop(busy.runningId, user);
    await busy.reader.read();
    // Once a few have run, the worker dies mid-queue and comes back.
    await until(
      async () =>
        (await stack.db.message.count({ where: { conversation_id: busy.conversationId, status: 'succeeded', query: { in: queries } } })) >=
        5,
    );
    await killWorkerChild(stack);
    await stack.startWorkerChild();
    const results = await Promise.all(pending);
    for (const r of results) expect(r.status).toBe(200);

    const msgs = await stack.db.message.findMany({ where: { conversation_id: busy.conversationId, query: { in: queries } } });
    expect(msgs).toHaveLength(FOLLOW_UPS);
    expect(new Set(results.map((r) => r.body.message_id))).toEqual(new Set(msgs.map((m) => m.id)));
    for (const m of msgs) expect(m.status).toBe('succeeded');
    const byPosition = [...msgs].sort((a, b) => Number(a.queue_position! - b.queue_position!));
    // One at a time and in queue order: each turn's first event comes after the previous turn's last.
    const spans = await stack.db.$queryRaw<{ message_id: string; first: Date; last: Date; ends: number }[]>`
      select message_id::text, min(created_at) as first, max(created_at) as last,
             count(*) filter (where event in ('message_end', 'error'))::int as ends
        from message_events where message_id = any(${msgs.map((m) => m.id)}::uuid[]) group by message_id`;
    const span = new Map(spans.map((s) => [s.message_id, s]));
    for (let i = 0; i < byPosition.length; i++) {
      const s = span.get(byPosition[i]!.id)!;
      expect(s.ends).toBe(1);
      if (i > 0) expect(s.first.getTime()).toBeGreaterThanOrEqual(span.get(byPosition[i - 1]!.id)!.last.getTime());
    }
    // Exactly once: one backend run per message, billed by its ledger rows.
    for (const m of msgs) {
      const runs = await stack.db.$queryRaw<{ n: number }[]>`
        select count(*)::int as n from agent_backend.runs where idempotency_key = ${`message-${m.id}`}`;
      expect(runs[0]!.n).toBe(1);
      const ledger = await ledgerRows(m.id);
      expect(ledger.length).toBeGreaterThan(0);
      expect(ledger.reduce((t, r) => t + r.total_tokens, 0)).toBe(m.total_tokens);
    }
    // The model saw them in that order, each once: its own history.
    const echo = await chat(stack.apiUrl, key, { query: '/echo-history', user, conversation_id: busy.conversationId });
    const listed = answerOf(echo.frames)!;
    const seen = queries.map((q) => listed.indexOf(q));
    expect(seen.every((i) => i >= 0)).toBe(true);
    const order = byPosition.map((m) => listed.indexOf(m.query));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    for (const q of queries) expect(listed.split(q).length - 1).toBe(1);
    // Each turn was started once, by the conversation's coordinator.
    const d = await stack.temporal.workflow.getHandle(byPosition[0]!.workflow_id).describe();
    expect(d.parentExecution?.workflowId).toBe(`conversation-queue-${busy.conversationId}`);
  }, 480_000);

  it('interrupt: the running turn stops as a user stop (partial answer, usage, snapshot kept); the next turn sees it', async () => {
    const user = 'ivan';
    const busy = await busyConversation(user);
    const next = await postChat(stack.apiUrl, key, {
      query: 'What did I say earlier?',
      user,
      conversation_id: busy.conversationId,
      multitask_strategy: 'interrupt',
    });
    expect(next.status).toBe(200);
    const stopped = [...busy.head, ...(await busy.reader.read())];
    expect(stopped.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    const partial = answerOf(stopped)!;
    const frames = await new FrameReader(next).read();
    expect(frames.at(-1)!.event).toBe('message_end');
    expect(answerOf(frames)).toBe('Earlier you said: "/slow 40 /long 300".');

    const a = await stack.db.message.findUniqueOrThrow({ where: { id: busy.runningId } });
    expect(a.status).toBe('stopped');
    expect(a.answer).toBe(partial);
    expect(partial.trim().split(/\s+/).length).toBeLessThan(300);
    expect(a.total_tokens).toBeGreaterThan(0);
    // Billed: the cut model call is in the ledger (an estimate of what it streamed, core/domain/llm/credits.ts).
    expect((await ledgerRows(a.id)).reduce((t, r) => t + r.total_tokens, 0)).toBeGreaterThan(0);
    // The next turn started from the stopped turn's post-cancel snapshot: the partial answer is in its history.
    const b = await stack.db.message.findUniqueOrThrow({ where: { id: frames.at(-1)!.data.message_id as string } });
    expect(b.status).toBe('succeeded');
    expect(await runRequestSnapshot(b.id)).toContain(partial.trim().split(/\s+/).slice(0, 3).join(' '));
    const history = await fetch(`${stack.apiUrl}/v1/messages?conversation_id=${busy.conversationId}&user=${user}`, { headers: headers() });
    expect(((await history.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(expect.arrayContaining([a.id, b.id]));
  });

  it('rollback: the running turn is stopped and leaves no trace in history or the model’s memory, only in the ledger', async () => {
    const user = 'rolf';
    const busy = await busyConversation(user);
    const next = await postChat(stack.apiUrl, key, {
      query: '/echo-history',
      user,
      conversation_id: busy.conversationId,
      multitask_strategy: 'rollback',
    });
    expect(next.status).toBe(200);
    await busy.reader.read();
    const frames = await new FrameReader(next).read();
    expect(frames.at(-1)!.event).toBe('message_end');
    const listed = answerOf(frames)!;
    expect(listed).toContain('Remember me: I am rolf.');
    expect(listed).not.toContain('/slow 40 /long 300');

    const a = await stack.db.message.findUniqueOrThrow({ where: { id: busy.runningId } });
    expect(a.status).toBe('stopped');
    expect(a.rolled_back_at).not.toBeNull();
    expect(a.total_tokens).toBeGreaterThan(0);
    // Billed: the cut model call is in the ledger (an estimate of what it streamed, core/domain/llm/credits.ts).
    expect((await ledgerRows(a.id)).reduce((t, r) => t + r.total_tokens, 0)).toBeGreaterThan(0);
    const b = frames.at(-1)!.data.message_id as string;
    expect(await runRequestSnapshot(b)).not.toContain('/slow 40 /long 300');
    const history = await fetch(`${stack.apiUrl}/v1/messages?conversation_id=${busy.conversationId}&user=${user}`, { headers: headers() });
    const ids = ((await history.json()) as { data: { id: string; sibling_ids?: string[] }[] }).data;
    expect(ids.map((m) => m.id)).not.toContain(a.id);
    expect(ids.map((m) => m.id)).toContain(b);
    expect(ids.flatMap((m) => m.sibling_ids ?? [])).not.toContain(a.id);
    // The conversation goes on from there.
    const after = await chat(stack.apiUrl, key, { query: '/echo-history', user, conversation_id: busy.conversationId });
    expect(answerOf(after.frames)).not.toContain('/slow 40 /long 300');
  });

  it('a full queue refuses with 429 conversation_queue_full; a queued message can be stopped before it runs', async () => {
    const user = 'fay';
    // Long enough (a minute) to outlast filling the queue and stopping it on a loaded machine; it is stopped anyway.
    const busy = await busyConversation(user, '/slow 100 /long 600');
    const queued: Response[] = [];
    for (let i = 0; i < QUEUE_LIMIT; i++) {
      const res = await postChat(stack.apiUrl, key, {
        query: `wait ${i}`,
        user,
        conversation_id: busy.conversationId,
        multitask_strategy: 'enqueue',
      });
      expect(res.status).toBe(200);
      queued.push(res);
    }
    const full = await blocking({ query: 'one too many', user, conversation_id: busy.conversationId, multitask_strategy: 'enqueue' });
    expect(full.status).toBe(429);
    expect(full.body).toMatchObject({ code: 'conversation_queue_full', limit: QUEUE_LIMIT });
    const waiting = await stack.db.message.findMany({ where: { conversation_id: busy.conversationId, status: 'queued' } });
    expect(waiting).toHaveLength(QUEUE_LIMIT);
    for (const m of waiting) expect(await (await stop(m.id, user)).json()).toEqual({ result: 'success' });
    await stop(busy.runningId, user);
    // Each stream ends as a stop's (a `message_queued` frame may come first), with nothing of a run.
    for (const res of queued) {
      const events = (await new FrameReader(res).read()).map((f) => f.event);
      expect(events.slice(-2)).toEqual(['message', 'message_end']);
      expect(events.filter((e) => e !== 'message_queued')).toEqual(['message', 'message_end']);
    }
    await busy.reader.read();
    const ended = await stack.db.message.findMany({ where: { id: { in: waiting.map((m) => m.id) } } });
    for (const m of ended) expect(m.status).toBe('stopped');
    expect(await stack.db.agentBackendRun.count({ where: { message_id: { in: waiting.map((m) => m.id) } } })).toBe(0);
  });

  it('the app’s default strategy (console) applies to requests without one', async () => {
    const consoleHeaders = { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' };
    const url = `${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/multitask-settings`;
    expect(
      (await fetch(url, { method: 'PUT', headers: consoleHeaders, body: JSON.stringify({ default_strategy: 'sometimes' }) })).status,
    ).toBe(400);
    const put = await fetch(url, { method: 'PUT', headers: consoleHeaders, body: JSON.stringify({ default_strategy: 'enqueue' }) });
    expect(await put.json()).toEqual({ default_strategy: 'enqueue', queue_limit: QUEUE_LIMIT });
    try {
      const user = 'dora';
      const busy = await busyConversation(user);
      const followUp = blocking({ query: 'queued by default', user, conversation_id: busy.conversationId });
      await until(async () => (await stack.db.message.count({ where: { conversation_id: busy.conversationId, status: 'queued' } })) === 1);
      await stop(busy.runningId, user);
      await busy.reader.read();
      const r = await followUp;
      expect(r.status).toBe(200);
      const m = await stack.db.message.findUniqueOrThrow({ where: { id: r.body.message_id as string } });
      expect(m.status).toBe('succeeded');
      expect(m.queue_position).not.toBeNull();
      // An explicit strategy still wins over the default.
      const busy2 = await busyConversation(`${user}-2`);
      const refused = await blocking({
        query: 'no',
        user: `${user}-2`,
        conversation_id: busy2.conversationId,
        multitask_strategy: 'reject',
      });
      expect(refused.body).toMatchObject({ code: 'conversation_busy' });
      await stop(busy2.runningId, `${user}-2`);
      await busy2.reader.read();
    } finally {
      await fetch(url, { method: 'PUT', headers: consoleHeaders, body: JSON.stringify({ default_strategy: 'reject' }) });
    }
    expect(await (await fetch(url, { headers: consoleHeaders })).json()).toEqual({ default_strategy: 'reject', queue_limit: QUEUE_LIMIT });
  });
});
