/**
 * Failover on the production topology (issue 15 §2): the real Temporal server on PostgreSQL (four service
 * processes), 2 compiled api replicas behind a balancer, 2 workers, 2 agent backends. Each test kills a part
 * with SIGKILL at a chosen moment and does NOT restart it before the turn ends (unless the part is Temporal,
 * which has one process per service here): the surviving replica must carry the turn. The audit after each
 * test (fixture.ts) checks that no event, thought or charge was lost or duplicated.
 */
import { describe, expect, it } from 'vitest';
import { workflowIdForMessage } from '../../workflows/definitions.js';
import { runTurn, submitForm, TurnStream } from '../faults/client.js';
import { sleep, step, waitFor } from '../faults/harness.js';
import { query, wordCount } from '../support/sql.js';
import { identitiesOf, useCluster, workerOf } from './fixture.js';

const ctx = useCluster('failover');

/** pid → worker name, for the workers as they run now. */
function workerPids(): Record<number, string> {
  return Object.fromEntries(ctx.cluster.workers.map((w) => [w.pid!, w.name]));
}

async function messageRow(id: string) {
  const [row] = await query<{ status: string; answer: string }>(
    ctx.cluster.databaseUrl,
    `select status::text, answer from messages where id = $1`,
    [id],
  );
  return row!;
}

async function ledgerRows(messageId: string) {
  return query<{ billing_request_id: string }>(
    ctx.cluster.databaseUrl,
    `select l.billing_request_id from credit_ledger l join agent_backend_runs r on r.backend_run_id = l.agent_run_id where r.message_id = $1`,
    [messageId],
  );
}

/** The worker whose runAgent activity is running now (from the workflow's pending activities). */
async function workerRunningAgent(messageId: string): Promise<string> {
  return waitFor(
    'the runAgent activity to be picked up',
    () =>
      ctx.withTemporal(async (client) => {
        const d = await client.workflow.getHandle(workflowIdForMessage(messageId)).describe();
        const identity = d.raw.pendingActivities?.find((a) => a.activityType?.name === 'runAgent')?.lastWorkerIdentity;
        return identity ? workerOf(identity, workerPids()) : undefined;
      }),
    30_000,
  );
}

describe('failover on the cluster', () => {
  it('turns spread over both workers (worker identities in the histories), and the Temporal UI lists them by search attribute', async () => {
    const { api, track } = ctx;
    const pids = workerPids();
    const turns = await Promise.all(
      Array.from({ length: 8 }, (_, i) => runTurn(api, { query: `Spread turn ${i}`, user: `spread-${i}` }, 90_000)),
    );
    const seen = new Set<string>();
    for (const t of turns) {
      track(t);
      expect(t.terminal!.event, JSON.stringify(t.terminal!.data)).toBe('message_end');
      const { workflowTasks, activities } = await identitiesOf(ctx, workflowIdForMessage(t.messageId));
      for (const id of [...workflowTasks, ...Object.values(activities)]) {
        const name = workerOf(id, pids);
        expect(name, `identity ${id} is one of the cluster's workers`).toBeDefined();
        seen.add(name!);
      }
    }
    step(`workers seen in the histories: ${[...seen].join(', ')}`);
    expect([...seen].sort()).toEqual(['worker-1', 'worker-2']);
    // Both api replicas took requests through the balancer.
    expect(ctx.cluster.balancers.api.counts.every((n) => n > 0)).toBe(true);

    // The Temporal UI (its own server process, attached to this cluster's frontend) finds a turn by ConversationId.
    if (ctx.cluster.uiUrl) {
      const q = encodeURIComponent(`ConversationId = '${turns[0]!.conversationId}'`);
      const body = await waitFor(
        'the Temporal UI to list the turn',
        async () => {
          const r = await fetch(`${ctx.cluster.uiUrl}/api/v1/namespaces/${ctx.cluster.namespace}/workflows?query=${q}`);
          const json = (await r.json()) as { executions?: { execution: { workflowId: string } }[] };
          return json.executions?.length ? json : undefined;
        },
        30_000,
      );
      expect(body.executions!.map((e) => e.execution.workflowId)).toEqual([workflowIdForMessage(turns[0]!.messageId)]);
    }
  });

  it('the worker running a turn SIGKILLed mid-answer (not restarted): the other worker finishes it, whole answer, billed once', async () => {
    const { api, track } = ctx;
    const s = track(await TurnStream.start(api, { query: '/slow 30 /long 400', user: 'worker-kill' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    const pidsBefore = workerPids();
    const victim = await workerRunningAgent(s.messageId);
    const survivor = victim === 'worker-1' ? 'worker-2' : 'worker-1';
    step(`SIGKILL ${victim} (runs the turn's runAgent)`);
    await ctx.cluster.workers.find((w) => w.name === victim)!.stop('SIGKILL');
    const end = await s.finish(120_000);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(400);
    expect(s.answer).toBe(s.deltas);
    expect((await messageRow(s.messageId)).status).toBe('succeeded');
    expect(await ledgerRows(s.messageId)).toHaveLength(1);
    // The runAgent activity that completed was started by the survivor (its retry after the heartbeat timeout).
    const { activities } = await identitiesOf(ctx, workflowIdForMessage(s.messageId));
    const runAgent = Object.entries(activities).filter(([k]) => k.startsWith('runAgent#'));
    expect(runAgent.map(([, id]) => workerOf(id, pidsBefore))).toEqual([survivor]);
  });

  it('the api replica serving a stream SIGKILLed: the client re-attaches to the other replica with Last-Event-ID and sees every event once', async () => {
    const { track } = ctx;
    // The client talks to replica 1 directly, so the test knows which one serves the stream.
    const target = { ...ctx.replica(0) };
    const s = track(await TurnStream.start(target, { query: '/slow 30 /long 300', user: 'api-kill' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    step('SIGKILL api-1 (serves the stream); the client goes to api-2');
    target.apiUrl = ctx.replica(1).apiUrl;
    await ctx.cluster.apis[0]!.stop('SIGKILL');
    const end = await s.finish(120_000);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(s.reattaches).toBeGreaterThanOrEqual(1);
    expect(ctx.cluster.apis[0]!.up).toBe(false);
    // Every event once, in order: ids 1..n with no gap or repeat (the audit compares them with the stored log).
    expect(s.frames.map((f) => Number(f.id))).toEqual(s.frames.map((_, i) => i + 1));
    expect(wordCount(s.answer)).toBe(300);
    expect(s.answer).toBe(s.deltas);
    expect(await ledgerRows(s.messageId)).toHaveLength(1);
  });

  it('Temporal history and frontend SIGKILLed and restarted mid-answer: the turn completes with the whole answer', async () => {
    const { api, track } = ctx;
    const s = track(await TurnStream.start(api, { query: '/slow 40 /long 500', user: 'temporal-restart' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    for (const service of ['history', 'frontend'] as const) {
      step(`SIGKILL temporal ${service} for 5 s`);
      await ctx.cluster.temporal[service].stop('SIGKILL');
      await sleep(5_000);
      await ctx.cluster.temporal[service].start();
    }
    const end = await s.finish(180_000);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(wordCount(s.answer)).toBe(500);
    expect((await messageRow(s.messageId)).status).toBe('succeeded');
    expect(await ledgerRows(s.messageId)).toHaveLength(1);
  });

  it('the whole Temporal server SIGKILLed and restarted during an ask_human wait: the form resumes the turn, which completes', async () => {
    const { api, track } = ctx;
    const asked = track(await runTurn(api, { query: '/ask Favourite number?', user: 'ask-restart' }, 60_000));
    const hir = asked.frames.find((f) => f.event === 'human_input_required');
    expect(hir, asked.summary()).toBeDefined();
    const token = (hir!.data.data as { form_token: string }).form_token;
    step('SIGKILL every Temporal service while the turn waits for a human');
    for (const svc of Object.values(ctx.cluster.temporal)) await svc.stop('SIGKILL');
    await sleep(3_000);
    await ctx.heal();
    const r = await waitFor(
      'the form submission to be accepted',
      async () => {
        const res = await submitForm(api, token, 'ask-restart', '42');
        return res.status === 200 ? res : (await res.body?.cancel(), undefined);
      },
      60_000,
      1000,
    );
    expect(r.status).toBe(200);
    const [form] = await query<{ resume_message_id: string }>(
      ctx.cluster.databaseUrl,
      `select resume_message_id from human_input_forms where token = $1`,
      [token],
    );
    const cont = track(await TurnStream.attach(api, form!.resume_message_id, 'ask-restart'));
    const end = await cont.finish(90_000);
    expect(end.event, JSON.stringify(end.data)).toBe('message_end');
    expect(cont.answer).toContain('You answered: "42"');
    const continuations = await query(ctx.cluster.databaseUrl, `select id from messages where resumed_from_message_id = $1`, [
      asked.messageId,
    ]);
    expect(continuations).toHaveLength(1);
  });

  it('the agent backend running a turn SIGKILLed (not restarted): the turn ends backend_restarted on its own, the conversation goes on', async () => {
    const { api, track } = ctx;
    const s = track(await TurnStream.start(api, { query: '/slow 40 /long 3000', user: 'backend-kill' }));
    let n = 0;
    await s.read({ until: (f) => f.event === 'agent_message' && ++n === 3, timeoutMs: 60_000, what: 'the third delta' });
    const [run] = await query<{ owner_id: string; run_id: string }>(
      ctx.cluster.databaseUrl,
      `select owner_id, run_id from agent_backend.runs where idempotency_key = $1`,
      [`message-${s.messageId}`],
    );
    const owner = ctx.cluster.backends.find((b) => run!.owner_id.startsWith(`${b.pid}-`))!;
    expect(owner, `owner ${run!.owner_id}`).toBeDefined();
    step(`SIGKILL ${owner.name} (owns run ${run!.run_id})`);
    await owner.stop('SIGKILL');
    // The other backend's reaper fails the run once its owner's heartbeat is stale (30 s): nobody restarts anything.
    const end = await s.finish(150_000);
    expect(end.event, JSON.stringify(end.data)).toBe('error');
    expect(s.count('error') + s.count('message_end')).toBe(1);
    expect(owner.up).toBe(false);
    expect((await messageRow(s.messageId)).status).toBe('failed');
    const [last] = await query<{ type: string; reason: string }>(
      ctx.cluster.databaseUrl,
      `select type, data->>'reason' as reason from agent_backend.events where run_id = $1 order by seq desc limit 1`,
      [run!.run_id],
    );
    expect(last).toEqual({ type: 'run_failed', reason: 'backend_restarted' });

    const next = track(
      await runTurn(api, { query: 'Are you still there?', user: 'backend-kill', conversation_id: s.conversationId }, 60_000),
    );
    expect(next.terminal!.event, JSON.stringify(next.terminal!.data)).toBe('message_end');
    expect(next.answer).toContain('You said: "Are you still there?"');
  });
});
