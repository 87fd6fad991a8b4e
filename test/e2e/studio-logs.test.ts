/**
 * The studio's logs & annotations (issue 34 item 4) in headless Chromium against the real stack: every conversation
 * of the app — two end users' and the debugger's — filtered by user, status, feedback, source and date; one opened
 * with its turns, a turn opened in the turn inspector, an answer turned into an annotation that then answers a
 * similar question. The console routes behind it (GET agent/conversations, agent/conversations/{id}/messages) are
 * checked directly too, another tenant's key reading nothing. Needs Chromium like test/e2e/chat-page.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { screenshotDir } from '../support/artifacts.js';

const executable = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p) => p && fs.existsSync(p),
);
if (!executable) {
  if (process.env.CI) throw new Error('Chromium is required in CI: apt-get install -y chromium (see .ci/run)');
  console.warn('[e2e] Chromium not found: install it (apt-get install chromium) or set CHROMIUM_PATH to run the browser test.');
}
const AXE = fs.readFileSync(path.join(import.meta.dirname, '../../node_modules/axe-core/axe.min.js'), 'utf8');

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

async function shot(name: string) {
  const file = path.join(inject('testDataDir'), name);
  await page.screenshot({ path: file, fullPage: true });
  fs.mkdirSync(screenshotDir(), { recursive: true });
  fs.copyFileSync(file, path.join(screenshotDir(), name));
}

describe.runIf(executable)('the studio logs in a browser', () => {
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

    browser = await chromium.launch({
      executablePath: executable,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) failures.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
    page.on('response', (r) => {
      if (r.status() >= 400 && !(r.status() === 404 && r.url().endsWith('/agent/build-draft'))) failures.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${stack.apiUrl}/studio/#key=${stack.demo!.consoleKey}`);
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

    await page.evaluate(AXE);
    const serious = await page.evaluate(async () => {
      const axe = (
        window as unknown as {
          axe: {
            run: (c: unknown, o: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }>;
          };
        }
      ).axe;
      const r = await axe.run(document.getElementById('logs'), { resultTypes: ['violations'] });
      return r.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    });
    expect(serious).toEqual([]);
    expect(failures).toEqual([]);
  }, 120_000);
});
