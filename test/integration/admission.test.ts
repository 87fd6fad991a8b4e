/**
 * Admission control and backpressure (issue 21), on the real stack over HTTP + SSE: with MAX_TURNS_IN_FLIGHT=2 a
 * third concurrent turn is refused with 503 `server_busy` + Retry-After before anything is written — streaming,
 * blocking and from the console debugger — and goes through once a turn ends. With MAX_RUNS_PER_BACKEND=1 the agent
 * backend refuses a second concurrent run with 503 `backend_busy`; runAgent retries it and the turn completes with
 * one answer, one backend run and one charge.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { backendRunsOf } from '../support/sql.js';
import { parseSse } from '../../core/platform/sse.js';
import { postChat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  // Pings every 250 ms: a turn waiting for a backend slot (seconds) must keep its client stream alive meanwhile.
  stack = await startTestStack('admission', { env: { MAX_TURNS_IN_FLIGHT: 2, MAX_RUNS_PER_BACKEND: 1, SSE_PING_MS: 250 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

/** ~1.8 s of answer per turn: long enough that two of them are surely in flight while the third knocks. */
const SLOW = '/slow 300 a b c d e f';

const debuggerChat = (query: string) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/agent/debug/chat-messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, inputs: {} }),
  });

async function expectShed(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await res.json()).toMatchObject({ code: 'server_busy', status: 503 });
}

/** Rows a refused turn must not have written. */
async function footprint() {
  const [messages, conversations, endUsers] = await Promise.all([
    stack.db.message.count(),
    stack.db.conversation.count(),
    stack.db.endUser.count({ where: { session_id: 'shed-user' } }),
  ]);
  return { messages, conversations, endUsers };
}

const answerOf = (frames: ClientFrame[]) => frames.find((f) => f.event === 'message')?.data.answer as string | undefined;

/** A turn's frames, and how many pings arrived before its first answer delta. */
async function readCountingPings(res: Response): Promise<{ frames: ClientFrame[]; pingsBeforeAnswer: number }> {
  const frames: ClientFrame[] = [];
  let pingsBeforeAnswer = 0;
  for await (const f of parseSse(res.body!)) {
    if (f.event === 'ping') {
      if (!frames.some((x) => x.event === 'agent_message')) pingsBeforeAnswer += 1;
      continue;
    }
    frames.push({ id: f.id, event: f.event, data: JSON.parse(f.data) as Record<string, unknown> });
  }
  return { frames, pingsBeforeAnswer };
}

/** The backend's own view of its runs in progress. */
async function activeRuns(): Promise<number> {
  const res = await fetch(`${stack.agentBackendUrl}/healthz`);
  return ((await res.json()) as { active_runs: number }).active_runs;
}

describe('admission control: a deployment-wide cap on turns in flight', () => {
  it('refuses a third concurrent turn with 503 server_busy + Retry-After, writing nothing, then admits it once a turn ends', async () => {
    const [a, b] = await Promise.all([
      postChat(stack.apiUrl, key, { query: SLOW, user: 'busy-a' }),
      postChat(stack.apiUrl, key, { query: SLOW, user: 'busy-b' }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const reading = Promise.all([readCountingPings(a), readCountingPings(b)]);

    const before = await footprint();
    await expectShed(await postChat(stack.apiUrl, key, { query: 'hello', user: 'shed-user' }));
    await expectShed(await postChat(stack.apiUrl, key, { query: 'hello', user: 'shed-user', response_mode: 'blocking' }));
    await expectShed(await debuggerChat('hello'));
    expect(await footprint()).toEqual({ ...before, endUsers: 0 });

    // The backend holds one run at a time: a run beyond it is 503'd by the backend itself.
    await expect.poll(activeRuns, { timeout: 10_000, interval: 50 }).toBe(1);
    // runAgent records the run id right after the backend answered its create: on a busy box that can trail the run's start.
    await expect
      .poll(() => stack.db.agentBackendRun.count({ where: { backend_run_id: { not: null } } }), { timeout: 10_000, interval: 50 })
      .toBeGreaterThan(0);
    const captured = await stack.db.agentBackendRun.findFirstOrThrow({ where: { backend_run_id: { not: null } } });
    const direct = await fetch(`${stack.agentBackendUrl}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.config.AGENT_BACKEND_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...(captured.request as object), idempotency_key: 'admission-test-direct' }),
    });
    expect(direct.status).toBe(503);
    expect(Number(direct.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await direct.json()).toMatchObject({ code: 'backend_busy', status: 503 });
    // Full, yet a repeated create of a run that exists (runAgent after a lost attempt) is answered with that run.
    const repeated = await fetch(`${stack.agentBackendUrl}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.config.AGENT_BACKEND_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(captured.request),
    });
    expect(repeated.status).toBe(202);
    expect(((await repeated.json()) as { run_id: string }).run_id).toBe(captured.backend_run_id);

    const [ra, rb] = await reading;
    const [fa, fb] = [ra.frames, rb.frames];
    for (const frames of [fa, fb]) {
      expect(frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
      expect(answerOf(frames)).toContain('a b c d e f');
    }

    // Capacity is back: the same requests go through, streaming, blocking and from the debugger.
    const streamed = await postChat(stack.apiUrl, key, { query: 'hello', user: 'shed-user' });
    expect(streamed.status).toBe(200);
    expect((await readFrames(streamed)).at(-1)?.event).toBe('message_end');
    const blocking = await postChat(stack.apiUrl, key, { query: 'hello', user: 'shed-user', response_mode: 'blocking' });
    expect(blocking.status).toBe(200);
    expect(((await blocking.json()) as { answer: string }).answer.length).toBeGreaterThan(0);
    const debug = await debuggerChat('hello');
    expect(debug.status).toBe(200);
    expect((await readFrames(debug)).at(-1)?.event).toBe('message_end');

    const retried = await auditBackendRetry([fa, fb]);
    // The retried turn's client stream kept its pings while its run waited for the backend slot.
    expect([ra, rb].find((r) => r.frames.at(-1)!.data.message_id === retried[0])!.pingsBeforeAnswer).toBeGreaterThan(0);
  }, 120_000);
});

/**
 * Of the two concurrent turns, the one whose run the backend refused shows the retried runAgent attempt in its
 * workflow history (the refusal as its last failure); both end with one answer, one backend run, one charge.
 */
async function auditBackendRetry(turns: ClientFrame[][]): Promise<string[]> {
  const retried: string[] = [];
  for (const frames of turns) {
    const messageId = frames.at(-1)!.data.message_id as string;
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(msg.status).toBe('succeeded');
    expect(msg.answer).toContain('a b c d e f');
    expect(await stack.db.messageEvent.count({ where: { message_id: messageId, event: 'message' } })).toBe(1);
    expect(await backendRunsOf(stack.databaseUrl, messageId)).toBe(1);
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    const ledger = await stack.db.creditLedger.findMany({ where: { agent_run_id: run.backend_run_id! } });
    expect(ledger).toHaveLength(1);
    expect(msg.total_tokens).toBe(ledger[0]!.prompt_tokens + ledger[0]!.completion_tokens);

    const history = (await stack.temporal.workflow.getHandle(msg.workflow_id).fetchHistory()).events ?? [];
    const started = history.filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!);
    const runAgent = started.find((s) => (s.lastFailure?.message ?? '').includes('backend_busy') || (s.attempt ?? 1) > 1);
    if (runAgent) {
      expect(runAgent.attempt).toBeGreaterThan(1);
      expect(runAgent.lastFailure?.message).toContain('backend_busy');
      retried.push(messageId);
    }
  }
  // The backend held one run at a time and the two turns overlapped, so at least one of them was retried.
  expect(retried.length).toBeGreaterThanOrEqual(1);
  return retried;
}
