/**
 * Temporal outages (issue 22 items 1, 4 and 5): the server SIGKILLed longer than runAgent's heartbeat
 * timeout during an answer; a form submitted while Temporal is down and the api killed before the signal
 * got through; an api replica started while Temporal is unreachable.
 */
import { describe, expect, it } from 'vitest';
import { history, runTurn, submitForm, TurnStream } from './client.js';
import { sleep, step, waitFor } from './harness.js';
import { useFaultStack } from './fixture.js';
import { query, wordCount } from '../support/sql.js';

const ctx = useFaultStack('temporal');

async function readyz(apiUrl: string): Promise<{ status: number; checks: Record<string, boolean> }> {
  const r = await fetch(`${apiUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
  const body = (await r.json()) as { checks: Record<string, boolean> };
  return { status: r.status, checks: body.checks };
}

describe('Temporal outages', () => {
  it('Temporal down longer than the heartbeat timeout during an answer: the turn completes with the whole answer (issue 22 item 1)', async () => {
    const { stack, track, recovery } = ctx;
    // 500 tokens at 50 ms: a 25 s answer; Temporal goes away for 12 s (runAgent's heartbeat timeout is 5 s).
    const s = track(await TurnStream.start(stack, { query: '/slow 50 /long 500', user: 'temporal-down' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 5, timeoutMs: 60_000, what: 'the fifth delta' });
    step('SIGKILL Temporal for 12 s');
    await stack.killTemporal();
    await sleep(12_000);
    await stack.startTemporal();
    const back = Date.now();
    step('Temporal back');
    const end = await s.finish(180_000);
    recovery('Temporal down 12 s mid-answer → turn done (answer was still streaming)', Date.now() - back);
    recovery('Temporal down 12 s mid-answer: longest silence of the client stream', s.longestSilenceMs());
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    const [msg] = await query<{ status: string; answer: string }>(
      stack.databaseUrl,
      `select status::text, answer from messages where id = $1`,
      [s.messageId],
    );
    expect(msg!.status).toBe('succeeded');
    expect(wordCount(s.answer)).toBe(500);
    const runs = await query<{ status: string; cancel_reason: string | null }>(
      stack.databaseUrl,
      `select status, cancel_reason from agent_backend.runs where idempotency_key = $1`,
      [`message-${s.messageId}`],
    );
    expect(runs).toEqual([{ status: 'succeeded', cancel_reason: null }]);
  });

  it('an api replica and a worker start while Temporal is unreachable: readyz names Temporal, history works, then turns work once it is back (issue 22 item 5)', async () => {
    const { stack, track, recovery } = ctx;
    const first = track(await runTurn(stack, { query: 'Remember me, please.', user: 'no-temporal' }, 60_000));
    expect(first.terminal!.event).toBe('message_end');

    await stack.killTemporal();
    await stack.api.kill('SIGKILL');
    await stack.worker.kill('SIGKILL');
    step('starting the api and a worker with Temporal down');
    await stack.worker.start({ waitReady: false });
    await stack.api.start();
    const ready = await readyz(stack.apiUrl);
    expect(ready.status).toBe(503);
    expect(ready.checks).toMatchObject({ database: true, temporal: false });
    const h = await history(stack, first.conversationId, 'no-temporal');
    expect(h.status).toBe(200);
    const { data } = (await h.json()) as { data: { query: string; answer: string }[] };
    expect(data.map((m) => m.query)).toEqual(['Remember me, please.']);

    await stack.startTemporal();
    const back = Date.now();
    await waitFor(
      '/readyz 200 after Temporal is back',
      async () => ((await readyz(stack.apiUrl)).status === 200 ? true : undefined),
      60_000,
    );
    recovery('api started without Temporal: Temporal back → /readyz 200', Date.now() - back);
    expect(stack.worker.up, 'the worker started without Temporal is still running').toBe(true);
    const next = track(await runTurn(stack, { query: 'And now?', user: 'no-temporal', conversation_id: first.conversationId }, 90_000));
    recovery('api started without Temporal: Temporal back → next turn done', Date.now() - back);
    expect(next.terminal!.event, JSON.stringify(next.terminal!.data)).toBe('message_end');
  });

  it('a form submitted while Temporal is down, the api SIGKILLed while it still owes the signal: the workflow resumes once and the continuation completes (issue 22 item 4)', async () => {
    const { stack, track, recovery } = ctx;
    const asked = track(await runTurn(stack, { query: '/ask Favourite number?', user: 'form-user' }, 60_000));
    const hir = asked.frames.find((f) => f.event === 'human_input_required');
    expect(hir, asked.summary()).toBeDefined();
    const token = (hir!.data.data as { form_token: string }).form_token;

    await stack.killTemporal();
    step('submitting the form with Temporal down');
    const submitted = submitForm(stack, token, 'form-user', '42').then(
      async (r) => `${r.status} ${await r.text()}`,
      (err: Error) => `request failed: ${err.message}`,
    );
    // The submission is recorded; the api is (still) trying to deliver the signal when it dies.
    await waitFor(
      'the form to be recorded as submitted',
      async () =>
        (await query(stack.databaseUrl, `select 1 from human_input_forms where token = $1 and status = 'submitted'`, [token])).length
          ? true
          : undefined,
      30_000,
    );
    await sleep(2000);
    step('SIGKILL api');
    await stack.api.kill('SIGKILL');
    step(`submission answered: ${await submitted}`);
    // Restarted while Temporal is still down (an api that cannot start without Temporal is item 5: restart it
    // once Temporal is back, so this test judges only the lost signal).
    await stack.api.start({ waitReady: false });
    await sleep(3000);
    await stack.startTemporal();
    const back = Date.now();
    step('Temporal back');
    if (!stack.api.up) {
      step('the api did not survive starting without Temporal (item 5); starting it again');
      await stack.api.start();
    } else {
      await waitFor(
        'api /healthz',
        async () =>
          (await fetch(`${stack.apiUrl}/healthz`).then(
            (r) => r.ok,
            () => false,
          ))
            ? true
            : undefined,
        90_000,
      );
    }

    const [form] = await query<{ resume_message_id: string; workflow_id: string }>(
      stack.databaseUrl,
      `select resume_message_id, workflow_id from human_input_forms where token = $1`,
      [token],
    );
    expect(form!.resume_message_id).toBeTruthy();
    const cont = track(await TurnStream.attach(stack, form!.resume_message_id, 'form-user'));
    await cont.finish(90_000).catch(async (err: Error) => {
      const [m] = await query<{ status: string }>(stack.databaseUrl, `select status::text from messages where id = $1`, [
        form!.resume_message_id,
      ]);
      throw new Error(`${err.message}; the continuation message is ${m?.status}`);
    });
    recovery('form submitted during a Temporal outage, api SIGKILLed: Temporal back → continuation done', Date.now() - back);
    expect(cont.terminal!.event, JSON.stringify(cont.terminal!.data)).toBe('message_end');
    expect(cont.answer).toContain('You answered: "42"');
    // Resumed once: one continuation message for the paused turn.
    const continuations = await query(stack.databaseUrl, `select id from messages where resumed_from_message_id = $1`, [asked.messageId]);
    expect(continuations).toHaveLength(1);
    const status = await waitFor(
      'the turn workflow to complete',
      () =>
        stack.withTemporal(async (c) =>
          (await c.workflow.getHandle(form!.workflow_id).describe()).status.name === 'COMPLETED' ? 'COMPLETED' : undefined,
        ),
      30_000,
      500,
    );
    expect(status).toBe('COMPLETED');
  });
});
