/**
 * GET /console/api/apps/{app_id}/statistics (issue 42, Dify's "Monitoring"): per hour or day of a range (Dify's
 * presets: today, last 7 days, last 4 weeks, last 3 months, all), the app's conversations, active end users, messages,
 * tokens, cost, latency p50/p95 and error rate, from our own `messages` table in one grouped query (PostgreSQL's
 * percentile_cont; its (app_id, status) index narrows the scan to the app). End users' turns only: the debugger's
 * turns are the builder's, as in Dify's statistics. Buckets are in the caller's time zone (`tz`, IANA); empty
 * buckets are present with zeros, so a chart's axis is continuous. Console key; another tenant's app is a 404.
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import { consoleApp, consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';

export const STATISTICS_RANGES = ['today', 'last7days', 'last4weeks', 'last3months', 'all'] as const;
/** How far before the start of today each preset starts (PostgreSQL intervals); `all` starts at the first message. */
const RANGE_BACK: Record<Exclude<(typeof STATISTICS_RANGES)[number], 'all'>, string> = {
  today: '0 days',
  last7days: '6 days',
  last4weeks: '27 days',
  last3months: '3 months',
};
/** Hours over a longer range would be thousands of points: those ranges are by day. */
const HOURLY_RANGES = new Set(['today', 'last7days', 'last4weeks']);

const validZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

export const StatisticsQuery = z.object({
  range: z.enum(STATISTICS_RANGES).default('last7days'),
  /** Default: hour for today, day otherwise. */
  granularity: z.enum(['hour', 'day']).optional(),
  tz: z.string().min(1).max(64).refine(validZone, 'an IANA time zone, e.g. Europe/Berlin').default('UTC'),
});

const StatisticsPoint = z.object({
  /** The bucket's start in `tz`: `YYYY-MM-DD` by day, `YYYY-MM-DDTHH:00` by hour. */
  bucket: z.string(),
  /** The bucket's start, unix seconds. */
  start: z.number().int(),
  conversations: z.number().int(),
  active_users: z.number().int(),
  messages: z.number().int(),
  tokens: z.number().int(),
  /** Sum of the messages' total_price, a decimal string in `currency`. */
  cost: z.string(),
  /** Seconds, over the bucket's succeeded turns; null without any. */
  latency_p50: z.number().nullable(),
  latency_p95: z.number().nullable(),
  failed: z.number().int(),
  /** Finished turns (succeeded, failed, stopped): the error rate's denominator. */
  finished: z.number().int(),
  /** failed / finished; null without a finished turn. */
  error_rate: z.number().nullable(),
});
const StatisticsTotals = StatisticsPoint.omit({ bucket: true, start: true });

export const StatisticsResponse = z.object({
  range: z.enum(STATISTICS_RANGES),
  granularity: z.enum(['hour', 'day']),
  tz: z.string(),
  currency: z.string(),
  /** The range's start (unix seconds) and end (now). */
  from: z.number().int(),
  to: z.number().int(),
  data: z.array(StatisticsPoint),
  /** The whole range (distinct conversations and users over it, not a sum of the buckets). */
  totals: StatisticsTotals,
});

interface Row {
  bucket: Date | null;
  label: string | null;
  conversations: bigint | null;
  active_users: bigint | null;
  messages: bigint | null;
  tokens: bigint | null;
  cost: { toString(): string } | null;
  p50: number | null;
  p95: number | null;
  failed: bigint | null;
  finished: bigint | null;
}

export function monitoringRoutes(deps: { db: Db }): Router {
  const { db } = deps;
  const r = Router();

  r.get('/apps/:app_id/statistics', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const q = parseOr400(StatisticsQuery, req.query, 'query');
    const granularity = q.granularity ?? (q.range === 'today' ? 'hour' : 'day');
    if (granularity === 'hour' && !HOURLY_RANGES.has(q.range))
      throw new HttpError(400, 'invalid_param', `granularity: hour is offered up to last4weeks; ${q.range} is by day.`);
    const step = granularity === 'hour' ? '1 hour' : '1 day';
    // The range's first bucket, local time in tz: the start of today less the preset, or the app's first message's day.
    const back = q.range === 'all' ? null : RANGE_BACK[q.range];
    const rows = await db.$queryRaw<Row[]>`
      with bounds as (
        select date_trunc(${granularity},
                 coalesce(
                   date_trunc('day', now() at time zone ${q.tz}) - ${back}::interval,
                   (select date_trunc('day', min(created_at) at time zone ${q.tz}) from messages
                     where app_id = ${app.id}::uuid and tenant_id = ${app.tenant_id}::uuid and invoke_from <> 'debugger'),
                   date_trunc('day', now() at time zone ${q.tz}))) as lo,
               date_trunc(${granularity}, now() at time zone ${q.tz}) as hi
      ),
      m as (
        select date_trunc(${granularity}, created_at at time zone ${q.tz}) as b, conversation_id, end_user_id,
               total_tokens, total_price, status, provider_response_latency
          from messages, bounds
         where app_id = ${app.id}::uuid and tenant_id = ${app.tenant_id}::uuid and invoke_from <> 'debugger'
           and created_at >= (bounds.lo at time zone ${q.tz})
      ),
      agg as (
        select b, count(distinct conversation_id) as conversations, count(distinct end_user_id) as active_users,
               count(*) as messages, sum(total_tokens)::bigint as tokens, sum(total_price) as cost,
               percentile_cont(0.5) within group (order by provider_response_latency) filter (where status = 'succeeded') as p50,
               percentile_cont(0.95) within group (order by provider_response_latency) filter (where status = 'succeeded') as p95,
               count(*) filter (where status = 'failed') as failed,
               count(*) filter (where status in ('succeeded', 'failed', 'stopped')) as finished
          from m group by grouping sets ((b), ())
      )
      select s.b at time zone ${q.tz} as bucket,
             to_char(s.b, ${granularity === 'hour' ? 'YYYY-MM-DD"T"HH24:00' : 'YYYY-MM-DD'}) as label,
             a.conversations, a.active_users, a.messages, a.tokens, a.cost, a.p50, a.p95, a.failed, a.finished
        from bounds, generate_series(bounds.lo, bounds.hi, ${step}::interval) as s(b)
        left join agg a on a.b = s.b
      union all
      select null, null, a.conversations, a.active_users, a.messages, a.tokens, a.cost, a.p50, a.p95, a.failed, a.finished
        from agg a where a.b is null
      order by 1 nulls last`;
    const point = (row: Row) => {
      const finished = Number(row.finished ?? 0);
      const failed = Number(row.failed ?? 0);
      return {
        conversations: Number(row.conversations ?? 0),
        active_users: Number(row.active_users ?? 0),
        messages: Number(row.messages ?? 0),
        tokens: Number(row.tokens ?? 0),
        cost: row.cost ? row.cost.toString() : '0',
        latency_p50: row.p50 ?? null,
        latency_p95: row.p95 ?? null,
        failed,
        finished,
        error_rate: finished ? failed / finished : null,
      };
    };
    const buckets = rows.filter((x) => x.bucket);
    const total = rows.find((x) => !x.bucket);
    const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
    res.json({
      range: q.range,
      granularity,
      tz: q.tz,
      currency: 'USD',
      from: buckets[0] ? seconds(buckets[0].bucket!) : seconds(new Date()),
      to: seconds(new Date()),
      data: buckets.map((x) => ({ bucket: x.label!, start: seconds(x.bucket!), ...point(x) })),
      totals: total ? point(total) : point({} as Row),
    } satisfies z.input<typeof StatisticsResponse>);
  });

  return r;
}
