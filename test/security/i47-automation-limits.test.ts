/**
 * Issue 47, "automation without limits", on the real stack (console API over HTTP, Temporal's own compilation of a
 * cron, real turns fanning out to webhooks): schedules firing every second or `@every 1s` were accepted, a tenant made
 * 40 schedules in 11 s and 110 webhooks on one app, the webhook list showed the newest 100 only, and each run fanned out
 * to every webhook at once. Now: SCHEDULE_MIN_INTERVAL_SECONDS (default 60) for intervals and crons alike, schedules
 * and webhooks counted per app and per tenant under a lock (parallel creates included), the list paginated, and
 * deliveries over the rate delayed to the next window — every one still delivered.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDeliveries } from '../../core/domain/webhooks/delivery-rate.js';
import { createAgentApp } from '../../core/domain/seed.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const LIMITS = {
  SCHEDULES_PER_APP: 3,
  SCHEDULES_PER_TENANT: 5,
  WEBHOOKS_PER_APP: 3,
  WEBHOOKS_PER_TENANT: 4,
  WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP: 2,
  WEBHOOK_DELIVERIES_PER_MINUTE_PER_TENANT: 50,
  WEBHOOK_DELIVERY_RATE_WINDOW_S: 3,
};
let stack: Stack;
let otherApp: { appId: string; apiKey: string };
const scheduleIds: string[] = [];

const consoleApi = (appId: string, path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${stack.apiUrl}/console/api/apps/${appId}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, deadlineMs = 30_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const schedule = (name: string, spec: Record<string, unknown>) => ({ name, query: 'hello', user: 'limits-user', paused: true, ...spec });

beforeAll(async () => {
  stack = await startTestStack('i47_automation', {
    env: { ...LIMITS, WEBHOOK_ALLOW_PRIVATE_NETWORK: true, WEBHOOK_DISPATCH_POLL_MS: 200, WEBHOOK_RETRY_INITIAL_MS: 200 },
  });
  otherApp = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Second app of the tenant' });
}, 300_000);

afterAll(async () => {
  // Nothing left firing into the shared dev server.
  for (const id of scheduleIds)
    await stack?.temporal.schedule
      .getHandle(`app-schedule-${id}`)
      .delete()
      .catch(() => undefined);
  await stack?.stop();
});

describe('the shortest time between two runs of a schedule', () => {
  it('intervals and crons firing more often than 60 s are refused with 400 schedule_interval_too_short; nothing is kept', async () => {
    const appId = stack.demo!.appId;
    const refused: [Record<string, unknown>, string][] = [
      [{ interval_seconds: 1 }, 'every 1 s'],
      [{ interval_seconds: 59 }, 'every 59 s'],
      [{ cron: '* * * * * * *' }, 'every 1 s'], // 7 fields: seconds first
      [{ cron: '*/30 * * * * * *' }, 'every 30 s'],
      [{ cron: '0,59 0,1 * * * * *' }, 'every 1 s'], // 00:00:59 and 00:01:00
      [{ cron: '@every 1s' }, 'every 1 s'],
      [{ cron: '@every 45s' }, 'every 45 s'],
    ];
    for (const [i, [spec, says]] of refused.entries()) {
      const res = await consoleApi(appId, '/schedules', { method: 'POST', body: schedule(`too-often-${i}`, { ...spec, paused: false }) });
      const body = (await res.json()) as { code: string; message: string };
      expect([spec, res.status, body.code]).toEqual([spec, 400, 'schedule_interval_too_short']);
      expect(body.message).toContain(says);
      expect(body.message).toContain('SCHEDULE_MIN_INTERVAL_SECONDS');
    }
    expect(await stack.db.appSchedule.count({ where: { name: { startsWith: 'too-often-' } } })).toBe(0);
    // None of them is left in Temporal (the listing catches up with a delete within moments).
    await waitFor('no refused schedule listed in Temporal', async () => {
      for await (const s of stack.temporal.schedule.list()) if (s.state.note?.includes('· too-often-')) return false;
      return true;
    });
    expect(await stack.db.message.count({ where: { app_id: appId } })).toBe(0);
  });

  it('every minute, @every 60s, @hourly and a 60 s interval are accepted; a cron asked to run is unpaused after its check', async () => {
    const appId = otherApp.appId;
    // One at a time, each deleted once read back: four schedules would pass this app's SCHEDULES_PER_APP (3) and
    // leave the tenant's count (5) short for the quota test below.
    for (const [i, spec] of [
      { cron: '* * * * *', paused: false },
      { cron: '@every 60s' },
      { cron: '@hourly' },
      { interval_seconds: 60 },
    ].entries()) {
      const res = await consoleApi(appId, '/schedules', { method: 'POST', body: schedule(`ok-${i}`, spec) });
      expect(res.status, await res.clone().text()).toBe(201);
      const { id } = (await res.json()) as { id: string };
      scheduleIds.push(id);
      const described = await stack.temporal.schedule.getHandle(`app-schedule-${id}`).describe();
      expect(described.state.note).toBe(`Second app of the tenant · ok-${i}`);
      // The cron asked to run is unpaused after its check; the others were asked to stay paused.
      expect(described.state.paused).toBe(i !== 0);
      expect((await consoleApi(appId, `/schedules/${id}`, { method: 'DELETE' })).status).toBe(204);
    }
  });
});

describe('how many schedules and webhooks an app and a tenant hold', () => {
  it('parallel schedule creates on one app stop at SCHEDULES_PER_APP; the tenant stops at SCHEDULES_PER_TENANT (403 schedule_quota_exceeded)', async () => {
    const appId = stack.demo!.appId;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        consoleApi(appId, '/schedules', { method: 'POST', body: schedule(`quota-${i}`, { interval_seconds: 3600 }) }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as { id?: string; code?: string; message?: string },
        })),
      ),
    );
    scheduleIds.push(...results.flatMap((r) => (r.body.id ? [r.body.id] : [])));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    const refusals = results.filter((r) => r.status !== 201);
    expect(refusals).toHaveLength(5);
    for (const r of refusals) {
      expect([r.status, r.body.code]).toEqual([403, 'schedule_quota_exceeded']);
      expect(r.body.message).toContain('This app has 3 schedules');
    }
    expect(await stack.db.appSchedule.count({ where: { app_id: appId } })).toBe(3);

    // The second app: two more make the tenant's five; the next is refused for the tenant.
    for (const i of [0, 1]) {
      const res = await consoleApi(otherApp.appId, '/schedules', {
        method: 'POST',
        body: schedule(`tenant-${i}`, { interval_seconds: 3600 }),
      });
      expect(res.status).toBe(201);
      scheduleIds.push(((await res.json()) as { id: string }).id);
    }
    const over = await consoleApi(otherApp.appId, '/schedules', { method: 'POST', body: schedule('tenant-2', { interval_seconds: 3600 }) });
    expect(over.status).toBe(403);
    expect(await over.json()).toMatchObject({ code: 'schedule_quota_exceeded', message: expect.stringContaining('SCHEDULES_PER_TENANT') });
    // Deleting one frees its place.
    const [oldest] = await stack.db.appSchedule.findMany({ where: { app_id: stack.demo!.appId }, take: 1 });
    expect((await consoleApi(stack.demo!.appId, `/schedules/${oldest!.id}`, { method: 'DELETE' })).status).toBe(204);
    const again = await consoleApi(otherApp.appId, '/schedules', {
      method: 'POST',
      body: schedule('tenant-2', { interval_seconds: 3600 }),
    });
    expect(again.status).toBe(201);
    scheduleIds.push(((await again.json()) as { id: string }).id);
  });

  it('parallel webhook creates stop at WEBHOOKS_PER_APP, the tenant at WEBHOOKS_PER_TENANT (403 webhook_quota_exceeded); the list pages', async () => {
    const appId = stack.demo!.appId;
    const results = await Promise.all(
      Array.from({ length: 7 }, (_, i) =>
        consoleApi(appId, '/webhooks', { method: 'POST', body: { url: `http://127.0.0.1:9/hook-${i}`, enabled: false } }).then(
          async (r) => ({
            status: r.status,
            body: (await r.json()) as { code?: string; message?: string },
          }),
        ),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    for (const r of results.filter((x) => x.status !== 201)) {
      expect([r.status, r.body.code]).toEqual([403, 'webhook_quota_exceeded']);
      expect(r.body.message).toContain('This app has 3 webhooks');
    }
    expect(
      (await consoleApi(otherApp.appId, '/webhooks', { method: 'POST', body: { url: 'http://127.0.0.1:9/x', enabled: false } })).status,
    ).toBe(201);
    const over = await consoleApi(otherApp.appId, '/webhooks', { method: 'POST', body: { url: 'http://127.0.0.1:9/y', enabled: false } });
    expect(over.status).toBe(403);
    expect(await over.json()).toMatchObject({ code: 'webhook_quota_exceeded', message: expect.stringContaining('WEBHOOKS_PER_TENANT') });

    // Dify's pages: page/limit in, data/has_more/limit/total/page out, newest first, every webhook on some page.
    const page = async (n: number) =>
      (await (await consoleApi(appId, `/webhooks?page=${n}&limit=2`)).json()) as {
        data: { id: string; created_at: number }[];
        has_more: boolean;
        total: number;
        page: number;
        limit: number;
      };
    const [p1, p2] = [await page(1), await page(2)];
    expect([p1.data.length, p1.has_more, p1.total, p1.page, p1.limit]).toEqual([2, true, 3, 1, 2]);
    expect([p2.data.length, p2.has_more, p2.total, p2.page]).toEqual([1, false, 3, 2]);
    const all = [...p1.data, ...p2.data];
    expect(new Set(all.map((w) => w.id)).size).toBe(3);
    expect(all.map((w) => w.created_at)).toEqual([...all.map((w) => w.created_at)].sort((a, b) => b - a));
    expect((await consoleApi(appId, '/webhooks?limit=101')).status).toBe(400);
  });
});

describe('the webhook delivery rate', () => {
  it('deliveries over WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP wait for the next window and all arrive, each once', async () => {
    // Room for this test's webhooks: the quota test above left the tenant full.
    await stack.db.appWebhook.deleteMany({ where: { tenant_id: stack.demo!.tenantId } });
    const arrivals: { at: number; eventId: string; path: string }[] = [];
    const server = http.createServer((req, res) => {
      arrivals.push({ at: Date.now(), eventId: String(req.headers['dify-event-id']), path: req.url! });
      req.resume();
      req.on('end', () => res.writeHead(200).end('ok'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      // Three webhooks of one app: two turns make six deliveries at once, three times the rate of a window.
      for (const i of [0, 1, 2]) {
        const res = await consoleApi(stack.demo!.appId, '/webhooks', {
          method: 'POST',
          body: { url: `${base}/h${i}`, events: ['turn.succeeded'] },
        });
        expect(res.status).toBe(201);
      }
      for (const q of ['first', 'second']) {
        const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: q, user: `rate-${q}` });
        expect([status, frames.at(-1)!.event]).toEqual([200, 'message_end']);
      }
      await waitFor('all six deliveries', async () => arrivals.length >= 6, 60_000);
      await new Promise((r) => setTimeout(r, 500)); // nothing more should come
      expect(arrivals).toHaveLength(6);
      // Each (event, webhook) once: none dropped, none doubled.
      expect(new Set(arrivals.map((a) => `${a.eventId} ${a.path}`)).size).toBe(6);
      const deliveries = await stack.db.webhookDelivery.findMany({ where: { app_id: stack.demo!.appId, event: 'turn.succeeded' } });
      expect(deliveries.map((d) => d.status)).toEqual(Array(6).fill('succeeded'));
      // At most two started per 3 s window: six need three windows, so the last came at least two windows after the first.
      const at = arrivals.map((a) => a.at).sort((a, b) => a - b);
      expect(at[5]! - at[0]!).toBeGreaterThanOrEqual(2 * 3_000 - 1_000);
      for (let i = 0; i + 2 < at.length; i++) expect(at[i + 2]! - at[i]!).toBeGreaterThan(1_500);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 120_000);

  it('admission is one count for every dispatcher: ten at once, three deliveries each, admit exactly the limit', async () => {
    const appId = crypto.randomUUID();
    const config = { ...stack.config, WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP: 4, WEBHOOK_DELIVERY_RATE_WINDOW_S: 60 };
    const batches = await Promise.all(
      Array.from({ length: 10 }, () =>
        admitDeliveries(
          stack.db,
          config,
          Array.from({ length: 3 }, () => ({ id: crypto.randomUUID(), appId, tenantId: stack.demo!.tenantId })),
        ),
      ),
    );
    expect(batches.flat()).toHaveLength(4);
    // The points of the ones held back went back: the window's count is what started.
    const [row] = await stack.db.$queryRaw<
      { points: number }[]
    >`select points from rate_limits where key = ${`webhook_deliveries_app:${appId}`}`;
    expect(row!.points).toBe(4);
  });
});
