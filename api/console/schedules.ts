/**
 * Scheduled turns (issue 35 item 3), under /console/api with the console key: an app's schedules — a cron expression
 * or an interval in a time zone, the query/inputs a run sends as `user`, a new conversation per run or one
 * conversation for all — each backed by a Temporal Schedule `app-schedule-<row id>` whose action starts
 * `scheduledTurn` on this deployment's task queue (workflows/scheduled-turn.ts), visible in the Temporal UI's
 * Schedules page. PostgreSQL keeps the rows so the console lists them per app; Temporal keeps the timing.
 */
import { CRON_HINT, cronProblem } from '../../core/domain/cron-check.js';
import { ScheduleNotFoundError, type Client, type ScheduleOverlapPolicy } from '@temporalio/client';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { AppSchedule } from '../../core/generated/prisma/client.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { unixSeconds } from '../../core/platform/time.js';
import { SCHEDULED_TURN_WORKFLOW, scheduleIdForRow, type ScheduledTurnInput } from '../../workflows/automation-definitions.js';
import { consoleApp, consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { pageJson, pageOf } from '../pagination.js';
import { ChatRequest, Query, UserId, Uuid } from '../schemas.js';
import { createWithinQuota } from '../../core/domain/automation-quota.js';
import { specShortestGapSeconds, type StructuredCalendar } from '../../core/domain/schedule-spacing.js';

const OVERLAP = ['skip', 'buffer_one', 'buffer_all', 'allow_all'] as const;

const validTimeZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

export const CreateScheduleBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    /** Standard 5-field cron (Temporal's cron syntax, e.g. `0 9 * * 1-5`; checked by core/domain/cron-check.ts); or `interval_seconds`. */
    cron: z.string().trim().min(1).max(200).optional(),
    interval_seconds: z.number().int().min(1).max(31_536_000).optional(),
    time_zone: z.string().min(1).max(64).refine(validTimeZone, 'is not a known IANA time zone').default('UTC'),
    query: Query,
    inputs: ChatRequest.shape.inputs,
    user: UserId,
    conversation_mode: z.enum(['new', 'single']).default('new'),
    /** Default: `skip`, or `buffer_one` for `single` (a conversation runs one turn at a time: the next run waits its turn). */
    overlap_policy: z.enum(OVERLAP).optional(),
    /** How late a missed run (server down) may still start; Temporal's minimum is 10 s. */
    catchup_window_seconds: z.number().int().min(10).max(31_536_000).default(60),
    paused: z.boolean().default(false),
  })
  .strict()
  .refine((b) => (b.cron === undefined) !== (b.interval_seconds === undefined), {
    message: 'give exactly one of cron and interval_seconds',
    path: ['cron'],
  })
  .refine((b) => !(b.conversation_mode === 'single' && b.overlap_policy === 'allow_all'), {
    message: 'allow_all would run turns concurrently in one conversation; use skip, buffer_one or buffer_all',
    path: ['overlap_policy'],
  });

export function scheduleView(row: AppSchedule) {
  return {
    id: row.id,
    name: row.name,
    temporal_schedule_id: scheduleIdForRow(row.id),
    cron: row.cron,
    interval_seconds: row.interval_seconds,
    time_zone: row.time_zone,
    query: row.query,
    inputs: row.inputs,
    user: row.user,
    conversation_mode: row.conversation_mode,
    conversation_id: row.conversation_id,
    overlap_policy: row.overlap_policy,
    catchup_window_seconds: row.catchup_window_seconds,
    paused: row.paused,
    last_run: row.last_run_at
      ? { at: unixSeconds(row.last_run_at), status: row.last_run_status, message_id: row.last_run_message_id, error: row.last_run_error }
      : null,
    created_at: unixSeconds(row.created_at),
  };
}

/** `90 s`, `1 min`, `2 h 5 min`: a gap as a message shows it. */
export function humanSeconds(s: number): string {
  if (s < 60) return `${s} s`;
  const parts: string[] = [];
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h) parts.push(`${h} h`);
  if (m) parts.push(`${m} min`);
  if (sec) parts.push(`${sec} s`);
  return parts.join(' ');
}

/** A gRPC INVALID_ARGUMENT from the server (a cron it cannot parse): the caller's mistake. */
function invalidArgument(err: unknown): boolean {
  for (let cur = err as { code?: unknown; cause?: unknown } | undefined; cur; cur = cur.cause as typeof cur)
    if (cur.code === 3) return true;
  return false;
}

export function scheduleRoutes(deps: { db: Db; temporal: Client; config: Config; logger: Logger }): Router {
  const { db, temporal, config, logger } = deps;
  const r = Router();
  const auth = consoleAuth(db);
  const body: RequestHandler[] = jsonBody({ limit: '64kb', maxDepth: config.JSON_MAX_DEPTH, rejectNul: true });

  async function scheduleOf(req: Request) {
    const { app } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.schedule_id, 'schedule_id');
    const row = await db.appSchedule.findFirst({ where: { id, app_id: app.id } });
    if (!row) throw new HttpError(404, 'schedule_not_found', 'No such schedule for this app.');
    return row;
  }

  const temporalDown = (err: unknown, what: string): never => {
    if (err instanceof HttpError) throw err;
    logger.warn({ err: (err as Error).message }, `schedule ${what} failed`);
    throw new HttpError(503, 'service_unavailable', `The schedule could not be ${what}; try again shortly.`);
  };

  /** Upcoming runs (unix seconds) from Temporal when it answers; null otherwise (the row alone is shown). */
  const nextRunTimes = (rowId: string): Promise<number[] | null> =>
    temporal.schedule
      .getHandle(scheduleIdForRow(rowId))
      .describe()
      .then((d) => d.info.nextActionTimes.map((t) => unixSeconds(t)))
      .catch(() => null);

  r.get('/apps/:app_id/schedules', auth, async (req, res) => {
    const { app } = await consoleApp(db, req);
    const page = pageOf(req.query);
    const where = { app_id: app.id };
    const [total, rows] = await Promise.all([
      db.appSchedule.count({ where }),
      db.appSchedule.findMany({ where, orderBy: [{ created_at: 'desc' }, { id: 'asc' }], skip: page.skip, take: page.take }),
    ]);
    // Each schedule's upcoming runs from Temporal (one describe per row, in parallel, here rather than one GET per row
    // from the page); null for a schedule Temporal did not answer for.
    const next = await Promise.all(rows.map((row) => nextRunTimes(row.id)));
    res.json(
      pageJson(
        page,
        total,
        rows.map((row, i) => ({ ...scheduleView(row), next_run_times: next[i] ?? null })),
      ),
    );
  });

  const tooOften = (gapS: number, what: string) =>
    new HttpError(
      400,
      'schedule_interval_too_short',
      `${what} runs ${gapS <= 0 ? 'twice at once' : `every ${humanSeconds(gapS)}`} at its closest; the shortest allowed is ${humanSeconds(config.SCHEDULE_MIN_INTERVAL_SECONDS)} (SCHEDULE_MIN_INTERVAL_SECONDS).`,
    );

  /** The shortest gap between two runs of a created schedule, from the spec as Temporal compiled it (core/domain/schedule-spacing.ts). */
  async function shortestGapSeconds(scheduleId: string): Promise<number> {
    const { schedule } = await temporal.workflowService.describeSchedule({ namespace: config.TEMPORAL_NAMESPACE, scheduleId });
    const spec = schedule?.spec;
    return specShortestGapSeconds({
      calendars: (spec?.structuredCalendar ?? []) as StructuredCalendar[],
      intervalsSeconds: (spec?.interval ?? []).map((i) => Number(i.interval?.seconds ?? 0) + (i.interval?.nanos ?? 0) / 1e9),
    });
  }

  r.post('/apps/:app_id/schedules', auth, ...body, async (req: Request, res: Response) => {
    const { app, ctx } = await consoleApp(db, req);
    const b = parseOr400(CreateScheduleBody, req.body ?? {});
    if (b.interval_seconds !== undefined && b.interval_seconds < config.SCHEDULE_MIN_INTERVAL_SECONDS)
      throw tooOften(b.interval_seconds, 'interval_seconds: the schedule');
    // A mistake in the cron named here (field, value, what it may be), not Temporal's bare "Failed to create schedule".
    const cronIssue = b.cron === undefined ? null : cronProblem(b.cron);
    if (cronIssue) throw new HttpError(400, 'invalid_schedule', cronIssue);
    const overlap = b.overlap_policy ?? (b.conversation_mode === 'single' ? 'buffer_one' : 'skip');
    const outcome = await createWithinQuota(
      db,
      'schedule',
      { perApp: config.SCHEDULES_PER_APP, perTenant: config.SCHEDULES_PER_TENANT },
      { tenantId: app.tenant_id, appId: app.id },
      (tx) =>
        tx.appSchedule.create({
          data: {
            tenant_id: app.tenant_id,
            app_id: app.id,
            name: b.name,
            cron: b.cron ?? null,
            interval_seconds: b.interval_seconds ?? null,
            time_zone: b.time_zone,
            query: b.query,
            inputs: b.inputs as object,
            user: b.user,
            conversation_mode: b.conversation_mode,
            overlap_policy: overlap,
            catchup_window_seconds: b.catchup_window_seconds,
            paused: b.paused,
            created_by: ctx.accountId,
          },
        }),
    );
    if ('refused' in outcome) {
      const { scope, limit } = outcome.refused;
      throw new HttpError(
        403,
        'schedule_quota_exceeded',
        `This ${scope === 'app' ? 'app' : 'workspace'} has ${limit} schedules, the most it may hold (SCHEDULES_PER_${scope === 'app' ? 'APP' : 'TENANT'}); delete one first.`,
      );
    }
    const row = outcome.created;
    const args: [ScheduledTurnInput] = [{ scheduleId: row.id }];
    const note = `${app.name} · ${b.name}`;
    const scheduleId = scheduleIdForRow(row.id);
    // A cron is created paused and its spacing read back from Temporal's own compilation of it, so a cron that fires
    // every second never fires once before it is refused; then it is unpaused unless it was asked paused.
    const checkCron = b.cron !== undefined;
    try {
      await temporal.schedule.create({
        scheduleId,
        spec: {
          ...(b.cron ? { cronExpressions: [b.cron] } : { intervals: [{ every: b.interval_seconds! * 1000 }] }),
          timezone: b.time_zone,
        },
        action: {
          type: 'startWorkflow',
          workflowType: SCHEDULED_TURN_WORKFLOW,
          // This deployment's worker queue: with per-file queues in the tests, each stack's schedules run on its own worker.
          taskQueue: config.TEMPORAL_TASK_QUEUE,
          workflowId: `scheduled-turn-${row.id}`,
          args,
        },
        policies: { overlap: overlap.toUpperCase() as ScheduleOverlapPolicy, catchupWindow: b.catchup_window_seconds * 1000 },
        state: { paused: b.paused || checkCron, note },
      });
      if (checkCron) {
        const gap = await shortestGapSeconds(scheduleId);
        if (gap < config.SCHEDULE_MIN_INTERVAL_SECONDS) {
          await temporal.schedule.getHandle(scheduleId).delete();
          throw tooOften(gap, 'cron: the schedule');
        }
        if (!b.paused) await temporal.schedule.getHandle(scheduleId).unpause(note);
      }
    } catch (err) {
      // Nothing is kept of a schedule that was refused or not created whole (the Temporal side goes too, if it exists).
      if (!(err instanceof HttpError))
        await temporal.schedule
          .getHandle(scheduleId)
          .delete()
          .catch(() => undefined);
      await db.appSchedule.delete({ where: { id: row.id } }).catch(() => undefined);
      if (invalidArgument(err))
        throw new HttpError(
          400,
          'invalid_schedule',
          b.cron !== undefined
            ? `cron: Temporal cannot run "${b.cron}" (${(err as Error).message}). ${CRON_HINT}`
            : `Temporal refused the schedule: ${(err as Error).message}`,
        );
      temporalDown(err, 'created');
    }
    res.status(201).json(scheduleView(row));
  });

  r.get('/apps/:app_id/schedules/:schedule_id', auth, async (req, res) => {
    const row = await scheduleOf(req);
    res.json({ ...scheduleView(row), next_run_times: await nextRunTimes(row.id) });
  });

  for (const action of ['pause', 'unpause'] as const) {
    r.post(`/apps/:app_id/schedules/:schedule_id/${action}`, auth, async (req, res) => {
      const row = await scheduleOf(req);
      try {
        await temporal.schedule.getHandle(scheduleIdForRow(row.id))[action](`${action}d from the console`);
      } catch (err) {
        temporalDown(err, `${action}d`);
      }
      const updated = await db.appSchedule.update({ where: { id: row.id }, data: { paused: action === 'pause' } });
      res.json(scheduleView(updated));
    });
  }

  /** Runs it once now (even while paused), under the schedule's overlap policy. */
  r.post('/apps/:app_id/schedules/:schedule_id/trigger', auth, async (req, res) => {
    const row = await scheduleOf(req);
    try {
      await temporal.schedule.getHandle(scheduleIdForRow(row.id)).trigger();
    } catch (err) {
      temporalDown(err, 'triggered');
    }
    res.status(202).json(scheduleView(row));
  });

  /** Deletes the Temporal schedule, then the row; a run in progress finishes as an ordinary turn. */
  r.delete('/apps/:app_id/schedules/:schedule_id', auth, async (req, res) => {
    const row = await scheduleOf(req);
    try {
      await temporal.schedule.getHandle(scheduleIdForRow(row.id)).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) temporalDown(err, 'deleted');
    }
    await db.appSchedule.delete({ where: { id: row.id } });
    res.status(204).end();
  });

  return r;
}
