/**
 * Issue 42's studio problems, each at a desktop's size (1366x900) and a phone's (390x844), with an axe-core scan and
 * a screenshot (test-results/screenshots): a new "my build draft" answers its first debugger message without a Save
 * first (problem 4); the studio opens at its top with the screen tabs in sight, also when the debugger has a
 * conversation to show (problem 10); the system prompt is edited in a wide, tall editor; an API key's "Last used" fills in once the key is used; a bad cron expression is
 * refused with a message that says what a cron looks like, next to its field (the smaller items).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { openStudio, studioScreen } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 } },
  { name: 'phone', viewport: { width: 390, height: 844 } },
] as const;

let stack: Stack;

const consoleApi = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe.runIf(chromiumPath)('issue 42: the studio', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_issue42', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0, SCHEDULE_MIN_INTERVAL_SECONDS: 1 } });
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  async function studio(size: (typeof SIZES)[number], failures: string[], expected?: (status: number, url: string) => boolean) {
    const s = await openStudio(stack, failures, { viewport: size.viewport, ...(expected ? { expected } : {}) });
    open.push(s.browser);
    return s.page;
  }

  for (const size of SIZES) {
    it(`a new "my build draft" answers its first debugger message without a Save first (${size.name})`, async () => {
      // Each size starts with no build draft of the account's.
      const gone = await consoleApi('/agent/build-draft', 'DELETE');
      expect([204, 404]).toContain(gone.status);
      const failures: string[] = [];
      const page = await studio(size, failures);
      await page.selectOption('#target', 'build');
      await expect.poll(() => page.locator('#draft-info').textContent()).toBe('new build draft (from the shared draft)');
      await page.click('#new-debug');
      await page.fill('#query', 'first message on my build draft');
      await page.click('#send');
      const answer = page.locator('#messages .msg.agent .text').last();
      await expect.poll(() => answer.textContent(), { timeout: 30_000 }).toContain('first message on my build draft');
      expect(await page.locator('#messages .msg.agent.error').count()).toBe(0);
      // The turn ran on a build draft of the account's own, made from the shared draft, which the form now edits.
      const turn = () =>
        stack.db.message.findFirstOrThrow({ where: { query: 'first message on my build draft' }, orderBy: { created_at: 'desc' } });
      await expect.poll(async () => (await turn()).status, { timeout: 20_000 }).toBe('succeeded');
      const msg = await turn();
      expect((msg.metadata as { draft_type?: string }).draft_type).toBe('BUILD_DRAFT');
      const shared = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
      const build = await stack.db.agentConfigDraft.findFirstOrThrow({
        where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT' },
      });
      expect(build.config).toEqual(shared.config);
      expect(build.base_draft_revision).toBe(shared.revision);
      await expect
        .poll(() => page.locator('#draft-info').textContent(), { timeout: 20_000 })
        .toBe(`BUILD_DRAFT revision ${build.revision}`);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-build-draft-${size.name}.png`, false);
      expect(failures).toEqual([]);
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`opens at the top with the screen tabs in sight, also with a debugger conversation to show (${size.name})`, async () => {
      // The debugger has a conversation of several turns (the build-draft test's, and these).
      for (const q of ['one', 'two', 'three'])
        await consoleApi('/agent/debug/chat-messages', 'POST', { query: `/long 40 ${q}`, inputs: {}, draft: 'draft' }).then((r) =>
          r.text(),
        );
      const failures: string[] = [];
      const page = await studio(size, failures);
      await expect.poll(() => page.locator('#messages .msg.agent').count(), { timeout: 20_000 }).toBeGreaterThan(0);
      await page.waitForTimeout(500);
      const where = () =>
        page.evaluate(() => {
          const tabs = document.getElementById('screens')!.getBoundingClientRect();
          return {
            windowY: window.scrollY,
            mainY: document.querySelector('main')!.scrollTop,
            tabsTop: tabs.top,
            tabsBottom: tabs.bottom,
            height: window.innerHeight,
          };
        });
      const w = await where();
      expect(w.windowY).toBe(0);
      expect(w.mainY).toBe(0);
      expect(w.tabsTop).toBeGreaterThanOrEqual(0);
      expect(w.tabsBottom).toBeLessThanOrEqual(w.height);
      // The debugger's own list shows its latest message (it scrolls inside itself, not the page).
      const gap = await page.evaluate(() => {
        const m = document.getElementById('messages')!;
        return m.scrollHeight - m.scrollTop - m.clientHeight;
      });
      expect(gap).toBeLessThan(4);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-opens-at-top-${size.name}.png`, false);
      expect(failures).toEqual([]);
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`the system prompt is edited in a wide, tall editor, its mention menu kept (${size.name})`, async () => {
      const failures: string[] = [];
      const page = await studio(size, failures);
      await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
      const sizes = await page.evaluate(() => {
        const prompt = document.getElementById('f-prompt')!.getBoundingClientRect();
        const editor = document.getElementById('editor')!.getBoundingClientRect();
        return { width: prompt.width, height: prompt.height, editor: editor.width };
      });
      expect(sizes.width).toBeGreaterThanOrEqual(sizes.editor * 0.95);
      expect(sizes.height).toBeGreaterThanOrEqual(200);
      await page.focus('#f-prompt');
      await page.keyboard.press('End');
      await page.keyboard.type(' {{#tool.calc');
      await expect.poll(() => page.locator('#mentions li').allTextContents()).toContain('tool calculator');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-prompt-editor-${size.name}.png`, false);
      expect(failures).toEqual([]);
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`an API key's "Last used" fills in once it is used (${size.name})`, async () => {
      const failures: string[] = [];
      const page = await studio(size, failures);
      await studioScreen(page, 'keys');
      await page.fill('#key-name', `used-${size.name}`);
      await page.click('#key-create button[type="submit"]');
      const key = (await page.locator('#key-new code').textContent())!;
      const row = page.locator('#key-table tbody tr', { hasText: `used-${size.name}` });
      await expect.poll(() => row.locator('td').nth(3).textContent()).toBe('—');
      const info = await fetch(`${stack.apiUrl}/v1/info`, { headers: { authorization: `Bearer ${key}` } });
      expect(info.status).toBe(200);
      await studioScreen(page, 'agent');
      await studioScreen(page, 'keys');
      const used = await stack.db.apiToken.findFirstOrThrow({ where: { name: `used-${size.name}` } });
      expect(used.last_used_at).not.toBeNull();
      await expect
        .poll(() => row.locator('td').nth(3).textContent())
        .toBe(await page.evaluate((s) => new Date(s * 1000).toLocaleString(), Math.floor(used.last_used_at!.getTime() / 1000)));
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-key-last-used-${size.name}.png`, false);
      expect(failures).toEqual([]);
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`a bad cron expression is refused with a message that says what a cron looks like (${size.name})`, async () => {
      const failures: string[] = [];
      const page = await studio(size, failures, (status, url) => status === 400 && url.endsWith('/schedules'));
      await studioScreen(page, 'schedules');
      const cases = [
        { cron: 'every day at nine', says: 'A cron has 5 fields (minute hour day-of-month month day-of-week)' },
        { cron: '0 25 * * *', says: 'the hour field: 25 is not between 0 and 23' },
        { cron: '61 9 * * 1-5', says: 'the minute field: 61 is not between 0 and 59' },
        { cron: '0 9 * * mon-fri/x', says: 'the day-of-week field' },
      ];
      for (const c of cases) {
        await page.fill('#sc-name', `bad ${c.cron}`);
        await page.fill('#sc-cron', c.cron);
        await page.fill('#sc-query', 'hello');
        await page.click('#sc-create button[type="submit"]');
        const error = page.locator('#sc-cron-error');
        await expect.poll(() => error.textContent(), { timeout: 20_000 }).toContain(c.says);
        expect(await error.textContent()).toContain('e.g. "0 9 * * 1-5"');
        expect(await error.textContent()).not.toContain('Temporal');
        expect(await page.getAttribute('#sc-cron', 'aria-invalid')).toBe('true');
        expect(await page.locator('#sc-table tbody tr').count()).toBe(0);
      }
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-issue42-bad-cron-${size.name}.png`, false);
      // Fixed, it is created and the error goes.
      await page.fill('#sc-cron', '0 9 * * 1-5');
      expect(await page.locator('#sc-cron-error').isVisible()).toBe(false);
      await page.click('#sc-create button[type="submit"]');
      await expect.poll(() => page.locator('#sc-table tbody tr').count(), { timeout: 20_000 }).toBe(1);
      await page.locator('#sc-table tbody tr button', { hasText: 'Delete' }).click();
      await expect.poll(() => page.locator('#sc-table tbody tr').count(), { timeout: 20_000 }).toBe(0);
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
