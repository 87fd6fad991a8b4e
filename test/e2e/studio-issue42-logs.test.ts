/**
 * Issue 42 problem 1 in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core scan and a
 * screenshot (test-results/screenshots): the studio's logs are a screen of their own — a "Logs" tab right after the
 * agent's, the agent screen no longer ending with them — whose filters and columns are all in sight and uncovered at
 * 1366 px (they sat under the debugger column there), which fits a phone, filters, opens a conversation and inspects
 * a turn on the same screen, and opens again from its #logs link. A knowledge answer in the logs shows its citations.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { chat } from '../support/sse.js';
import { openStudio, studioScreen } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;

const FILTERS = ['#log-user', '#log-status', '#log-feedback', '#log-source', '#log-from', '#log-to', '#log-filters button[type="submit"]'];
const COLUMNS = ['Conversation', 'User', 'Messages', 'Last status', 'Feedback', 'Updated'];

let stack: Stack;
let failedMessage = '';

/** Whether `selector`'s element is inside the viewport's width and what the page shows at its centre (not covered). */
function inSight(page: Page, selector: string) {
  return page.evaluate((sel) => {
    const e = document.querySelector(sel)!;
    e.scrollIntoView({ block: 'center', inline: 'nearest' });
    const r = e.getBoundingClientRect();
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return { inside: r.left >= 0 && r.right <= window.innerWidth && r.width > 0, uncovered: !!top && (top === e || e.contains(top)) };
  }, selector);
}

describe.runIf(chromiumPath)('issue 42: the studio logs screen', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_issue42_logs');
    const key = stack.demo!.apiKey;
    // The demo agent answers from a dataset (its citations on, the default), for carol's question.
    const consoleApi = async (p: string, method: string, body: unknown) =>
      fetch(`${stack.apiUrl}/console/api${p}`, {
        method,
        headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const ds = (await (await consoleApi('/datasets', 'POST', { name: 'Hours' })).json()) as { id: string };
    const doc = await consoleApi(`/datasets/${ds.id}/documents`, 'POST', {
      name: 'hours.md',
      text: 'The shop opens at 9 and closes at 17.',
    });
    expect(doc.status).toBe(201);
    const soul = demoSoulConfig();
    soul.knowledge = { enabled: true, dataset_ids: [ds.id], top_k: 3, score_threshold: 0.05, search_tool: true };
    const app = `/apps/${stack.demo!.appId}`;
    expect((await consoleApi(`${app}/agent/draft`, 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
    expect((await consoleApi(`${app}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);
    await chat(stack.apiUrl, key, { query: '/kb When does the shop close?', user: 'carol' });
    await chat(stack.apiUrl, key, { query: 'What are your opening hours?', user: 'alice' });
    const failed = await chat(stack.apiUrl, key, { query: '/fail InvokeBadRequestError', user: 'bob' });
    expect(failed.frames.at(-1)!.event).toBe('error');
    failedMessage = failed.frames.at(-1)!.data.message_id as string;
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`the logs are a screen of their own, every filter and column in sight (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      open.push(s.browser);
      const page = s.page;
      // A tab of its own, right after the agent's; the agent screen no longer shows the logs.
      await expect.poll(() => page.locator('#screens button').allTextContents()).toContain('Logs');
      const tabs = await page.locator('#screens button').allTextContents();
      expect(tabs.slice(0, 2)).toEqual(['Agent', 'Logs']);
      expect(await page.evaluate(() => document.body.dataset.screen)).toBe('agent');
      expect(await page.locator('#logs').isVisible()).toBe(false);

      await studioScreen(page, 'logs');
      expect(await page.evaluate(() => location.hash)).toBe('#logs');
      const rows = page.locator('#log-table tbody tr');
      await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(3);
      // Nothing of the agent screen on it: the config and the debugger are out of sight.
      expect(await page.locator('#editor').isVisible()).toBe(false);
      expect(await page.locator('#debugger').isVisible()).toBe(false);
      expect(await page.locator('#log-table thead th').allTextContents()).toEqual(COLUMNS);
      if (!size.phone) {
        // At 1366 px every filter and column is in the window and nothing lies over it; the table needs no sideways scroll.
        for (const sel of [...FILTERS, ...COLUMNS.map((_, i) => `#log-table thead th:nth-child(${i + 1})`)])
          expect(await inSight(page, sel), sel).toEqual({ inside: true, uncovered: true });
        const table = await page.locator('#logs .table-scroll').evaluate((e) => ({ scroll: e.scrollWidth, client: e.clientWidth }));
        expect(table.scroll).toBeLessThanOrEqual(table.client);
      } else {
        // A phone: the screen fits, the filters are in sight; the table scrolls sideways in its own named region.
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
        for (const sel of FILTERS) expect((await inSight(page, sel)).inside, sel).toBe(true);
      }
      await screenshot(page, `studio-issue42-logs-${size.name}.png`, false);

      // It filters, opens a conversation and inspects a turn without leaving the screen.
      await page.selectOption('#log-status', 'failed');
      await page.click('#log-filters button[type="submit"]');
      await expect.poll(() => rows.count()).toBe(1);
      expect(await rows.first().textContent()).toContain('bob');
      await rows.first().locator('button.link').click();
      const detail = page.locator('#log-messages');
      await expect.poll(() => detail.locator('.msg.agent').count()).toBe(1);
      await detail.locator('button.inspect').click();
      await expect.poll(() => page.locator('#inspector').isVisible()).toBe(true);
      await expect.poll(() => page.locator('#run-facts').textContent()).toContain(failedMessage);
      expect(await page.evaluate(() => document.body.dataset.screen)).toBe('logs');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-logs-inspect-${size.name}.png`, false);

      // A knowledge answer shows the chunks it was given, as in the chat page.
      await page.selectOption('#log-status', '');
      await page.fill('#log-user', 'carol');
      await page.click('#log-filters button[type="submit"]');
      await expect.poll(() => rows.allTextContents()).toEqual([expect.stringContaining('carol')]);
      await rows.first().locator('button.link').click();
      await expect.poll(() => detail.locator('.citations .citation-doc').allTextContents()).toEqual(['hours.md']);
      expect(await detail.locator('.msg.agent .text').textContent()).toMatch(/closes at 17\. \[1\]$/);
      expect(await axeViolations(page, '#logs')).toEqual([]);

      // Its link opens it again.
      await page.reload();
      await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
      await expect.poll(() => page.evaluate(() => document.body.dataset.screen)).toBe('logs');
      await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(3);
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
