/**
 * Issue 42's monitoring screen in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core
 * scan and a screenshot (test-results/screenshots): a "Monitoring" tab whose seven charts (conversations, active users,
 * messages, tokens, cost, latency p50/p95, error rate) are drawn by Chart.js — its chunk fetched only when the screen
 * is first shown — from GET /statistics over real turns of the demo model; each card names the range's total; the
 * range filter asks the api again for that range (last 4 weeks: 28 daily points).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { chat } from '../support/sse.js';
import { openStudio, studioScreen } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;
const CHARTS = ['conversations', 'active-users', 'messages', 'tokens', 'cost', 'latency', 'error-rate'];

let stack: Stack;

/** How many of the canvas's pixels are painted (non-transparent): a drawn chart has its axes, labels and line. */
const painted = (page: Page, id: string) =>
  page.evaluate((sel) => {
    const c = document.getElementById(sel) as HTMLCanvasElement;
    if (!c.width || !c.height) return 0;
    const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < px.length; i += 4) if (px[i]! > 0) n++;
    return n;
  }, id);

describe.runIf(chromiumPath)('issue 42: the studio monitoring screen', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_monitoring');
    const key = stack.demo!.apiKey;
    await chat(stack.apiUrl, key, { query: 'Hello there', user: 'alice' });
    await chat(stack.apiUrl, key, { query: 'And again', user: 'bob' });
    const failed = await chat(stack.apiUrl, key, { query: '/fail InvokeBadRequestError', user: 'bob' });
    expect(failed.frames.at(-1)!.event).toBe('error');
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`charts the app's usage and follows the range filter (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      open.push(s.browser);
      const page = s.page;
      const chunks: string[] = [];
      const stats: string[] = [];
      page.on('request', (r) => {
        if (/\/assets\/charts-[^/]+\.js$/.test(r.url())) chunks.push(r.url());
        if (r.url().includes('/statistics?')) stats.push(new URL(r.url()).search);
      });
      await expect.poll(() => page.locator('#screens button').allTextContents()).toContain('Monitoring');
      // The agent screen does not load the chart library.
      expect(chunks).toEqual([]);

      await studioScreen(page, 'monitoring');
      expect(await page.evaluate(() => location.hash)).toBe('#monitoring');
      for (const id of CHARTS) {
        await expect.poll(() => page.locator(`#mon-${id}`).getAttribute('data-points'), { timeout: 20_000 }).toBe('7');
        expect(await painted(page, `mon-${id}`), id).toBeGreaterThan(500);
      }
      expect(chunks).toHaveLength(1);
      expect(new URLSearchParams(stats.at(-1)).get('range')).toBe('last7days');
      // Three end-user turns today, by two users in three conversations; one of the three failed.
      const total = (id: string) => page.locator(`[data-chart="${id}"] .mon-total`).textContent();
      expect(await total('messages')).toBe('3');
      expect(await total('conversations')).toBe('3');
      expect(await total('active-users')).toBe('2');
      expect(await total('error-rate')).toBe('33.3 %');
      expect(await total('latency')).toMatch(/^p50 \d+\.\d\d s · p95 \d+\.\d\d s$/);
      expect(await page.locator('#mon-messages').getAttribute('aria-label')).toContain('Messages per day, 7 points');
      if (size.phone) expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-monitoring-${size.name}.png`, !size.phone);

      // The range filter asks again, for that range; the charts redraw with its buckets.
      const asked = page.waitForRequest((r) => r.url().includes('/statistics?') && r.url().includes('range=last4weeks'));
      await page.selectOption('#mon-range', 'last4weeks');
      await asked;
      await expect.poll(() => page.locator('#mon-tokens').getAttribute('data-points')).toBe('28');
      expect(await total('messages')).toBe('3');
      await page.selectOption('#mon-range', 'today');
      await expect.poll(() => page.locator('#mon-messages').getAttribute('aria-label')).toContain('Messages per hour');
      expect(new URLSearchParams(stats.at(-1)).get('range')).toBe('today');
      // The library was fetched once, for the first show.
      expect(chunks).toHaveLength(1);

      // Its link opens it again.
      await page.reload();
      await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
      await expect.poll(() => page.locator('#mon-conversations').getAttribute('data-points'), { timeout: 20_000 }).toBe('7');
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
