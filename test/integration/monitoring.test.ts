/**
 * The studio's monitoring (issue 42, Dify's): GET /console/api/apps/{app_id}/statistics over rows seeded at known
 * times, every figure computed by hand below — per day and per hour, empty buckets as zeros, the debugger's turns and
 * other apps' left out, distinct conversations and users over the range, latency percentiles of succeeded turns
 * (PostgreSQL percentile_cont: linear between ranks), error rate failed/finished; another tenant's app is a 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MONITORING_RESPONSES } from '../../api/openapi/monitoring.js';
import { ensureAccount, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let strangerKey: string;
const DAY = 86_400_000;
const startOfToday = new Date(Math.floor(Date.now() / DAY) * DAY);
const at = (daysAgo: number, hour: number, second = 0) =>
  new Date(startOfToday.getTime() - daysAgo * DAY + hour * 3_600_000 + second * 1000);
const ymd = (d: Date) => d.toISOString().slice(0, 10);

beforeAll(async () => {
  stack = await startTestStack('monitoring');
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
  const { db } = stack;
  const app = await db.app.findUniqueOrThrow({ where: { id: stack.demo!.appId } });
  const base = { tenant_id: app.tenant_id, app_id: app.id };
  const users = new Map<string, string>();
  const user = async (s: string) => {
    if (!users.has(s)) users.set(s, (await db.endUser.create({ data: { ...base, session_id: s } })).id);
    return users.get(s)!;
  };
  type Turn = { status: 'succeeded' | 'failed' | 'stopped' | 'running'; latency?: number; tokens: number; price: string; when: Date };
  const conversation = async (u: string | null, turns: Turn[], invoke_from = 'service-api') => {
    const end_user_id = u ? await user(u) : null;
    const c = await db.conversation.create({ data: { ...base, end_user_id, invoke_from, created_at: turns[0]!.when } });
    for (const t of turns)
      await db.message.create({
        data: {
          ...base,
          conversation_id: c.id,
          end_user_id,
          invoke_from,
          query: 'q',
          status: t.status,
          total_tokens: t.tokens,
          total_price: t.price,
          provider_response_latency: t.latency ?? 0,
          workflow_id: `seed-${crypto.randomUUID()}`,
          created_at: t.when,
        },
      });
  };
  // Yesterday: A (u1) two succeeded turns, 1 s and 3 s; B (u2) a failed and a stopped one; C the debugger's (left out).
  await conversation('u1', [
    { status: 'succeeded', latency: 1, tokens: 100, price: '0.001', when: at(1, 10) },
    { status: 'succeeded', latency: 3, tokens: 200, price: '0.002', when: at(1, 11) },
  ]);
  await conversation('u2', [
    { status: 'failed', tokens: 50, price: '0.0005', when: at(1, 12) },
    { status: 'stopped', latency: 9, tokens: 10, price: '0', when: at(1, 13) },
  ]);
  await conversation(null, [{ status: 'failed', latency: 100, tokens: 999, price: '9', when: at(1, 14) }], 'debugger');
  // Three days ago: D (u1) a succeeded turn of 5 s and one still running.
  await conversation('u1', [
    { status: 'succeeded', latency: 5, tokens: 40, price: '0.0004', when: at(3, 5) },
    { status: 'running', tokens: 0, price: '0', when: at(3, 6) },
  ]);
  // Today, in its first hour: E (u3) 0.5 s.
  await conversation('u3', [{ status: 'succeeded', latency: 0.5, tokens: 7, price: '0.00007', when: at(0, 0, 1) }]);
  // Ten days ago (outside the last 7 days, inside the last 4 weeks): F (u4).
  await conversation('u4', [{ status: 'succeeded', latency: 2, tokens: 1000, price: '0.01', when: at(10, 8) }]);
}, 120_000);
afterAll(async () => stack?.stop());

const stats = (q: Record<string, string>, key = stack.demo!.consoleKey, appId = stack.demo!.appId) =>
  fetch(`${stack.apiUrl}/console/api/apps/${appId}/statistics?${new URLSearchParams(q)}`, { headers: { authorization: `Bearer ${key}` } });

type Point = {
  bucket: string;
  conversations: number;
  active_users: number;
  messages: number;
  tokens: number;
  cost: string;
  latency_p50: number | null;
  latency_p95: number | null;
  failed: number;
  finished: number;
  error_rate: number | null;
};
type Body = { granularity: string; data: (Point & { start: number })[]; totals: Omit<Point, 'bucket'> };

async function read(q: Record<string, string>): Promise<Body> {
  const res = await stats(q);
  expect(res.status, await res.clone().text()).toBe(200);
  const body = (await res.json()) as Body;
  expect(MONITORING_RESPONSES.StatisticsResponse.safeParse(body).error).toBeUndefined();
  return body;
}

const ZERO = {
  conversations: 0,
  active_users: 0,
  messages: 0,
  tokens: 0,
  latency_p50: null,
  latency_p95: null,
  failed: 0,
  finished: 0,
  error_rate: null,
};

describe('monitoring statistics', () => {
  it('last 7 days by day: seven buckets, each figure as computed by hand, the debugger and older turns left out', async () => {
    const body = await read({ range: 'last7days', tz: 'UTC' });
    expect(body.granularity).toBe('day');
    expect(body.data.map((p) => p.bucket)).toEqual([6, 5, 4, 3, 2, 1, 0].map((d) => ymd(at(d, 0))));
    const byDay = new Map(body.data.map((p) => [p.bucket, p]));
    const yesterday = byDay.get(ymd(at(1, 0)))!;
    // 4 turns of A and B; p50 of [1, 3] = 2, p95 = 1 + 0.95 * (3 - 1) = 2.9; 1 failed of 4 finished.
    expect({ ...yesterday, cost: Number(yesterday.cost) }).toEqual({
      bucket: ymd(at(1, 0)),
      start: at(1, 0).getTime() / 1000,
      conversations: 2,
      active_users: 2,
      messages: 4,
      tokens: 360,
      cost: 0.0035,
      latency_p50: 2,
      latency_p95: expect.closeTo(2.9, 9),
      failed: 1,
      finished: 4,
      error_rate: 0.25,
    });
    const threeAgo = byDay.get(ymd(at(3, 0)))!;
    expect(threeAgo).toMatchObject({
      conversations: 1,
      active_users: 1,
      messages: 2,
      tokens: 40,
      latency_p50: 5,
      latency_p95: 5,
      failed: 0,
      finished: 1,
      error_rate: 0,
    });
    expect(byDay.get(ymd(at(0, 0)))).toMatchObject({ messages: 1, tokens: 7, latency_p50: 0.5 });
    expect(byDay.get(ymd(at(2, 0)))).toEqual({ bucket: ymd(at(2, 0)), start: at(2, 0).getTime() / 1000, ...ZERO, cost: '0' });
    // The range: conversations A B D E, users u1 u2 u3 (u1 on two days counts once); succeeded [0.5, 1, 3, 5]:
    // p50 = 1 + 0.5 * (3 - 1) = 2, p95 at rank 2.85 = 3 + 0.85 * (5 - 3) = 4.7; 1 failed of 6 finished.
    expect({ ...body.totals, cost: Number(body.totals.cost) }).toEqual({
      conversations: 4,
      active_users: 3,
      messages: 7,
      tokens: 407,
      cost: expect.closeTo(0.00397, 9),
      latency_p50: 2,
      latency_p95: expect.closeTo(4.7, 9),
      failed: 1,
      finished: 6,
      error_rate: expect.closeTo(1 / 6, 9),
    });
  });

  it('the other ranges: last 4 weeks and all reach ten days back, today is by hour', async () => {
    const weeks = await read({ range: 'last4weeks' });
    expect(weeks.data).toHaveLength(28);
    expect(weeks.totals).toMatchObject({ conversations: 5, active_users: 4, messages: 8, tokens: 1407 });
    const all = await read({ range: 'all' });
    expect(all.data[0]!.bucket).toBe(ymd(at(10, 0)));
    expect(all.data).toHaveLength(11);
    expect(all.totals.tokens).toBe(1407);
    const today = await read({ range: 'today' });
    expect(today.granularity).toBe('hour');
    expect(today.data).toHaveLength(new Date().getUTCHours() + 1);
    expect(today.data[0]).toMatchObject({ bucket: `${ymd(at(0, 0))}T00:00`, messages: 1, tokens: 7, conversations: 1 });
    expect(today.totals).toMatchObject({ messages: 1, active_users: 1 });
    // By hour over the last 7 days: yesterday's 10:00 and 11:00 hold A's turns.
    const hours = await read({ range: 'last7days', granularity: 'hour' });
    const h = new Map(hours.data.map((p) => [p.bucket, p]));
    expect(h.get(`${ymd(at(1, 0))}T10:00`)).toMatchObject({ messages: 1, tokens: 100, latency_p50: 1 });
    expect(h.get(`${ymd(at(1, 0))}T11:00`)).toMatchObject({ messages: 1, tokens: 200, latency_p50: 3 });
  });

  it("a time zone moves the day boundaries: Tokyo's days start at 15:00 UTC", async () => {
    const body = await read({ range: 'last7days', tz: 'Asia/Tokyo' });
    for (const p of body.data) expect(p.start % 86_400).toBe(15 * 3600);
    // u1's turn at 05:00 UTC three days ago is 14:00 in Tokyo, the same day.
    const byDay = new Map(body.data.map((p) => [p.bucket, p]));
    expect(byDay.get(ymd(at(3, 0)))?.tokens).toBe(40);
    // Yesterday's 10:00-13:00 UTC turns are 19:00-22:00 in Tokyo: still yesterday there.
    expect(byDay.get(ymd(at(1, 0)))?.messages).toBe(4);
    expect(body.totals.tokens).toBe(407);
  });

  it('refuses a bad range, zone or granularity with 400; another tenant reads the app as missing', async () => {
    const bad: Record<string, string>[] = [
      { range: 'forever' },
      { tz: 'Mars/Olympus' },
      { range: 'all', granularity: 'hour' },
      { granularity: 'minute' },
    ];
    for (const q of bad) {
      const res = await stats(q);
      expect(res.status, JSON.stringify(q)).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_param');
    }
    const res = await stats({ range: 'all' }, strangerKey);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { code: string }).code).toBe('app_not_found');
    expect((await stats({}, 'console-nope')).status).toBe(401);
  });
});
