/**
 * Issue 42's suggested questions after an answer in the browser, at a desktop's size (1366x900) and a phone's
 * (390x844), each with an axe-core scan and a screenshot (test-results/screenshots): the studio's agent form switches
 * `features.suggested_questions_after_answer` (filled from the draft, saved, published: GET /v1/parameters says so);
 * on the chat page the latest finished answer carries three question buttons (GET /v1/messages/{id}/suggested, the
 * demo model's deterministic ones), a keyboard Enter on one sends it as the next message, the old ones go and the new
 * answer gets its own; a reload shows them again from the api's per-message store (still one ledger row a message).
 * The studio's debugger does the same on the draft it runs (the console's …/debug/messages/{id}/suggested-questions).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { consoleClient } from '../support/console-api.js';
import { startTestStack } from '../support/stack.js';
import { openStudio } from '../support/studio-page.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;
type Size = (typeof SIZES)[number];

let stack: Stack;
let browser: Browser;
const consoleApi = consoleClient(() => stack);

const ledgerRows = (messageId: string) =>
  stack.db.creditLedger.count({ where: { billing_request_id: `suggested-questions-${messageId}:0` } });

async function publishWithFollowUps(): Promise<void> {
  const soul = demoSoulConfig();
  soul.features.suggested_questions_after_answer = { enabled: true };
  expect((await consoleApi('PUT', `/apps/${stack.demo!.appId}/agent/draft`, { config: soul })).status).toBe(200);
  expect((await consoleApi('POST', `/apps/${stack.demo!.appId}/agent/publish`, { from: 'draft' })).status).toBe(201);
}

async function openChat(size: Size, failures: string[]): Promise<{ ctx: BrowserContext; page: Page }> {
  const ctx = await browser.newContext({
    viewport: size.viewport,
    ...(size.phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
  });
  const page = await ctx.newPage();
  watchPage(page, failures);
  await page.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
  await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
  return { ctx, page };
}

describe.runIf(chromiumPath)('issue 42: suggested questions after an answer', () => {
  beforeAll(async () => {
    stack = await startTestStack('chat_suggested', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
    browser = await launchChromium();
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`the studio's agent form switches them, as the draft says (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      try {
        const page = s.page;
        const flag = async () =>
          (
            (await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } }))
              .config as { features: { suggested_questions_after_answer?: { enabled: boolean } } }
          ).features.suggested_questions_after_answer?.enabled ?? false;
        const was = await flag();
        await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
        expect(await page.isChecked('#f-follow-ups')).toBe(was);
        await page.setChecked('#f-follow-ups', !was);
        await page.click('#save');
        await expect.poll(() => page.locator('#status').textContent()).toContain('Saved (DRAFT revision');
        expect(await flag()).toBe(!was);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-suggested-studio-${size.name}.png`, false);
        await page.click('#publish');
        await expect.poll(() => page.locator('#status').textContent()).toMatch(/^Published version \d+\.$/);
        const params = await fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${stack.demo!.apiKey}` } });
        expect(((await params.json()) as { suggested_questions_after_answer: unknown }).suggested_questions_after_answer).toEqual({
          enabled: !was,
        });
        expect(failures).toEqual([]);
      } finally {
        await s.browser.close();
      }
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`the studio's debugger shows them under its latest answer, from the draft it runs (${size.name})`, async () => {
      const soul = demoSoulConfig();
      soul.features.suggested_questions_after_answer = { enabled: true };
      expect((await consoleApi('PUT', `/apps/${stack.demo!.appId}/agent/draft`, { config: soul })).status).toBe(200);
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      try {
        const page = s.page;
        await expect.poll(() => page.isChecked('#f-follow-ups')).toBe(true);
        await page.waitForLoadState('networkidle');
        await page.click('#new-debug');
        const query = `Debug me on a ${size.name}`;
        await page.fill('#query', query);
        await page.click('#send');
        const agents = page.locator('#messages .msg.agent');
        await expect
          .poll(() => agents.last().getByRole('group', { name: 'Suggested questions' }).getByRole('button').allTextContents(), {
            timeout: 30_000,
          })
          .toEqual([`Tell me more about: ${query}`, 'Can you give an example?', 'What should I ask next?']);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-suggested-debugger-${size.name}.png`, false);
        await agents.last().getByRole('button', { name: 'What should I ask next?' }).focus();
        await page.keyboard.press('Enter');
        await expect
          .poll(() => agents.last().locator('.follow-up').allTextContents(), { timeout: 30_000 })
          .toEqual(['Tell me more about: What should I ask next?', 'Can you give an example?', 'What should I ask next?']);
        expect(await page.locator('#messages .follow-ups').count()).toBe(1);
        expect(await agents.count()).toBe(2);
        expect(failures).toEqual([]);
      } finally {
        await s.browser.close();
      }
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`shows three question buttons under the latest answer; Enter on one sends it (${size.name})`, async () => {
      await publishWithFollowUps();
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        const query = `Plan my trip on a ${size.name}`;
        await page.fill('#query', query);
        await page.click('#send');
        const group = page.getByRole('group', { name: 'Suggested questions' });
        await expect
          .poll(() => group.getByRole('button').allTextContents(), { timeout: 20_000 })
          .toEqual([`Tell me more about: ${query}`, 'Can you give an example?', 'What should I ask next?']);
        // Under the answer they follow, the only set on the page.
        expect(await page.locator('.msg.agent').last().locator('.follow-ups .follow-up').count()).toBe(3);
        expect(await page.locator('.follow-ups').count()).toBe(1);
        const firstId = await page.locator('.msg.agent').last().getAttribute('data-message-id');
        expect(await ledgerRows(firstId!)).toBe(1);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-suggested-${size.name}.png`, false);

        // The keyboard: focus the second, Enter sends it as the user's next message.
        await group.getByRole('button', { name: 'Can you give an example?' }).focus();
        await page.keyboard.press('Enter');
        await expect.poll(() => page.locator('.msg.user').last().textContent(), { timeout: 20_000 }).toContain('Can you give an example?');
        await expect
          .poll(() => page.locator('.msg.agent').last().locator('.text').textContent(), { timeout: 20_000 })
          .toContain('You said: "Can you give an example?"');
        // The old answer's buttons went; the new answer has its own.
        await expect
          .poll(() => page.locator('.msg.agent').last().locator('.follow-up').allTextContents(), { timeout: 20_000 })
          .toEqual(['Tell me more about: Can you give an example?', 'Can you give an example?', 'What should I ask next?']);
        expect(await page.locator('.follow-ups').count()).toBe(1);
        const secondId = await page.locator('.msg.agent').last().getAttribute('data-message-id');
        expect(secondId).not.toBe(firstId);

        // A reload shows the latest answer's questions again, from the api's store: no second model call is billed.
        await page.reload();
        await expect.poll(() => page.locator('.msg.agent').last().locator('.follow-up').count(), { timeout: 20_000 }).toBe(3);
        expect(await page.locator('.follow-ups').count()).toBe(1);
        expect(await ledgerRows(secondId!)).toBe(1);
        expect(await ledgerRows(firstId!)).toBe(1);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }
});
