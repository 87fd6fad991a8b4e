/**
 * Issue 42's app list in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core scan and a
 * screenshot (test-results/screenshots): each agent of the list has Duplicate and Delete (api/console/apps.ts). A
 * duplicate is listed and opened, its config the source's shared draft; Delete asks first, naming the app, and Cancel
 * keeps it; a confirmed delete removes it from the list and the database, and when it was the open app the studio
 * leaves it for another; deleting another app keeps the open one; an app with a turn waiting for a human is refused
 * with the api's message and stays listed. And the list is the keyboard's too: Tab reaches each app's name after
 * "New agent", Enter or Space opens it, its Duplicate and Delete following it in the tab order.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { chat } from '../support/sse.js';
import { noBuildDraftYet, openStudio } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 } },
  { name: 'phone', viewport: { width: 390, height: 844 } },
] as const;

let stack: Stack;

describe.runIf(chromiumPath)('issue 42: the studio’s app list duplicates and deletes apps', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_app_list', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`duplicates, asks before deleting, and leaves a deleted open app (${size.name})`, async () => {
      const tenantId = stack.demo!.tenantId;
      const other = await createAgentApp(stack.db, tenantId, { name: `Other ${size.name}`, soul: demoSoulConfig() });
      const busy = await createAgentApp(stack.db, tenantId, { name: `Busy ${size.name}`, soul: demoSoulConfig() });
      // A turn of Busy waits for a human: the api refuses its delete (409 app_busy).
      const asked = await chat(stack.apiUrl, busy.apiKey, { query: '/ask Which plan?', user: `busy-${size.name}` });
      expect(asked.frames.some((f) => f.event === 'human_input_required')).toBe(true);

      const failures: string[] = [];
      const s = await openStudio(stack, failures, {
        viewport: size.viewport,
        expected: (status, url) => noBuildDraftYet(status, url) || (status === 409 && url.endsWith(`/apps/${busy.appId}`)),
      });
      open.push(s.browser);
      const page = s.page;
      const names = () => page.locator('#apps li').allTextContents();
      const active = () => page.locator('#apps li.active').textContent();
      const row = (name: string) => page.locator('#apps li').filter({ hasText: new RegExp(`^${name.replace(/[()]/g, '\\$&')}$`) });
      await expect.poll(active).toBe('Demo Agent');
      await expect.poll(names).toEqual(expect.arrayContaining([`Other ${size.name}`, `Busy ${size.name}`]));

      // Duplicate: the copy is listed and opened on its config (the source's shared draft).
      const before = new Set((await stack.db.app.findMany({ select: { id: true } })).map((a) => a.id));
      await page.getByRole('button', { name: 'Duplicate Demo Agent' }).click();
      const copyName = 'Demo Agent (copy)'; // the desktop pass's copy is deleted by then
      await expect.poll(active).toBe(copyName);
      const copy = (await stack.db.app.findMany({ where: { tenant_id: tenantId } })).find((a) => !before.has(a.id))!;
      expect(copy.name).toBe(copyName);
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe(copyName);
      await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-app-list-${size.name}.png`, false);

      // Delete asks first, naming the app; Cancel keeps it.
      await page.getByRole('button', { name: `Delete ${copyName}` }).click();
      const confirm = page.getByRole('alertdialog');
      await expect.poll(() => confirm.isVisible()).toBe(true);
      expect(await page.locator('#app-confirm-text').textContent()).toContain(`Delete “${copyName}”?`);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-app-list-confirm-${size.name}.png`, false);
      await confirm.getByRole('button', { name: 'Cancel' }).click();
      expect(await confirm.isVisible()).toBe(false);
      expect(await stack.db.app.count({ where: { id: copy.id } })).toBe(1);
      expect(await names()).toContain(copyName);

      // Confirmed: gone from the list and the database; the studio leaves it (another app opens).
      await page.getByRole('button', { name: `Delete ${copyName}` }).click();
      await confirm.getByRole('button', { name: `Delete ${copyName}` }).click();
      await expect.poll(names).not.toContain(copyName);
      expect(await stack.db.app.count({ where: { id: copy.id } })).toBe(0);
      await expect.poll(active).not.toBe(copyName);
      const opened = (await active())!;
      expect(await names()).toContain(opened);
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe(opened);
      await expect.poll(() => page.locator('#status').textContent()).toBe(`Deleted ${copyName}.`);

      // Another app's delete keeps the open one.
      await row('Demo Agent').click();
      await expect.poll(active).toBe('Demo Agent');
      await page.getByRole('button', { name: `Delete Other ${size.name}` }).click();
      await confirm.getByRole('button', { name: `Delete Other ${size.name}` }).click();
      await expect.poll(names).not.toContain(`Other ${size.name}`);
      expect(await stack.db.app.count({ where: { id: other.appId } })).toBe(0);
      expect(await active()).toBe('Demo Agent');

      // A turn waiting for a human: refused with the api's message, still listed.
      await page.getByRole('button', { name: `Delete Busy ${size.name}` }).click();
      await confirm.getByRole('button', { name: `Delete Busy ${size.name}` }).click();
      await expect.poll(() => page.locator('#status').textContent()).toContain('stop them first');
      expect(await names()).toContain(`Busy ${size.name}`);
      expect(await stack.db.app.count({ where: { id: busy.appId } })).toBe(1);
      expect(await active()).toBe('Demo Agent');
      expect(failures).toEqual([]);
    }, 120_000);

    it(`opens an app from the keyboard: Tab to its name, Enter or Space (${size.name})`, async () => {
      const target = await createAgentApp(stack.db, stack.demo!.tenantId, { name: `Keyboard ${size.name}`, soul: demoSoulConfig() });
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport, expected: noBuildDraftYet });
      open.push(s.browser);
      const page = s.page;
      const active = () => page.locator('#apps li.active').textContent();
      await expect.poll(active).toBe('Demo Agent');
      const names = await page.locator('#apps li').allTextContents();
      const at = names.indexOf(`Keyboard ${size.name}`);
      const home = names.indexOf('Demo Agent');
      expect(at).toBeGreaterThanOrEqual(0);
      /** The focused element: its text, and whether it is the open-control of a row of the list. */
      const focused = () =>
        page.evaluate(() => {
          const e = document.activeElement as HTMLElement | null;
          return { text: e?.textContent ?? '', row: e?.parentElement?.matches('#apps li') === true && e.tagName === 'BUTTON' };
        });
      const tab = async (n: number, shift = false) => {
        for (let i = 0; i < n; i++) await page.keyboard.press(shift ? 'Shift+Tab' : 'Tab');
      };

      // From "New agent", Tab reaches the first app's name; each row is its name, Duplicate, Delete.
      await page.locator('button.new-app').focus();
      await tab(1);
      expect(await focused()).toEqual({ text: names[0], row: true });
      await tab(3 * at);
      expect(await focused()).toEqual({ text: `Keyboard ${size.name}`, row: true });
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-app-list-keyboard-${size.name}.png`, false);
      await page.keyboard.press('Enter');
      await expect.poll(active).toBe(`Keyboard ${size.name}`);
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe(`Keyboard ${size.name}`);
      expect(await page.locator('#apps li.active .app-open').getAttribute('aria-current')).toBe('true');

      // Back to the demo agent's name and Space opens it.
      await page.locator('#apps li.active .app-open').focus();
      await tab(3 * Math.abs(at - home), home < at);
      expect(await focused()).toEqual({ text: 'Demo Agent', row: true });
      await page.keyboard.press('Space');
      await expect.poll(active).toBe('Demo Agent');
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('Demo Agent');
      await stack.db.app.deleteMany({ where: { id: target.appId } });
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
