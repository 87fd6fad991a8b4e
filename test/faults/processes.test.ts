/**
 * Processes killed mid-turn: the worker (baseline: the turn succeeds exactly once), the agent backend
 * (baseline: one clean error, the conversation goes on) and the api while it serves the backend's model
 * call (issue 22 item 6: the turn completes, billed once).
 */
import { describe, expect, it } from 'vitest';
import { runTurn, TurnStream } from './client.js';
import { step } from './harness.js';
import { useFaultStack } from './fixture.js';
import { query, wordCount } from '../support/sql.js';

const ctx = useFaultStack('processes');

function ledgerRows(databaseUrl: string, messageId: string) {
  return query<{ billing_request_id: string; tokens: number }>(
    databaseUrl,
    `select l.billing_request_id, l.prompt_tokens + l.completion_tokens as tokens
       from credit_ledger l join agent_backend_runs r on r.backend_run_id = l.agent_run_id where r.message_id = $1`,
    [messageId],
  );
}

async function messageRow(databaseUrl: string, id: string) {
  const rows = await query<{ status: string; answer: string; error_code: string | null }>(
    databaseUrl,
    `select status::text, answer, error_code from messages where id = $1`,
    [id],
  );
  return rows[0]!;
}

describe('a process killed mid-turn', () => {
  it('worker SIGKILLed twice while two answers stream: both turns succeed exactly once with the whole answer', async () => {
    const { stack, track, recovery } = ctx;
    // 36 s and 27 s answers: each still streams after two worker restarts (a tsx worker bundles its workflows at start,
    // 10+ s on a loaded two-core machine; a 16 s answer could end before the second kill).
    const a = track(await TurnStream.start(stack, { query: '/slow 60 /long 600', user: 'worker-kill-a' }));
    const b = track(await TurnStream.start(stack, { query: '/slow 60 /long 450', user: 'worker-kill-b' }));
    let back = 0;
    for (const round of [1, 2]) {
      let n = 0;
      await a.read({
        until: (f) => f.event === 'agent_message' && ++n === 3,
        timeoutMs: 60_000,
        what: `three more deltas (round ${round})`,
      });
      step(`SIGKILL worker (round ${round})`);
      await stack.worker.kill('SIGKILL');
      await stack.worker.start();
      back = Date.now();
    }
    await Promise.all([a.finish(120_000), b.finish(120_000)]);
    recovery('worker SIGKILL mid-answer (2nd of 2), worker restarted → both turns done', Date.now() - back);
    recovery('worker SIGKILL mid-answer: longest silence of a client stream', Math.max(a.longestSilenceMs(), b.longestSilenceMs()));
    for (const [s, expected] of [
      [a, 600],
      [b, 450],
    ] as const) {
      expect(s.terminal!.event, JSON.stringify(s.terminal!.data)).toBe('message_end');
      expect(wordCount(s.answer)).toBe(expected);
      expect((await messageRow(stack.databaseUrl, s.messageId)).status).toBe('succeeded');
      expect(await ledgerRows(stack.databaseUrl, s.messageId)).toHaveLength(1);
    }
  });

  it('agent backend SIGKILL: one clean error event, and the next message of the conversation works', async () => {
    const { stack, track, recovery } = ctx;
    const s = track(await TurnStream.start(stack, { query: '/slow 40 /long 400', user: 'backend-kill' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    step('SIGKILL agent backend');
    await stack.backend.kill('SIGKILL');
    await stack.backend.start();
    const back = Date.now();
    const end = await s.finish(150_000);
    recovery('agent backend SIGKILL, backend restarted → error event', Date.now() - back);
    expect(end.event, JSON.stringify(end.data)).toBe('error');
    expect(s.count('error') + s.count('message_end')).toBe(1);
    expect((await messageRow(stack.databaseUrl, s.messageId)).status).toBe('failed');

    const next = track(
      await runTurn(stack, { query: 'Are you still there?', user: 'backend-kill', conversation_id: s.conversationId }, 60_000),
    );
    expect(next.terminal!.event, JSON.stringify(next.terminal!.data)).toBe('message_end');
    expect(next.answer).toContain('You said: "Are you still there?"');
  });

  it('api SIGKILL while it serves the model call: the turn completes with one continuous answer, billed once (issue 22 item 6)', async () => {
    const { stack, track, recovery } = ctx;
    const s = track(await TurnStream.start(stack, { query: '/slow 40 /long 250', user: 'api-kill' }));
    let n = 0;
    // Deltas are flowing: the backend's model call is streaming through the api's inner LLM endpoint.
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    step('SIGKILL api');
    await stack.api.kill('SIGKILL');
    await stack.api.start();
    const back = Date.now();
    // The client re-attaches with Last-Event-ID, as a browser would.
    const end = await s.finish(120_000);
    recovery('api SIGKILL during a model call, api restarted → turn done', Date.now() - back);
    recovery('api SIGKILL during a model call: longest silence of the client stream', s.longestSilenceMs());
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(s.reattaches).toBeGreaterThanOrEqual(1);
    expect(wordCount(s.answer)).toBe(250);
    expect(s.answer).toBe(s.deltas);
    expect((await messageRow(stack.databaseUrl, s.messageId)).status).toBe('succeeded');
    // One model call, one ledger row (a replay under the same billing request id charges nothing more).
    expect(await ledgerRows(stack.databaseUrl, s.messageId)).toHaveLength(1);
  });
});
