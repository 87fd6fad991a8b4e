/**
 * Issue 42's smaller items, the text rules: a new conversation's name (core/domain/turn-text.ts conversationTitle:
 * what the first message says, without a leading slash command or Markdown) and a cron's mistakes named before
 * Temporal sees them (core/domain/cron-check.ts), while every form Temporal runs passes.
 */
import { describe, expect, it } from 'vitest';
import { CRON_HINT, cronProblem } from '../../core/domain/cron-check.js';
import { conversationName, conversationTitle } from '../../core/domain/turn-text.js';

describe('conversationTitle', () => {
  it.each([
    ['/echo ## Weekly **report** for `team-a`\n\nand the rest', 'Weekly report for team-a'],
    ['/ask What should I call you?', 'What should I call you?'],
    ['/slow 200 /think Plan the *release*', 'Plan the release'],
    ['- [the docs](https://example.com) and ![a chart](c.png)', 'the docs and a chart'],
    ['```js\nconst a = 1;\n```\n\nWhy does this fail?', 'Why does this fail?'],
    ['> quoted <b>bold</b> words', 'quoted bold words'],
    ['Plan   a trip\nto   Lisbon in spring please, with a detailed day-by-day itinerary', 'Plan a trip to Lisbon in spring please,…'],
    ['snake_case and 2*3*4 stay', 'snake_case and 2*3*4 stay'],
    ['/usr/bin/env is a path, not a command', '/usr/bin/env is a path, not a command'],
    // Nothing but a command: the raw text, as before.
    ['/slow 200 /long 60', '/slow 200 /long 60'],
  ])('%j → %j', (query, name) => {
    expect(conversationTitle(query)).toBe(name);
  });

  it('leaves the workflow summaries’ one-line form as it was', () => {
    expect(conversationName('/ask *What*')).toBe('/ask *What*');
  });
});

describe('cronProblem', () => {
  it.each([
    ['every day at nine', 'cron: "every day at nine" has 4 fields.'],
    ['0 25 * * *', 'cron: the hour field: 25 is not between 0 and 23.'],
    ['61 9 * * 1-5', 'cron: the minute field: 61 is not between 0 and 59.'],
    ['0 9 32 * *', 'cron: the day-of-month field: 32 is not between 1 and 31.'],
    ['0 9 * 13 *', 'cron: the month field: 13 is not between 1 and 12.'],
    ['0 9 * * mon-fri/x', 'cron: the day-of-week field: "mon-fri/x" has a step that is not a whole number.'],
    ['*/0 * * * *', 'cron: the minute field: "*/0" has a step of 0.'],
    ['0 9 * * funday', 'cron: the day-of-week field: "funday" is neither a number from 0 to 7 nor one of SUN-SAT.'],
    ['5-1 * * * *', 'cron: the minute field: the range "5-1" ends before it starts.'],
    ['0 9 1,,2 * *', 'cron: the day-of-month field: "1,,2" has an empty item between its commas.'],
    ['@sometimes', 'cron: "@sometimes" is not one of @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>.'],
  ])('%j is refused: %s', (cron, says) => {
    expect(cronProblem(cron)).toBe(`${says} ${CRON_HINT}`);
  });

  it.each([
    '0 9 * * 1-5',
    '* * * * *',
    '*/15 9-17 * * MON-FRI',
    '0 0 1 JAN,JUL ?',
    '0 0 * * 7',
    '0 12 * * * 2030',
    '* * * * * * *',
    '*/30 * * * * * *',
    '0,59 0,1 * * * * *',
    '@hourly',
    '@every 1s',
    '@every 1h30m',
  ])('%j passes', (cron) => {
    expect(cronProblem(cron)).toBeNull();
  });
});
