/**
 * PostgreSQL outages (issue 22 items 2, 3 and 7): the database crashes (immediate shutdown, as a failover
 * does to its clients) while an answer streams, for 8 s and for 30 s, and a message is posted while it is
 * down.
 */
import { describe, expect, it } from 'vitest';
import { postChat, runTurn, TurnStream } from './client.js';
import { sleep, step, waitFor } from './harness.js';
import { useFaultStack } from './fixture.js';
import { query, wordCount } from '../support/sql.js';

const ctx = useFaultStack('postgres');

/** Streams a long answer, crashes PostgreSQL for `downMs` after the fifth delta, and reads the turn to its end. */
async function answerAcrossOutage(user: string, query: string, downMs: number): Promise<{ s: TurnStream; sinceBack: number }> {
  const { stack, track } = ctx;
  const s = track(await TurnStream.start(stack, { query, user }));
  let n = 0;
  await s.read({ until: (f) => f.event === 'agent_message' && ++n === 5, timeoutMs: 60_000, what: 'the fifth delta' });
  step(`crashing PostgreSQL for ${downMs / 1000} s`);
  await stack.crashPg();
  await sleep(downMs);
  await stack.startPg();
  const back = Date.now();
  step('PostgreSQL back');
  await s.finish(240_000);
  return { s, sinceBack: Date.now() - back };
}

describe('PostgreSQL outages', () => {
  it('PostgreSQL down 8 s while the answer streams: no gap, the final answer == the deltas == the stored answer (issue 22 item 2)', async () => {
    const { stack, recovery } = ctx;
    // 500 tokens at 40 ms: a 20 s answer.
    const { s, sinceBack } = await answerAcrossOutage('pg-short', '/slow 40 /long 500', 8000);
    recovery('PostgreSQL down 8 s mid-answer → turn done (answer was still streaming)', sinceBack);
    recovery('PostgreSQL down 8 s mid-answer: longest silence of the client stream', s.longestSilenceMs());
    expect(s.terminal!.event, JSON.stringify(s.terminal!.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(500);
    expect(s.deltas).toBe(s.answer);
    const [msg] = await query<{ status: string; answer: string }>(
      stack.databaseUrl,
      `select status::text, answer from messages where id = $1`,
      [s.messageId],
    );
    expect(msg).toEqual({ status: 'succeeded', answer: s.answer });
  });

  it('PostgreSQL down 30 s while the answer streams: the in-flight turn is not failed as backend_restarted, it completes (issue 22 item 3)', async () => {
    const { stack, recovery } = ctx;
    // 250 tokens at 40 ms: a 10 s answer whose model call and run end while the database is away (their
    // terminal writes must wait for it), and a backend whose heartbeats went unrecorded for 30 s.
    const { s, sinceBack } = await answerAcrossOutage('pg-long', '/slow 40 /long 250', 30_000);
    recovery('PostgreSQL down 30 s, the answer ended during the outage: PostgreSQL back → turn done', sinceBack);
    const runs = await query<{ status: string; error_type: string | null }>(
      stack.databaseUrl,
      `select status, error_type from agent_backend.runs where idempotency_key = $1`,
      [`message-${s.messageId}`],
    );
    const failures = await query<{ reason: string | null }>(
      stack.databaseUrl,
      `select e.data->>'reason' as reason from agent_backend.events e join agent_backend.runs r using (run_id)
        where r.idempotency_key = $1 and e.type = 'run_failed'`,
      [`message-${s.messageId}`],
    );
    expect(
      failures.map((f) => f.reason),
      'the run was failed as if its backend had restarted',
    ).not.toContain('backend_restarted');
    expect(s.terminal!.event, JSON.stringify(s.terminal!.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(250);
    expect(runs).toEqual([{ status: 'succeeded', error_type: null }]);
  });

  it('POST /v1/chat-messages during a PostgreSQL outage: 503 with Retry-After, nothing half-written (issue 22 item 7)', async () => {
    const { stack, track, recovery } = ctx;
    const before = await query<{ messages: number; conversations: number; runs: number }>(
      stack.databaseUrl,
      `select (select count(*) from messages)::int as messages, (select count(*) from conversations)::int as conversations,
              (select count(*) from agent_backend.runs)::int as runs`,
    );
    await stack.crashPg();
    const res = await postChat(stack, { query: 'Is anyone there?', user: 'pg-down-post' });
    const body = await res.text();
    expect(res.status, body).toBe(503);
    expect(res.headers.get('retry-after'), 'Retry-After header').toMatch(/^\d+$/);
    expect(JSON.parse(body)).toMatchObject({ status: 503 });

    await stack.startPg();
    const back = Date.now();
    await waitFor(
      '/readyz 200 after PostgreSQL is back',
      async () =>
        (await fetch(`${stack.apiUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        )) === 200
          ? true
          : undefined,
      60_000,
      100,
    );
    recovery('PostgreSQL back → api /readyz 200', Date.now() - back);
    const after = await query(
      stack.databaseUrl,
      `select (select count(*) from messages)::int as messages, (select count(*) from conversations)::int as conversations,
              (select count(*) from agent_backend.runs)::int as runs`,
    );
    expect(after).toEqual(before);
    // The retry the client makes after Retry-After works.
    const retry = track(await runTurn(stack, { query: 'Is anyone there?', user: 'pg-down-post' }, 60_000));
    recovery('PostgreSQL back → a new turn done', Date.now() - back);
    expect(retry.terminal!.event, JSON.stringify(retry.terminal!.data)).toBe('message_end');
  });
});
