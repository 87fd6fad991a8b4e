/**
 * Scheduled turns (issue 35 item 3) on the real stack: the console's schedules are Temporal Schedules on this stack's
 * own task queue, each run an ordinary turn (a Message of the schedule's user, its `agent-turn-<id>` workflow).
 * Every schedule a test creates is deleted by it (all files share one Temporal dev server).
 */
import { ScheduleNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { AUTOMATION_RESPONSES } from '../../api/openapi/automation.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
const created: string[] = [];

beforeAll(async () => {
  // Schedules firing every second make these tests short; the 60 s default is test/security/i47-automation-limits.test.ts's.
  stack = await startTestStack('schedules', { env: { SCHEDULE_MIN_INTERVAL_SECONDS: 1 } });
});
afterAll(async () => {
  // A failed test must not leave a schedule firing into the shared dev server.
  for (const id of created)
    await stack?.temporal.schedule
      .getHandle(`app-schedule-${id}`)
      .delete()
      .catch(() => undefined);
  await stack?.stop();
});

const api = (path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });

async function createSchedule(body: Record<string, unknown>) {
  const res = await api('/schedules', { method: 'POST', body: { name: 'nightly', query: 'hello from a schedule', ...body } });
  const json = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(json)).toBe(201);
  created.push(String(json.id));
  expect(AUTOMATION_RESPONSES.ScheduleResponse.safeParse(json).error).toBeUndefined();
  return json as { id: string; temporal_schedule_id: string; overlap_policy: string; paused: boolean };
}

const turnsOf = (scheduleId: string) =>
  stack.db.message.findMany({ where: { metadata: { path: ['schedule_id'], equals: scheduleId } }, orderBy: { created_at: 'asc' } });

async function waitFor<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false>,
  deadlineMs = 45_000,
  explain: () => Promise<string> = async () => '',
): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} ${await explain()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('scheduled turns', () => {
  it('a schedule firing every second runs ordinary turns, each in a new conversation; delete removes it from Temporal', async () => {
    const s = await createSchedule({ interval_seconds: 1, user: 'cron-user', inputs: {} });
    expect(s.overlap_policy).toBe('skip');
    const described = await stack.temporal.schedule.getHandle(s.temporal_schedule_id).describe();
    expect(described.action).toMatchObject({
      type: 'startWorkflow',
      workflowType: 'scheduledTurn',
      taskQueue: stack.config.TEMPORAL_TASK_QUEUE,
    });

    const turns = await waitFor('3 scheduled turns to succeed', async () => {
      const rows = await turnsOf(s.id);
      return rows.filter((m) => m.status === 'succeeded').length >= 3 && rows;
    });
    expect((await api(`/schedules/${s.id}`, { method: 'DELETE' })).status).toBe(204);
    await expect(stack.temporal.schedule.getHandle(s.temporal_schedule_id).describe()).rejects.toBeInstanceOf(ScheduleNotFoundError);
    expect((await api(`/schedules/${s.id}`)).status).toBe(404);

    // Ordinary turns: the schedule's end user, a conversation each, the turn's own workflow, an answer and usage.
    const done = turns.filter((m) => m.status === 'succeeded');
    const endUsers = await stack.db.endUser.findMany({ where: { id: { in: done.map((m) => m.end_user_id!) } } });
    expect(endUsers.map((u) => u.session_id)).toEqual(['cron-user']);
    expect(new Set(done.map((m) => m.conversation_id)).size).toBe(done.length);
    for (const m of done) {
      expect(m.workflow_id).toBe(`agent-turn-${m.id}`);
      expect(m.query).toBe('hello from a schedule');
      expect(m.answer.length).toBeGreaterThan(0);
      expect(m.total_tokens).toBeGreaterThan(0);
      // The agentTurn child of the run's scheduledTurn, under the turn's usual id.
      const turn = stack.temporal.workflow.getHandle(m.workflow_id);
      expect(await turn.result()).toMatchObject({ status: 'succeeded', messageId: m.id });
      expect((await turn.describe()).parentExecution?.workflowId).toMatch(new RegExp(`^scheduled-turn-${s.id}`));
    }
    // No turn keeps its conversation locked.
    expect(
      await stack.db.conversation.count({ where: { id: { in: done.map((m) => m.conversation_id) }, active_message_id: { not: null } } }),
    ).toBe(0);
  }, 90_000);

  it('a paused schedule runs nothing; trigger runs exactly one turn', async () => {
    const s = await createSchedule({ interval_seconds: 1, user: 'paused-user', paused: true });
    expect(s.paused).toBe(true);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await turnsOf(s.id)).toHaveLength(0);

    // Schedule results are webhook events too (docs/PROTOCOL.md "Scheduled turns and webhooks").
    const hook = await api('/webhooks', {
      method: 'POST',
      body: { url: 'https://93.184.216.34/dify', events: ['schedule.run_completed'] },
    });
    expect(hook.status).toBe(201);
    expect((await api(`/schedules/${s.id}/trigger`, { method: 'POST' })).status).toBe(202);
    const [turn] = await waitFor('the triggered turn', async () => {
      const rows = await turnsOf(s.id);
      return rows.length > 0 && rows[0]!.status === 'succeeded' && rows;
    });
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await turnsOf(s.id)).toHaveLength(1);
    const listedRaw: unknown = await (await api('/schedules')).json();
    expect(AUTOMATION_RESPONSES.ScheduleListResponse.safeParse(listedRaw).error).toBeUndefined();
    const listed = listedRaw as { data: { id: string; paused: boolean; last_run: { status: string; message_id: string } | null }[] };
    const row = listed.data.find((d) => d.id === s.id)!;
    expect(row.paused).toBe(true);
    await waitFor('the run recorded', async () => {
      const one = (await (await api(`/schedules/${s.id}`)).json()) as { last_run: { status: string; message_id: string } | null };
      return one.last_run?.message_id === turn!.id && one.last_run.status === 'succeeded';
    });
    const result = await stack.db.webhookDelivery.findFirstOrThrow({ where: { event: 'schedule.run_completed' } });
    expect(result.payload).toMatchObject({
      event: 'schedule.run_completed',
      data: { schedule_id: s.id, message_id: turn!.id, status: 'succeeded', error: null },
    });
    // Only the subscribed event: the turn's own turn.succeeded went to no webhook.
    expect(await stack.db.webhookDelivery.count()).toBe(1);
    // No receiver answers at that (public) address here: the delivery stops once its webhook is gone.
    expect((await api(`/webhooks/${((await hook.json()) as { id: string }).id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await api(`/schedules/${s.id}`, { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it("a run whose turn fails records failed with the turn's error code; the turn's workflow is FAILED, the run's completes", async () => {
    const s = await createSchedule({ interval_seconds: 1, user: 'failing-user', paused: true, query: '/fail InvokeBadRequestError' });
    expect((await api(`/schedules/${s.id}/trigger`, { method: 'POST' })).status).toBe(202);
    const [turn] = await waitFor('the failed turn', async () => {
      const rows = await turnsOf(s.id);
      return rows.length > 0 && rows[0]!.status === 'failed' && rows;
    });
    // The failed turn ends as a failed workflow (workflows/agent-turn.ts, issue 42) ...
    const child = stack.temporal.workflow.getHandle(turn!.workflow_id!);
    await expect(child.result()).rejects.toMatchObject({ cause: { type: turn!.error_code } });
    expect((await child.describe()).status.name).toBe('FAILED');
    // ... and its schedule run records that outcome, as it did when the turn completed with {status: 'failed'}.
    const one = await waitFor('the run recorded', async () => {
      const r = (await (await api(`/schedules/${s.id}`)).json()) as {
        last_run: { status: string; message_id: string; error: string | null } | null;
      };
      return r.last_run?.message_id === turn!.id && r.last_run;
    });
    expect(one).toMatchObject({ status: 'failed', error: turn!.error_code });
    const parent = (await child.describe()).parentExecution!;
    const run = stack.temporal.workflow.getHandle(parent.workflowId!, parent.runId!);
    expect(await run.result()).toMatchObject({ status: 'failed', messageId: turn!.id });
    expect((await api(`/schedules/${s.id}`, { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it('a one-conversation schedule defaults to buffer_one and continues one conversation; pause stops it', async () => {
    const s = await createSchedule({ cron: '* * * * *', user: 'single-user', conversation_mode: 'single', paused: true });
    expect(s.overlap_policy).toBe('buffer_one');
    const described = await stack.temporal.schedule.getHandle(s.temporal_schedule_id).describe();
    expect(described.policies.overlap).toBe('BUFFER_ONE');
    expect((await api(`/schedules/${s.id}/unpause`, { method: 'POST' })).status).toBe(200);
    expect((await stack.temporal.schedule.getHandle(s.temporal_schedule_id).describe()).state.paused).toBe(false);
    expect((await api(`/schedules/${s.id}/pause`, { method: 'POST' })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      expect((await api(`/schedules/${s.id}/trigger`, { method: 'POST' })).status).toBe(202);
      await waitFor(
        `turn ${i + 1}`,
        async () => (await turnsOf(s.id)).filter((m) => m.status === 'succeeded').length === i + 1,
        30_000,
        async () =>
          JSON.stringify({ schedule: await stack.db.appSchedule.findUnique({ where: { id: s.id } }), turns: await turnsOf(s.id) }),
      );
      // The run has ended (its scheduledTurn recorded it) before the next trigger: a trigger during a run is buffered.
      await waitFor('the run recorded', async () => {
        const row = await stack.db.appSchedule.findUniqueOrThrow({ where: { id: s.id } });
        return row.last_run_status === 'succeeded' && row.last_run_message_id === (await turnsOf(s.id)).at(-1)!.id;
      });
    }
    const turns = await turnsOf(s.id);
    expect(new Set(turns.map((m) => m.conversation_id)).size).toBe(1);
    expect((await stack.db.appSchedule.findUniqueOrThrow({ where: { id: s.id } })).conversation_id).toBe(turns[0]!.conversation_id);
    expect((await api(`/schedules/${s.id}`, { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it('a paused schedule with overlap buffer_one runs none, buffers none; unpaused, the same schedule runs', async () => {
    const s = await createSchedule({ interval_seconds: 1, user: 'buffered-user', overlap_policy: 'buffer_one', paused: true });
    expect([s.overlap_policy, s.paused]).toEqual(['buffer_one', true]);
    const handle = stack.temporal.schedule.getHandle(s.temporal_schedule_id);
    const described = await handle.describe();
    expect([described.policies.overlap, described.state.paused]).toEqual(['BUFFER_ONE', true]);
    // Three of its firing times pass (by the schedule's own clock: Temporal's createdAt), and nothing was started.
    const firstDue = described.info.createdAt.getTime() + 3_000;
    await waitFor('three firing times to pass', async () => Date.now() > firstDue + 500);
    const still = await handle.describe();
    expect(still.info.numActionsTaken).toBe(0);
    expect(still.info.recentActions).toEqual([]);
    expect(still.info.runningActions).toEqual([]);
    expect(still.info.numActionsSkippedOverlap).toBe(0);
    expect(await turnsOf(s.id)).toHaveLength(0);
    expect((await stack.db.appSchedule.findUniqueOrThrow({ where: { id: s.id } })).last_run_at).toBeNull();

    // The same schedule unpaused does run (so the silence above was the pause).
    expect((await api(`/schedules/${s.id}/unpause`, { method: 'POST' })).status).toBe(200);
    await waitFor('a run after unpause', async () => (await turnsOf(s.id)).some((m) => m.status === 'succeeded'));
    expect((await api(`/schedules/${s.id}/pause`, { method: 'POST' })).status).toBe(200);
    expect((await api(`/schedules/${s.id}`, { method: 'DELETE' })).status).toBe(204);
  }, 90_000);

  it('refuses a schedule with both cron and interval, an unknown time zone, or allow_all on one conversation', async () => {
    for (const body of [
      { cron: '* * * * *', interval_seconds: 5, user: 'u' },
      { interval_seconds: 5, user: 'u', time_zone: 'Mars/Olympus' },
      { interval_seconds: 5, user: 'u', conversation_mode: 'single', overlap_policy: 'allow_all' },
    ]) {
      const res = await api('/schedules', { method: 'POST', body: { name: 'bad', query: 'q', ...body } });
      expect(res.status).toBe(400);
    }
    expect(await stack.db.appSchedule.count({ where: { name: 'bad' } })).toBe(0);
  });
});
