/**
 * The multitask strategies in the pages (issue 35 item 1): real Chromium against the real stack and the demo model
 * (its `/slow <ms> /long <n>` keeps a turn running), at a desktop and a phone size. The studio's picker saves the app's
 * default over console multitask-settings and shows it again after a reload. The chat page reads it from
 * GET /v1/parameters and, unless `reject`, keeps the composer usable while a turn runs, sending `multitask_strategy`
 * explicitly: `enqueue` shows the follow-up as queued and streams it once the first answer ended (both complete);
 * `interrupt` marks the running answer stopped (its part so far kept) and streams the new one; `rollback` takes the
 * running exchange out of the view and the history, and the new answer does not remember it. Two tabs queueing the same
 * text each know their own message (its stream's `message_queued`): a box's Stop stops that one. axe-core finds no serious
 * violation; screenshots go to test-results/screenshots (CI artifacts).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let browser: Browser;
const failures: string[] = [];

const consoleApi = (method: string, body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/multitask-settings`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as { default_strategy: string; queue_limit: number } }));

const history = async (p: Page) => {
  const user = await p.evaluate(() => localStorage.getItem('agent-chat-user')!);
  const conv = await p.locator('#conversations li.active').getAttribute('data-id');
  const res = await fetch(`${stack.apiUrl}/v1/messages?conversation_id=${conv}&user=${user}&limit=100`, {
    headers: { authorization: `Bearer ${stack.demo!.apiKey}` },
  });
  return ((await res.json()) as { data: { query: string; answer: string; turn_status: string }[] }).data;
};

/** The chat page on a fresh conversation, with the app's strategy set first (the page reads it when it loads). */
async function chatWith(context: BrowserContext, strategy: string): Promise<Page> {
  expect((await consoleApi('PUT', { default_strategy: strategy })).status).toBe(200);
  const p = await context.newPage();
  watchPage(p, failures);
  await p.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
  await expect.poll(() => p.evaluate(() => document.body.classList.contains('multitask')), { timeout: 20_000 }).toBe(true);
  return p;
}

const agentText = (p: Page, i: number) => p.locator('.msg.agent .text').nth(i);
const words = async (p: Page, i: number) => ((await agentText(p, i).textContent()) ?? '').split(/\s+/).filter(Boolean).length;
/** Nothing runs nor waits: no pending or queued answer, Stop gone. */
async function settled(p: Page) {
  await expect.poll(() => p.locator('.msg.pending, .msg.queued').count(), { timeout: 60_000 }).toBe(0);
  await expect.poll(() => p.locator('#stop').isVisible()).toBe(false);
}

async function send(p: Page, text: string) {
  await p.fill('#query', text);
  await p.click('#send');
}

/** Sends a long slow turn and waits until it streams (its first words). */
async function startLongTurn(p: Page, query: string) {
  await send(p, query);
  await expect.poll(() => p.locator('.msg.agent .text').last().textContent(), { timeout: 30_000 }).toContain('alpha bravo');
}

describe.runIf(chromiumPath)('multitask strategies in the studio and the chat page', () => {
  beforeAll(async () => {
    stack = await startTestStack('multitask_pages', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('studio: picks the app’s strategy (each explained in a line), saves it and shows it again, on a desktop and a phone', async () => {
    const desktop = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await desktop.newPage();
    watchPage(page, failures, (s, url) => s === 404 && url.endsWith('/agent/build-draft'));
    await page.goto(`${stack.apiUrl}/studio/#key=${stack.demo!.consoleKey}`);
    await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
    const section = page.locator('#multitask');
    await section.waitFor({ state: 'visible' });
    // The app's default as the API has it: reject (Dify's).
    await expect.poll(() => page.locator('input[name="mt-strategy"]:checked').getAttribute('value')).toBe('reject');
    expect(await page.locator('#mt-current').textContent()).toContain('Reject');
    const lines = await section.locator('label.choice').allTextContents();
    expect(lines).toHaveLength(4);
    for (const l of lines) expect(l.trim().split(/\s+/).length).toBeGreaterThan(6);

    await page.check('input[name="mt-strategy"][value="interrupt"]');
    const put = page.waitForRequest((r) => r.url().endsWith('/multitask-settings') && r.method() === 'PUT');
    await page.click('#mt-save');
    expect((await put).postDataJSON()).toEqual({ default_strategy: 'interrupt' });
    await expect.poll(() => page.locator('#status').textContent()).toContain('Interrupt');
    expect(await page.locator('#mt-current').textContent()).toContain('Interrupt');
    expect((await consoleApi('GET')).body.default_strategy).toBe('interrupt');
    expect((await stack.db.app.findUniqueOrThrow({ where: { id: stack.demo!.appId } })).multitask_strategy).toBe('interrupt');
    expect(await axeViolations(page)).toEqual([]);
    await section.scrollIntoViewIfNeeded();
    await screenshot(page, 'studio-multitask-desktop.png');

    // Shown again after a reload, and on a phone.
    await page.reload();
    await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
    await expect.poll(() => page.locator('input[name="mt-strategy"]:checked').getAttribute('value')).toBe('interrupt');
    await desktop.close();
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    const p = await phone.newPage();
    watchPage(p, failures, (s, url) => s === 404 && url.endsWith('/agent/build-draft'));
    await p.goto(`${stack.apiUrl}/studio/#key=${stack.demo!.consoleKey}`);
    await p.locator('#apps li.active').waitFor({ timeout: 30_000 });
    await expect.poll(() => p.locator('input[name="mt-strategy"]:checked').getAttribute('value')).toBe('interrupt');
    await p.tap('input[name="mt-strategy"][value="enqueue"]');
    await p.tap('#mt-save');
    await expect.poll(() => p.locator('#mt-current').textContent()).toContain('Queue');
    expect((await consoleApi('GET')).body.default_strategy).toBe('enqueue');
    const box = (await p.locator('#multitask').boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(await axeViolations(p)).toEqual([]);
    await p.locator('#multitask').scrollIntoViewIfNeeded();
    await screenshot(p, 'studio-multitask-phone.png', false);
    await phone.close();
    expect(failures).toEqual([]);
  }, 120_000);

  it('chat, enqueue: the follow-up shows as queued while the first answer streams, then streams itself; both complete', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const p = await chatWith(context, 'enqueue');
    await startLongTurn(p, '/slow 120 /long 60');
    // The composer stays usable while the turn runs: Send and Stop both there.
    expect(await p.locator('#send').isEnabled()).toBe(true);
    expect(await p.locator('#stop').isVisible()).toBe(true);
    expect(await p.getAttribute('#query', 'placeholder')).toContain('Queue');
    const post = p.waitForRequest((r) => r.url().endsWith('/v1/chat-messages') && r.method() === 'POST');
    await send(p, 'And a second question');
    expect((await post).postDataJSON()).toMatchObject({ query: 'And a second question', multitask_strategy: 'enqueue' });
    const second = p.locator('.msg.agent').nth(1);
    expect(await second.getAttribute('class')).toContain('queued');
    expect(await second.locator('.queued-note').textContent()).toContain('Queued');
    // The API lists it queued behind the running turn.
    await expect.poll(async () => (await history(p)).map((m) => m.turn_status)).toEqual(['running', 'queued']);
    expect(await p.locator('.msg.agent').first().getAttribute('class')).not.toContain('stopped');
    expect(await axeViolations(p)).toEqual([]);
    await screenshot(p, 'chat-multitask-queued-desktop.png');

    await expect.poll(() => agentText(p, 1).textContent(), { timeout: 60_000 }).toContain('You said: "And a second question"');
    await settled(p);
    expect(await words(p, 0)).toBe(60);
    expect(await second.locator('.queued-note').count()).toBe(0);
    const h = await history(p);
    expect(h.map((m) => [m.query, m.turn_status])).toEqual([
      ['/slow 120 /long 60', 'succeeded'],
      ['And a second question', 'succeeded'],
    ]);
    expect(failures).toEqual([]);
    await context.close();
  }, 120_000);

  it('chat, interrupt: the running answer is marked stopped with its part kept, and the new message is answered', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const p = await chatWith(context, 'interrupt');
    await startLongTurn(p, '/slow 150 /long 300');
    const post = p.waitForRequest((r) => r.url().endsWith('/v1/chat-messages') && r.method() === 'POST');
    await send(p, 'Never mind that');
    expect((await post).postDataJSON()).toMatchObject({ query: 'Never mind that', multitask_strategy: 'interrupt' });
    expect(await p.locator('.msg.agent').first().getAttribute('class')).toContain('stopped');
    await expect.poll(() => agentText(p, 1).textContent(), { timeout: 60_000 }).toContain('You said: "Never mind that"');
    await settled(p);
    const kept = await words(p, 0);
    expect(kept).toBeGreaterThan(1);
    expect(kept).toBeLessThan(300);
    expect(await p.locator('.msg.user .text').allTextContents()).toEqual(['/slow 150 /long 300', 'Never mind that']);
    const h = await history(p);
    expect(h.map((m) => m.turn_status)).toEqual(['stopped', 'succeeded']);
    expect(h[0]!.answer.split(/\s+/).filter(Boolean).length).toBeGreaterThan(1);
    expect(await axeViolations(p)).toEqual([]);
    await screenshot(p, 'chat-multitask-interrupt-desktop.png');
    expect(failures).toEqual([]);
    await context.close();
  }, 120_000);

  it('chat, rollback: the running exchange leaves the view and the history; the new answer does not remember it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const p = await chatWith(context, 'rollback');
    await startLongTurn(p, '/slow 150 /long 300');
    await expect.poll(() => p.locator('#conversations li.active').count()).toBe(1);
    await send(p, 'Instead, this');
    expect(await p.locator('.msg.user .text').allTextContents()).toEqual(['Instead, this']);
    await expect.poll(() => agentText(p, 0).textContent(), { timeout: 60_000 }).toContain('You said: "Instead, this"');
    await settled(p);
    expect(await agentText(p, 0).textContent()).toContain('This is the first message I remember');
    expect(await p.locator('.msg.agent').count()).toBe(1);
    expect((await history(p)).map((m) => m.query)).toEqual(['Instead, this']);
    expect(failures).toEqual([]);
    await context.close();
  }, 120_000);

  it('chat, enqueue in two tabs: the same text queued from each, a box knows its own message (message_queued) and its Stop stops that one', async () => {
    // One browser context: both tabs are the same end user (localStorage) on the same conversation.
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const one = await chatWith(context, 'enqueue');
    await startLongTurn(one, '/slow 100 /long 600');
    await expect.poll(() => one.locator('#conversations li.active').count()).toBe(1);
    const conversationId = (await one.locator('#conversations li.active').getAttribute('data-id'))!;
    // The second tab opens the conversation while the turn runs (it re-attaches to it) before anything is queued.
    const two = await context.newPage();
    watchPage(two, failures);
    await two.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
    await two.locator(`#conversations li[data-id="${conversationId}"] button.open`).click();
    await expect.poll(() => two.locator('#stop').isEnabled(), { timeout: 20_000 }).toBe(true);
    await expect.poll(() => two.evaluate(() => document.body.classList.contains('multitask'))).toBe(true);

    // The same text from each tab, one after the other: two queued messages the text cannot tell apart.
    await send(one, 'Same text');
    const mine = one.locator('.msg.agent.queued');
    await expect.poll(() => mine.getAttribute('data-message-id'), { timeout: 20_000 }).toMatch(/^[0-9a-f-]{36}$/);
    await send(two, 'Same text');
    const theirs = two.locator('.msg.agent.queued').last();
    await expect.poll(() => theirs.getAttribute('data-message-id'), { timeout: 20_000 }).toMatch(/^[0-9a-f-]{36}$/);
    const rows = await stack.db.message.findMany({
      where: { conversation_id: conversationId, query: 'Same text' },
      orderBy: { created_at: 'asc' },
    });
    expect(rows.map((m) => m.status)).toEqual(['queued', 'queued']);
    const [first, second] = rows as [(typeof rows)[0], (typeof rows)[0]];
    // Each box holds the id of the message its own tab sent, and its place in line.
    expect(await mine.getAttribute('data-message-id')).toBe(first.id);
    expect(await theirs.getAttribute('data-message-id')).toBe(second.id);
    await expect.poll(() => mine.locator('.queue-place').textContent()).toBe('Queued: next in line.');
    await expect.poll(() => theirs.locator('.queue-place').textContent()).toBe('Queued: 2nd in line.');
    await screenshot(two, 'chat-multitask-two-tabs-desktop.png');

    // The second tab's Stop stops its own message; the first tab's still waits and runs after the long turn.
    await theirs.locator('button.stop-queued').click();
    await expect
      .poll(async () => (await stack.db.message.findUniqueOrThrow({ where: { id: second.id } })).status, { timeout: 20_000 })
      .toBe('stopped');
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: first.id } })).status).toBe('queued');
    expect(await stack.db.agentBackendRun.count({ where: { message_id: second.id } })).toBe(0);
    await expect.poll(() => mine.locator('.queue-place').textContent()).toBe('Queued: next in line.');
    await one.click('#stop');
    const answered = one.locator(`.msg.agent[data-message-id="${first.id}"] .text`);
    await expect.poll(() => answered.textContent(), { timeout: 60_000 }).toContain('You said: "Same text"');
    await settled(one);
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: first.id } })).status).toBe('succeeded');
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: second.id } })).status).toBe('stopped');
    expect(failures).toEqual([]);
    await context.close();
  }, 120_000);

  it('chat on a phone, enqueue: Send and Stop fit beside the message box while a follow-up waits; no serious axe violation', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    const p = await chatWith(phone, 'enqueue');
    await startLongTurn(p, '/slow 120 /long 60');
    await send(p, 'Next one');
    await expect.poll(() => p.locator('.msg.agent.queued').count()).toBe(1);
    expect(await p.locator('#send').isVisible()).toBe(true);
    expect(await p.locator('#stop').isVisible()).toBe(true);
    expect(await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
    expect(await axeViolations(p)).toEqual([]);
    await screenshot(p, 'chat-multitask-queued-phone.png', false);
    await expect.poll(() => agentText(p, 1).textContent(), { timeout: 60_000 }).toContain('You said: "Next one"');
    await settled(p);
    expect(failures).toEqual([]);
    await phone.close();
  }, 120_000);
});
