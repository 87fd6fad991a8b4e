/**
 * The studio's logs & annotations (issue 34 item 4) in headless Chromium against the real stack: every conversation
 * of the app — two end users' and the debugger's — filtered by user, status, feedback, source and date; one opened
 * with its turns, a turn opened in the turn inspector, an answer turned into an annotation that then answers a
 * similar question. The console routes behind it (GET agent/conversations, agent/conversations/{id}/messages) are
 * checked directly too, another tenant's key reading nothing. Needs Chromium like test/e2e/chat-page.test.ts.
 */
import { type Browser, type Page } from 'playwright-core';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { openStudio, studioScreen } from '../support/studio-page.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let browser: Browser;
let page: Page;
const failures: string[] = [];
let aliceMessage = '';

const consoleFetch = (p: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
const logs = async (q = '') =>
  (await (await consoleFetch(`/agent/conversations${q}`)).json()) as { total: number; data: Record<string, unknown>[] };

const shot = (name: string) => screenshot(page, name);

describe.runIf(chromiumPath)('the studio logs in a browser', () => {
  beforeAll(async () => {
    stack = await startTestStack('studio_logs');
    const key = stack.demo!.apiKey;
    const alice = await chat(stack.apiUrl, key, { query: 'What are your opening hours?', user: 'alice' });
    aliceMessage = alice.frames.at(-1)!.data.message_id as string;
    await fetch(`${stack.apiUrl}/v1/messages/${aliceMessage}/feedbacks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ rating: 'like', user: 'alice' }),
    });
    const bob = await chat(stack.apiUrl, key, { query: '/fail InvokeBadRequestError', user: 'bob' });
    expect(bob.frames.at(-1)!.event).toBe('error');
    const debug = await consoleFetch('/agent/debug/chat-messages', { method: 'POST', body: { query: 'Debugging the agent', inputs: {} } });
    expect(debug.status).toBe(200);
    await readFrames(debug);

    ({ browser, page } = await openStudio(stack, failures, { viewport: { width: 1280, height: 1000 } }));
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('the console routes list every conversation with its filters, and refuse a key that is not the console key', async () => {
    const all = await logs();
    expect(all.total).toBe(3);
    expect((await logs('?user=alice')).data.map((c) => c.first_query)).toEqual(['What are your opening hours?']);
    expect((await logs('?status=failed')).data.map((c) => c.from_end_user_session_id)).toEqual(['bob']);
    expect((await logs('?feedback=like')).data.map((c) => c.like_count)).toEqual([1]);
    expect((await logs('?invoke_from=debugger')).data.map((c) => c.first_query)).toEqual(['Debugging the agent']);
    expect((await logs(`?to=${encodeURIComponent(new Date(Date.now() - 86_400_000).toISOString())}`)).total).toBe(0);
    expect((await consoleFetch('/agent/conversations?status=bogus')).status).toBe(400);
    const other = await fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/agent/conversations`, {
      headers: { authorization: 'Bearer console-not-a-key' },
    });
    expect(other.status).toBe(401);
  });

  it('filters the logs, opens a conversation and a turn in the inspector, and turns an answer into an annotation', async () => {
    // The logs are a screen of their own (issue 42 problem 1).
    await studioScreen(page, 'logs');
    const rows = page.locator('#log-table tbody tr');
    await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(3);
    await shot('studio-logs.png');
    await page.fill('#log-user', 'bob');
    await page.click('#log-filters button[type="submit"]');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('failed');
    await page.fill('#log-user', '');
    await page.selectOption('#log-feedback', 'like');
    await page.click('#log-filters button[type="submit"]');
    await expect.poll(() => rows.allTextContents()).toEqual([expect.stringContaining('alice')]);

    await rows.first().locator('button.link').click();
    const detail = page.locator('#log-messages');
    await expect.poll(() => detail.locator('.msg.agent .text').textContent()).toContain('What are your opening hours?');
    expect(await detail.locator('.badge.like').count()).toBe(1);
    await detail.locator('button.inspect').click();
    await expect.poll(() => page.locator('#inspector').isVisible()).toBe(true);
    await expect.poll(() => page.locator('#run-facts').textContent()).toContain(aliceMessage);

    await detail.locator('button.annotate').click();
    await expect.poll(() => detail.locator('button.annotate').textContent()).toBe('Annotated');
    const anns = (await (await consoleFetch('/annotations?limit=100')).json()) as { data: { question: string; content: string }[] };
    expect(anns.data).toEqual([expect.objectContaining({ question: 'What are your opening hours?' })]);
    await expect.poll(() => page.locator('#ann-list').textContent()).toContain('What are your opening hours?');
    await shot('studio-logs-detail.png');

    expect(await axeViolations(page, '#logs')).toEqual([]);
    expect(failures).toEqual([]);
  }, 120_000);
});
