/**
 * One person's whole journey in a browser (issue 34 "Done when"), from the studio link `npm start` prints
 * (stack/links.ts, the same function stack/dev.ts prints with) and nothing else: open the studio, create an agent
 * (New agent), give it a prompt and the shell (runtime + shell), save and publish, create its API key and open its
 * chat page from the key's link — on a phone-sized screen — chat, see the shell call as a thought, answer an
 * ask_human form, stop a long turn; then back in the studio find that conversation in the logs (its stopped turn)
 * and open a turn in the inspector. Real Chromium, the real stack, the demo model; screenshots of each step go to
 * test-results/screenshots (CI artifacts), axe-core runs on each page.
 */
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageLinks } from '../../stack/links.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let browser: Browser;
let context: BrowserContext;
const failures: string[] = [];

describe.runIf(chromiumPath)('a journey from the printed studio link to a conversation in the logs', () => {
  beforeAll(async () => {
    // SHELLCTL_AUTH_TOKEN: the agent's shell (as npm start generates it; test stacks set their own secrets).
    stack = await startTestStack('journey', { env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token' } });
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('creates an agent with a prompt and the shell, publishes it, chats on a phone (tool, form, stop) and finds it in the logs', async () => {
    const studio = await context.newPage();
    watchPage(studio, failures, (s, url) => s === 404 && url.endsWith('/agent/build-draft'));
    await studio.goto(pageLinks(stack).studio);
    await studio.locator('#apps li.active').waitFor({ timeout: 30_000 });
    const say = () => studio.locator('#status').textContent();

    // 1. A new agent, with its first prompt.
    await studio.click('aside button.new-app');
    await expect.poll(() => studio.locator('#na-model option').count()).toBeGreaterThan(0);
    await studio.fill('#na-name', 'Trip planner');
    await studio.fill('#na-icon', '🧭');
    await studio.fill('#na-description', 'Plans trips and asks before it books.');
    await studio.fill('#na-prompt', 'You plan trips. Ask the traveller before you decide anything.');
    await studio.click('#na-form button[type="submit"]');
    await expect.poll(() => studio.locator('#apps li.active').textContent()).toBe('Trip planner');
    await expect.poll(() => studio.inputValue('#f-prompt')).toBe('You plan trips. Ask the traveller before you decide anything.');
    await screenshot(studio, 'journey-1-created.png');

    // 2. The shell (in the agent's workspace), ask_human on (the default), saved and published.
    expect(await studio.isChecked('#f-ask-human')).toBe(true);
    await studio.check('#f-runtime');
    await studio.check('#f-shell');
    await studio.click('#save');
    await expect.poll(say).toMatch(/^Saved \(DRAFT revision \d+\)\.$/);
    await studio.click('#publish');
    await expect.poll(say).toBe('Published version 2.');
    await expect.poll(() => studio.locator('#versions li.active').textContent()).toContain('v2 (active)');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-2-published.png');
    const app = await stack.db.app.findFirstOrThrow({
      where: { name: 'Trip planner' },
      include: { agent: { include: { active_config_snapshot: true } } },
    });
    expect(app.agent!.active_config_snapshot!.config_snapshot).toMatchObject({ runtime: { enabled: true }, shell: { enabled: true } });

    // 3. Its API key, and its chat page from the key's link (a new tab), on a phone-sized screen.
    await studio.click('#screens button[data-screen="keys"]');
    await studio.fill('#key-name', 'web');
    await studio.click('#key-create button[type="submit"]');
    const [chat] = await Promise.all([context.waitForEvent('page'), studio.click('#key-new a.open-chat')]);
    watchPage(chat, failures);
    await chat.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => chat.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Trip planner');
    expect(chat.url()).not.toContain('key=');
    const last = () => chat.locator('.msg.agent').last();
    const lastText = () => last().locator('.text').textContent();
    const idle = () => expect.poll(() => chat.locator('#stop').isDisabled(), { timeout: 60_000 }).toBe(true);
    const send = async (text: string) => {
      await chat.fill('#query', text);
      await chat.click('#send');
    };

    // 4. Chat: the shell runs in the agent's workspace, shown as a thought.
    await send('/sh echo packing list ready');
    await expect.poll(lastText, { timeout: 60_000 }).toContain('packing list ready');
    await idle();
    const card = last().locator('.thought.tool').first();
    expect(await card.textContent()).toContain('shell');
    await expect.poll(() => card.locator('.tool-result').textContent()).toContain('packing list ready');
    await screenshot(chat, 'journey-3-chat-tool-phone.png');

    // 5. An ask_human form, answered in the page; the agent goes on with the answer.
    await send('/ask Where do you want to go?');
    const form = chat.locator('form.form').last();
    await form.waitFor({ timeout: 30_000 });
    await screenshot(chat, 'journey-4-form-phone.png');
    await form.locator('textarea[name="answer"]').fill('Lisbon');
    await form.locator('button[value="submit"]').click();
    await expect.poll(lastText, { timeout: 30_000 }).toContain('You answered: "Lisbon"');
    await idle();
    // The question's card says it was answered.
    expect(await chat.locator('.thought.tool .tool-state').allTextContents()).not.toContain('waiting for your answer');

    // 6. A long answer, stopped while it streams.
    await send('/slow 60 /long 400');
    await expect.poll(async () => ((await lastText()) ?? '').split(/\s+/).filter(Boolean).length, { timeout: 30_000 }).toBeGreaterThan(5);
    await chat.click('#stop');
    await expect.poll(() => last().getAttribute('class'), { timeout: 30_000 }).toContain('stopped');
    await idle();
    expect(((await lastText()) ?? '').split(/\s+/).filter(Boolean).length).toBeLessThan(400);
    expect(await axeViolations(chat)).toEqual([]);
    await screenshot(chat, 'journey-5-stopped-phone.png');

    // 7. Back in the studio: the logs list the conversation (an end user's, with the stopped turn) and the inspector opens a turn.
    await studio.bringToFront();
    await studio.click('#screens button[data-screen="agent"]');
    await studio.selectOption('#log-status', 'stopped');
    const rows = studio.locator('#log-table tbody tr');
    // The stop lands in the database as the turn's workflow ends: filter again until the list has it.
    await expect
      .poll(
        async () => {
          await studio.click('#log-filters button[type="submit"]');
          await studio.waitForTimeout(300);
          return rows.allTextContents();
        },
        { timeout: 30_000 },
      )
      .toEqual([expect.stringContaining('/sh echo packing list ready')]);
    await rows.first().locator('button.link').click();
    const detail = studio.locator('#log-messages');
    await expect.poll(() => detail.locator('.msg.agent').count()).toBe(4);
    expect(await detail.textContent()).toContain('You answered: "Lisbon"');
    expect(await detail.locator('.msg.agent.stopped').count()).toBe(1);
    await detail.locator('.msg.agent').first().locator('button.inspect').click();
    await expect.poll(() => studio.locator('#inspector').isVisible()).toBe(true);
    await expect.poll(() => studio.locator('#timeline').textContent()).toContain('shell');
    expect(await studio.locator('#run-facts').textContent()).toContain('succeeded');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-6-logs.png');

    // The database agrees: one conversation of the new app, from the chat page's end user, its last turn stopped.
    const convs = await stack.db.conversation.findMany({
      where: { app_id: app.id },
      include: { messages: { orderBy: { created_at: 'asc' } } },
    });
    expect(convs).toHaveLength(1);
    expect(convs[0]!.messages.map((m) => m.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'stopped']);
    expect(failures).toEqual([]);
  }, 240_000);
});
