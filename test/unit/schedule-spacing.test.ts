/**
 * The shortest gap between two runs of a compiled schedule spec (core/domain/schedule-spacing.ts), against calendars
 * in the shape Temporal's frontend compiles a cron into (ranges of second, minute, hour, day of month, month, year,
 * day of week; an empty field is Temporal's default). The route reads the real compilation back from Temporal
 * (test/security/i47-automation-limits.test.ts); here the arithmetic, case by case.
 */
import { describe, expect, it } from 'vitest';
import { calendarShortestGapSeconds, specShortestGapSeconds, type StructuredCalendar } from '../../core/domain/schedule-spacing.js';

const r = (start: number, end = start, step = 1) => ({ start, end, step });
const NOW = new Date('2026-12-12T00:00:00Z');
const gap = (c: StructuredCalendar) => calendarShortestGapSeconds(c, NOW);

describe('calendarShortestGapSeconds', () => {
  it.each<[string, StructuredCalendar, number]>([
    ['every second (7-field * * * * * * *)', { second: [r(0, 59)], minute: [r(0, 59)], hour: [r(0, 23)] }, 1],
    ['every 30 s (*/30 in the seconds field)', { second: [r(0, 59, 30)], minute: [r(0, 59)], hour: [r(0, 23)] }, 30],
    ['seconds 0 and 59 of minutes 0 and 1: the minute boundary is the closest', { second: [r(0), r(59)], minute: [r(0, 1)] }, 1],
    ['every minute (* * * * *)', { minute: [r(0, 59)], hour: [r(0, 23)] }, 60],
    ['minutes 59 and 0 of consecutive hours', { minute: [r(0), r(59)], hour: [r(0, 23)] }, 60],
    ['every 5 minutes', { minute: [r(0, 59, 5)], hour: [r(0, 23)] }, 300],
    ['hourly (@hourly)', { hour: [r(0, 23)] }, 3600],
    ['23:59 and 00:00 of consecutive days', { minute: [r(0), r(59)], hour: [r(0), r(23)] }, 60],
    ['daily at 09:00', { hour: [r(9)] }, 86_400],
    ['weekdays at 09:00 (0 9 * * 1-5)', { hour: [r(9)], dayOfWeek: [r(1, 5)] }, 86_400],
    ['Mondays at 09:00', { hour: [r(9)], dayOfWeek: [r(1)] }, 7 * 86_400],
    ['Monday 00:00 and 23:00: 23 h apart within the day', { hour: [r(0), r(23)], dayOfWeek: [r(1)] }, 23 * 3600],
    ['the 31st and the 1st: consecutive days across a month end', { hour: [r(12)], dayOfMonth: [r(1), r(31)] }, 86_400],
    ['monthly on the 1st', { dayOfMonth: [r(1)] }, 28 * 86_400],
    ['February 29th only: every four years', { dayOfMonth: [r(29)], month: [r(2)] }, 1461 * 86_400],
    ['one second of one day of one year: once', { second: [r(5)], dayOfMonth: [r(3)], month: [r(4)], year: [r(2030)] }, Infinity],
    ['Sunday as 7', { hour: [r(9)], dayOfWeek: [r(7)] }, 7 * 86_400],
  ])('%s', (_name, cal, expected) => {
    expect(gap(cal)).toBe(expected);
  });
});

describe('specShortestGapSeconds', () => {
  it('an interval (@every, interval_seconds) is its own gap; a lone calendar its gap; two entries are never accepted', () => {
    expect(specShortestGapSeconds({ calendars: [], intervalsSeconds: [1] }, NOW)).toBe(1);
    expect(specShortestGapSeconds({ calendars: [], intervalsSeconds: [90] }, NOW)).toBe(90);
    expect(specShortestGapSeconds({ calendars: [{ hour: [r(0, 23)] }], intervalsSeconds: [] }, NOW)).toBe(3600);
    expect(specShortestGapSeconds({ calendars: [{ hour: [r(1)] }, { hour: [r(2)] }], intervalsSeconds: [] }, NOW)).toBe(1);
    expect(specShortestGapSeconds({ calendars: [], intervalsSeconds: [] }, NOW)).toBe(Infinity);
  });
});
