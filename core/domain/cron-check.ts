/**
 * A schedule's cron expression read before Temporal sees it (issue 42): Temporal refuses a bad one with
 * "Failed to create schedule" and nothing else, so the studio could only say "Temporal refused the schedule". Here a
 * cron is checked the way Temporal reads it (its cron syntax: 5 fields — minute hour day-of-month month
 * day-of-week —, 6 with a year after them, 7 with seconds first and a year last; `*`, `?`, lists, ranges, steps,
 * JAN-DEC and SUN-SAT; the @-macros and `@every <duration>`), and a mistake is named: which field, which value,
 * what it may be. What this check passes Temporal still compiles (and may refuse; the api then says so too).
 */

export const CRON_HINT = 'A cron has 5 fields (minute hour day-of-month month day-of-week), e.g. "0 9 * * 1-5" (09:00 on weekdays).';

interface Field {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  /** The first name's number (JAN is 1, SUN is 0). */
  namesFrom?: number;
}

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] as const;
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] as const;
const SECOND: Field = { name: 'second', min: 0, max: 59 };
const MINUTE: Field = { name: 'minute', min: 0, max: 59 };
const HOUR: Field = { name: 'hour', min: 0, max: 23 };
const DOM: Field = { name: 'day-of-month', min: 1, max: 31 };
const MONTH: Field = { name: 'month', min: 1, max: 12, names: MONTHS, namesFrom: 1 };
// 7 is Sunday too.
const DOW: Field = { name: 'day-of-week', min: 0, max: 7, names: DAYS, namesFrom: 0 };
const YEAR: Field = { name: 'year', min: 1970, max: 2999 };

const LAYOUTS: Record<number, Field[]> = {
  5: [MINUTE, HOUR, DOM, MONTH, DOW],
  6: [MINUTE, HOUR, DOM, MONTH, DOW, YEAR],
  7: [SECOND, MINUTE, HOUR, DOM, MONTH, DOW, YEAR],
};
const MACROS = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly']);

/** What is wrong with `cron` (a sentence naming the field and the value, then {@link CRON_HINT}), or null. */
export function cronProblem(cron: string): string | null {
  const text = cron.trim().replace(/\s+#.*$/, '');
  if (text.startsWith('@')) {
    const macro = text.toLowerCase();
    if (MACROS.has(macro)) return null;
    if (/^@every\s+\S/.test(macro)) return null; // a duration Temporal reads (1h30m, 45s, …)
    return `cron: "${cron}" is not one of @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>. ${CRON_HINT}`;
  }
  const parts = text.split(/\s+/);
  const layout = LAYOUTS[parts.length];
  if (!layout) return `cron: "${cron}" has ${parts.length} field${parts.length === 1 ? '' : 's'}. ${CRON_HINT}`;
  for (let i = 0; i < parts.length; i++) {
    const problem = fieldProblem(parts[i]!, layout[i]!);
    if (problem) return `cron: the ${layout[i]!.name} field: ${problem}. ${CRON_HINT}`;
  }
  return null;
}

function fieldProblem(part: string, f: Field): string | null {
  for (const item of part.split(',')) {
    if (!item) return `"${part}" has an empty item between its commas`;
    const [range = '', step, extra] = item.split('/');
    if (extra !== undefined) return `"${item}" has more than one step (/)`;
    if (step !== undefined && !/^\d+$/.test(step)) return `"${item}" has a step that is not a whole number`;
    if (step !== undefined && Number(step) < 1) return `"${item}" has a step of 0`;
    if (range === '*' || range === '?') continue;
    const ends = range.split('-');
    if (ends.length > 2 || ends.some((e) => !e)) return `"${item}" is not a value, a range (1-5) or * with an optional step (*/15)`;
    const values: number[] = [];
    for (const e of ends) {
      const v = value(e, f);
      if (typeof v === 'string') return v;
      values.push(v);
    }
    if (values.length === 2 && values[0]! > values[1]!) return `the range "${range}" ends before it starts`;
  }
  return null;
}

function value(token: string, f: Field): number | string {
  if (/^\d+$/.test(token)) {
    const n = Number(token);
    return n < f.min || n > f.max ? `${token} is not between ${f.min} and ${f.max}` : n;
  }
  const i = f.names?.indexOf(token.toUpperCase() as never) ?? -1;
  if (i >= 0) return i + (f.namesFrom ?? 0);
  return f.names
    ? `"${token}" is neither a number from ${f.min} to ${f.max} nor one of ${f.names[0]}-${f.names[f.names.length - 1]}`
    : `"${token}" is not a number from ${f.min} to ${f.max}`;
}
