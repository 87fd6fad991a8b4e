/**
 * The shortest time between two runs of a schedule spec (issue 47: a schedule may not run more often than
 * SCHEDULE_MIN_INTERVAL_SECONDS). It reads the spec as Temporal compiled it — a cron expression becomes a structured
 * calendar (7 fields have seconds) or, for `@every`, an interval (service/worker/scheduler/calendar.go in
 * go.temporal.io/server) — so no cron syntax is parsed twice, and `@hourly`, names, ranges and steps mean exactly
 * what Temporal runs.
 *
 * A calendar fires at every combination of its fields' values (all fields must match), so within a firing day every
 * (hour, minute, second) of its sets fires. The shortest gap is therefore one of: two seconds of one minute, the last
 * second of a minute to the first of the next firing minute, the same across hours, and across consecutive firing days
 * (found by scanning the calendar's days: day of month, month, day of week and year together). Times are wall-clock
 * in the schedule's time zone: a daylight-saving change can bring two runs an hour closer in real time, at most twice
 * a year (docs/security.md "Limits and their settings").
 */

/** A field's values as Temporal's protobuf holds them: inclusive ranges, step 0 meaning 1, end below start meaning start. */
export interface SpecRange {
  start?: number | null;
  end?: number | null;
  step?: number | null;
}

/** `temporal.api.schedule.v1.StructuredCalendarSpec` (only what the gap needs). */
export interface StructuredCalendar {
  second?: SpecRange[] | null;
  minute?: SpecRange[] | null;
  hour?: SpecRange[] | null;
  dayOfMonth?: SpecRange[] | null;
  month?: SpecRange[] | null;
  year?: SpecRange[] | null;
  dayOfWeek?: SpecRange[] | null;
}

function values(ranges: SpecRange[] | null | undefined, min: number, max: number, fallback: [number, number]): number[] {
  const list = ranges && ranges.length ? ranges : [{ start: fallback[0], end: fallback[1], step: 1 }];
  const out = new Set<number>();
  for (const r of list) {
    const start = r.start ?? 0;
    const end = Math.max(r.end ?? start, start);
    const step = r.step && r.step > 0 ? r.step : 1;
    for (let v = start; v <= end; v += step) if (v >= min && v <= max) out.add(v);
  }
  return [...out].sort((a, b) => a - b);
}

const minDiff = (sorted: number[]) => {
  let d = Infinity;
  for (let i = 1; i < sorted.length; i++) d = Math.min(d, sorted[i]! - sorted[i - 1]!);
  return d;
};
const span = (sorted: number[]) => sorted.at(-1)! - sorted[0]!;

/** Days the calendar scans for consecutive firing days: 8 years from its first year (leap days, weekdays come round). */
const SCAN_DAYS = 8 * 366;
const DAY_S = 86_400;

/** The shortest gap between two runs of one calendar, in seconds (Infinity: it runs at most once). */
export function calendarShortestGapSeconds(cal: StructuredCalendar, now = new Date()): number {
  // Temporal's defaults for an empty field: second, minute and hour 0; any day, month and weekday; any year.
  const S = values(cal.second, 0, 59, [0, 0]);
  const Mi = values(cal.minute, 0, 59, [0, 0]);
  const H = values(cal.hour, 0, 23, [0, 0]);
  const dom = new Set(values(cal.dayOfMonth, 1, 31, [1, 31]));
  const months = new Set(values(cal.month, 1, 12, [1, 12]));
  // Day of week 0–7, both 0 and 7 Sunday (Temporal's range).
  const dow = new Set(values(cal.dayOfWeek, 0, 7, [0, 6]).map((d) => d % 7));
  const years = cal.year && cal.year.length ? new Set(values(cal.year, 2000, 2100, [2000, 2100])) : null;
  if (!S.length || !Mi.length || !H.length) return Infinity;

  let gap = Infinity;
  if (S.length > 1) gap = Math.min(gap, minDiff(S));
  if (Mi.length > 1) gap = Math.min(gap, minDiff(Mi) * 60 - span(S));
  if (H.length > 1) gap = Math.min(gap, minDiff(H) * 3600 - span(Mi) * 60 - span(S));

  const firstYear = Math.max(now.getUTCFullYear(), years ? Math.min(...years) : 0);
  let day = Date.UTC(firstYear, 0, 1) / 1000 / DAY_S;
  let last: number | null = null;
  let dayGap = Infinity;
  for (let i = 0; i < SCAN_DAYS; i++, day++) {
    const d = new Date(day * DAY_S * 1000);
    const fires =
      dom.has(d.getUTCDate()) &&
      months.has(d.getUTCMonth() + 1) &&
      dow.has(d.getUTCDay()) &&
      (years === null || years.has(d.getUTCFullYear()));
    if (!fires) continue;
    if (last !== null) dayGap = Math.min(dayGap, day - last);
    last = day;
    if (dayGap === 1) break;
  }
  if (dayGap !== Infinity) gap = Math.min(gap, dayGap * DAY_S - span(H) * 3600 - span(Mi) * 60 - span(S));
  return gap;
}

/** A spec's shortest gap, in seconds, over its calendars and intervals (each as Temporal compiled it). */
export function specShortestGapSeconds(spec: { calendars: StructuredCalendar[]; intervalsSeconds: number[] }, now = new Date()): number {
  const entries = spec.calendars.length + spec.intervalsSeconds.length;
  // Two entries fire at the union of their times, which can fall as close as one second apart: never accepted.
  if (entries > 1) return 1;
  let gap = Infinity;
  for (const c of spec.calendars) gap = Math.min(gap, calendarShortestGapSeconds(c, now));
  for (const s of spec.intervalsSeconds) gap = Math.min(gap, s);
  return gap;
}
