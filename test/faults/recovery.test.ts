/**
 * Issue 30: recoveries measured in seconds, each followed by the database audit (fixture.ts; tokens == ledger for
 * every terminal status). A dead agent backend is found by its run lease (~5 s) and the turn fails once, with the usage
 * that was billed; a backend that is only slow (frozen 3.5 s like a long GC pause, a model call silent for longer than
 * the lease) is never declared dead; a refused turn start whose rollback met a PostgreSQL outage is ended by the
 * worker's sweeper; the api starts and answers /readyz without PostgreSQL, its inner LLM route answering 503; a run
 * whose create answer was lost on the backend's database connection starts on the next attempt.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { signExecutionContext } from '../../core/protocol/exec-context.js';
import { history, postChat, runTurn, TurnStream } from './client.js';
import { sleep, step, waitFor } from './harness.js';
import { useFaultStack } from './fixture.js';
import { query, wordCount } from '../support/sql.js';

// Two agent backend replicas behind one address (the worker and the api use the front): a live peer judges the
// leases of the one that is killed or frozen.
const ctx = useFaultStack('recovery', { backendPgProxy: true, backendPeer: true });

interface MessageUsage {
  status: string;
  error_code: string | null;
  total_tokens: number;
  total_price: string;
  usage: { total_tokens: number; total_price: string } | null;
}

async function messageUsage(id: string): Promise<MessageUsage> {
  const [m] = await query<MessageUsage>(
    ctx.stack.databaseUrl,
    `select status::text, error_code, total_tokens, total_price::text, usage from messages where id = $1`,
    [id],
  );
  return m!;
}

async function ledgerOf(messageId: string): Promise<{ tokens: number; rows: number }> {
  const [l] = await query<{ tokens: number; rows: number }>(
    ctx.stack.databaseUrl,
    `select coalesce(sum(l.prompt_tokens + l.completion_tokens), 0)::int as tokens, count(l.*)::int as rows
       from agent_backend_runs r left join credit_ledger l on l.agent_run_id = r.backend_run_id where r.message_id = $1`,
    [messageId],
  );
  return l!;
}

async function backendFailures(messageId: string): Promise<string[]> {
  const rows = await query<{ reason: string | null }>(
    ctx.stack.databaseUrl,
    `select e.data->>'reason' as reason from agent_backend.events e join agent_backend.runs r using (run_id)
      where r.idempotency_key = $1 and e.type = 'run_failed'`,
    [`message-${messageId}`],
  );
  return rows.map((r) => r.reason ?? '');
}

async function readyz(apiUrl: string): Promise<{ status: number; checks: Record<string, boolean> }> {
  const r = await fetch(`${apiUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
  return { status: r.status, checks: ((await r.json()) as { checks: Record<string, boolean> }).checks };
}

describe('a dead backend is found in seconds; a slow one never', () => {
  it('agent backend SIGKILLed mid-answer: the turn fails once within seconds, its usage is what the ledger billed', async () => {
    const { stack, track, recovery } = ctx;
    const s = track(await TurnStream.start(stack, { query: '/slow 40 /long 400', user: 'lease-kill' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    step('SIGKILL agent backend (restarted at once)');
    const killed = Date.now();
    await stack.backend.kill('SIGKILL');
    // Read on while the backend restarts: the error may come from the peer replica first.
    const ended = s.finish(90_000).then((f) => ({ f, at: Date.now() }));
    await stack.backend.start();
    const restartMs = Date.now() - killed;
    const { f: end, at } = await ended;
    const tookMs = at - killed;
    recovery('agent backend SIGKILL, restarted at once → turn failed (backend_restarted, lease 5 s)', tookMs);
    recovery('agent backend SIGKILL: its restart (for comparison)', restartMs);
    expect(end.event, JSON.stringify(end.data)).toBe('error');
    expect(s.count('error') + s.count('message_end')).toBe(1);
    expect(await backendFailures(s.messageId)).toEqual(['backend_restarted']);
    // Was 30 s of lease plus up to 10 s of reap interval; generous bound for a loaded two-core machine.
    expect(tookMs).toBeLessThan(25_000);
    // The model call the kill cut was billed (estimated); the failed turn shows exactly that.
    const m = await messageUsage(s.messageId);
    const l = await ledgerOf(s.messageId);
    expect(l.rows).toBeGreaterThanOrEqual(1);
    expect(m.total_tokens).toBe(l.tokens);
    expect(m.total_tokens).toBeGreaterThan(0);
    expect((end.data.metadata as { usage: { total_tokens: number } }).usage.total_tokens).toBe(l.tokens);
    const h = (await (await history(stack, s.conversationId, 'lease-kill')).json()) as {
      data: { id: string; metadata: { usage: { total_tokens: number } } }[];
    };
    expect(h.data.find((x) => x.id === s.messageId)?.metadata.usage.total_tokens).toBe(l.tokens);
  });

  it('agent backend SIGKILLed and left down, a peer replica up: its lease lapses and the turn fails within ~6 s', async () => {
    const { stack, track, recovery } = ctx;
    const s = track(await TurnStream.start(stack, { query: '/slow 40 /long 400', user: 'lease-peer' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    step('SIGKILL agent backend (not restarted; the peer stays up)');
    const killed = Date.now();
    await stack.backend.kill('SIGKILL');
    const end = await s.finish(60_000);
    const tookMs = Date.now() - killed;
    recovery('agent backend SIGKILL, a peer up → turn failed (the peer reaped the lapsed lease)', tookMs);
    expect(end.event, JSON.stringify(end.data)).toBe('error');
    expect(s.count('error') + s.count('message_end')).toBe(1);
    expect(await backendFailures(s.messageId)).toEqual(['backend_restarted']);
    expect(tookMs).toBeLessThan(15_000);
    expect(await messageUsage(s.messageId)).toMatchObject({ total_tokens: (await ledgerOf(s.messageId)).tokens });
    const next = track(await runTurn(stack, { query: 'Still there?', user: 'lease-peer', conversation_id: s.conversationId }, 60_000));
    expect(next.terminal!.event, JSON.stringify(next.terminal!.data)).toBe('message_end');
  });

  it('agent backend frozen 3.5 s (SIGSTOP, a long GC pause) mid-answer: not declared dead, the turn completes whole', async () => {
    const { stack, track, recovery } = ctx;
    const s = track(await TurnStream.start(stack, { query: '/slow 40 /long 300', user: 'lease-pause' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    // The peer's reaper runs all along: the frozen owner's lease is 3.5 s old at most when it renews again.
    step('SIGSTOP agent backend for 3.5 s');
    stack.backend.child!.kill('SIGSTOP');
    await sleep(3_500);
    stack.backend.child!.kill('SIGCONT');
    const resumed = Date.now();
    const end = await s.finish(90_000);
    recovery('agent backend frozen 3.5 s mid-answer, resumed → turn done (not reaped)', Date.now() - resumed);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(300);
    expect(await backendFailures(s.messageId)).toEqual([]);
  });

  it('a model call silent for 14 s (longer than the 5 s lease): not declared dead, the turn completes', async () => {
    const { stack, track } = ctx;
    const s = track(await runTurn(stack, { query: '/slow 7000 /long 2', user: 'lease-slow' }, 90_000));
    expect(s.terminal!.event, JSON.stringify(s.terminal!.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(2);
    expect(await backendFailures(s.messageId)).toEqual([]);
  });
});

describe('no lock or pending message survives an outage', () => {
  it("a refused turn start whose rollback meets a PostgreSQL outage: the worker's sweeper fails the message and frees the conversation", async () => {
    const { stack, track, recovery } = ctx;
    const first = track(await runTurn(stack, { query: 'Remember this conversation.', user: 'sweep' }, 60_000));
    expect(first.terminal!.event).toBe('message_end');
    const conversationId = first.conversationId;

    // Temporal frozen: the start hangs until its 10 s deadline, and PostgreSQL is gone by then.
    step('SIGSTOP Temporal; POST a turn');
    stack.signalTemporal('SIGSTOP');
    let messageId = '';
    try {
      const answered = postChat(stack, { query: 'Is anyone there?', user: 'sweep', conversation_id: conversationId }).then(
        async (r) => ({ status: r.status, body: await r.text() }),
        (err: Error) => ({ status: 0, body: err.message }),
      );
      messageId = await waitFor(
        'the new message (pending)',
        async () =>
          (
            await query<{ id: string }>(stack.databaseUrl, `select id from messages where conversation_id = $1 and status = 'pending'`, [
              conversationId,
            ])
          )[0]?.id,
        15_000,
        20,
      );
      step('crashing PostgreSQL before the rollback');
      await stack.crashPg();
      const res = await answered;
      step(`POST answered ${res.status} ${res.body.slice(0, 200)}`);
      expect(res.status).toBe(503);
    } finally {
      // The frozen server never saw the start: killed, it comes back without the workflow.
      await stack.killTemporal();
    }
    await stack.startTemporal();
    await stack.startPg();
    const back = Date.now();
    step('PostgreSQL and Temporal back; waiting for the sweeper');
    const [m] = await query<{ status: string; error_code: string | null }>(
      stack.databaseUrl,
      `select status::text, error_code from messages where id = $1`,
      [messageId],
    );
    expect(m, 'the rollback did not run: the message is still pending').toEqual({ status: 'pending', error_code: null });
    await waitFor(
      'the sweeper to fail the message and release the lock',
      async () => {
        const [r] = await query<{ status: string; active: string | null }>(
          stack.databaseUrl,
          `select m.status::text, c.active_message_id as active from messages m join conversations c on c.id = m.conversation_id where m.id = $1`,
          [messageId],
        );
        return r?.status === 'failed' && r.active === null ? true : undefined;
      },
      90_000,
      250,
    );
    recovery(
      'refused start + PostgreSQL down at its rollback: PostgreSQL back → message failed, lock released (sweeper)',
      Date.now() - back,
    );
    const swept = await query<{ error_code: string; events: string[] }>(
      stack.databaseUrl,
      `select m.error_code, array(select event from message_events e where e.message_id = m.id order by seq) as events from messages m where m.id = $1`,
      [messageId],
    );
    expect(swept).toEqual([{ error_code: 'temporal_unavailable', events: ['error'] }]);
    // A re-attached client gets the error; the conversation takes its next turn.
    const reattached = track(await TurnStream.attach(stack, messageId, 'sweep'));
    expect((await reattached.finish(30_000)).event).toBe('error');
    const next = track(await runTurn(stack, { query: 'And now?', user: 'sweep', conversation_id: conversationId }, 90_000));
    recovery('refused start + PostgreSQL down at its rollback: PostgreSQL back → next turn of the conversation done', Date.now() - back);
    expect(next.terminal!.event, JSON.stringify(next.terminal!.data)).toBe('message_end');
  });

  it('the api starts while PostgreSQL is down: /readyz answers (database: false), the inner LLM route answers 503, and it serves once PostgreSQL is back', async () => {
    const { stack, track, recovery } = ctx;
    await stack.api.kill('SIGKILL');
    await stack.crashPg();
    step('starting the api with PostgreSQL down');
    await stack.api.start();
    const ready = await readyz(stack.apiUrl);
    expect(ready.status).toBe(503);
    expect(ready.checks).toMatchObject({ database: false });

    // A model call of a run in progress (signed execution context), with the database away before streaming.
    const context = signExecutionContext(
      {
        tenant_id: crypto.randomUUID(),
        user_id: 'user-1',
        user_from: 'end-user',
        app_id: crypto.randomUUID(),
        conversation_id: crypto.randomUUID(),
        message_id: crypto.randomUUID(),
        agent_id: crypto.randomUUID(),
        agent_config_version_id: null,
        invoke_from: 'service-api',
      },
      stack.secret('EXECUTION_CONTEXT_SIGNING_KEY'),
    );
    const invoke = await fetch(`${stack.apiUrl}/inner/api/agent/llm/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-inner-api-key': stack.secret('INNER_API_KEY') },
      body: JSON.stringify({
        execution_context: context,
        caller: {
          invocation_id: 'run-x',
          agent_run_id: 'run-x',
          call_index: 0,
          tenant_id: context.tenant_id,
          app_id: context.app_id,
          user_id: context.user_id,
          user_from: context.user_from,
          agent_id: context.agent_id,
          invoke_from: context.invoke_from,
        },
        target: {
          provider: 'demo',
          model: 'demo-chat',
          prompt_messages: [{ role: 'user', content: 'hi' }],
          model_parameters: {},
          stream: true,
        },
      }),
    });
    const invokeBody = await invoke.text();
    expect(invoke.status, invokeBody).toBe(503);
    expect(invoke.headers.get('retry-after')).toMatch(/^\d+$/);

    await stack.startPg();
    const back = Date.now();
    await waitFor('/readyz 200', async () => ((await readyz(stack.apiUrl)).status === 200 ? true : undefined), 60_000, 200);
    recovery('api started without PostgreSQL: PostgreSQL back → /readyz 200', Date.now() - back);
    await waitFor(
      'the api to LISTEN again',
      async () => (fs.readFileSync(stack.api.logFile, 'utf8').includes('event notifier reconnected') ? true : undefined),
      30_000,
    );
    const s = track(await runTurn(stack, { query: 'Hello after the outage', user: 'api-no-pg' }, 90_000));
    recovery('api started without PostgreSQL: PostgreSQL back → a turn done', Date.now() - back);
    expect(s.terminal!.event, JSON.stringify(s.terminal!.data)).toBe('message_end');
  });

  it('a POST /runs whose insert committed but whose answer was lost: the next attempt finds the run by its key and starts it at once', async () => {
    const { stack, track, recovery } = ctx;
    const lost = stack.backendPg!.loseAnswerOf('insert into agent_backend.runs');
    const logBefore = fs.readFileSync(stack.backend.logFile, 'utf8').length;
    const s = track(await TurnStream.start(stack, { query: 'Hello, lost answer', user: 'lost-create' }));
    await lost;
    const cut = Date.now();
    step("the backend's answer to its run insert was cut");
    const end = await s.finish(60_000);
    recovery('POST /runs insert committed, answer lost → turn done (run adopted on the retry)', Date.now() - cut);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(s.answer).toContain('Hello, lost answer');
    expect(fs.readFileSync(stack.backend.logFile, 'utf8').slice(logBefore)).toContain('started a run whose create answer was lost');
    expect(await backendFailures(s.messageId)).toEqual([]);
  });
});
