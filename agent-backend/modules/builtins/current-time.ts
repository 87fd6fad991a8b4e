/**
 * The `current_time` builtin: now, in an IANA time zone (default UTC), as UTC ISO 8601, as local ISO 8601 with the
 * zone's offset then, the offset itself, the weekday and a human-readable line. An unknown zone is an error observation.
 */
import type { CurrentTimeArgs } from '../../../core/protocol/builtin-tools.js';
import type { BuiltinOutcome } from './outcome.js';

export interface CurrentTimeResult {
  iso: string;
  timezone: string;
  local: string;
  utc_offset: string;
  weekday: string;
  formatted: string;
}

/** `+01:00`, `-03:30`, `+00:00` of the zone at `now`. */
function offsetOf(now: Date, timeZone: string): string {
  const name = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' })
    .formatToParts(now)
    .find((p) => p.type === 'timeZoneName')?.value;
  const m = /GMT([+-]\d{2}):?(\d{2})?/.exec(name ?? '');
  return m ? `${m[1]}:${m[2] ?? '00'}` : '+00:00';
}

export function currentTime(args: CurrentTimeArgs, now = new Date()): BuiltinOutcome<CurrentTimeResult> {
  const timezone = args.timezone ?? 'UTC';
  let parts: Record<string, string>;
  try {
    parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', {
        timeZone: timezone,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        weekday: 'long',
      })
        .formatToParts(now)
        .map((p) => [p.type, p.value]),
    );
  } catch {
    return { isError: true, result: `unknown time zone: ${timezone} (use an IANA name such as Europe/Berlin)` };
  }
  const utc_offset = offsetOf(now, timezone);
  const local = `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${utc_offset}`;
  const formatted = new Intl.DateTimeFormat('en-US', { dateStyle: 'full', timeStyle: 'long', timeZone: timezone }).format(now);
  return { isError: false, result: { iso: now.toISOString(), timezone, local, utc_offset, weekday: parts.weekday!, formatted } };
}
