/**
 * A person chatting in the browser: headless Chromium on the chat page served by the api, against the
 * real stack. Multi-turn memory, a tool call shown as a thought, and an ask_human form answered in the page.
 * Needs Chromium (`apt-get install chromium`, or CHROMIUM_PATH); CI installs it, elsewhere the test says
 * how and is skipped.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';
import { screenshotDir } from '../support/artifacts.js';

const executable = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p) => p && fs.existsSync(p),
);
if (!executable) {
  if (process.env.CI) throw new Error('Chromium is required in CI: apt-get install -y chromium (see .ci/run)');
  console.warn('[e2e] Chromium not found: install it (apt-get install chromium) or set CHROMIUM_PATH to run the browser test.');
}

let stack: Stack;
let browser: Browser;
let page: Page;
/** Every response the page got with a 4xx/5xx status (the favicon, a missing script, a failed call). */
const failures: string[] = [];

describe.runIf(executable)('the chat page in a browser', () => {
  beforeAll(async () => {
    stack = await startTestStack('chat_page');
    browser = await chromium.launch({
      executablePath: executable,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = await browser.newPage();
    page.on('response', (r) => {
      if (r.status() >= 400) failures.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const lastAgentText = () => page.locator('.msg.agent .text').last();

  async function send(text: string) {
    await page.fill('#query', text);
    await page.click('#send');
  }

  it('chats, remembers the conversation, shows a tool call as a thought, and answers an ask_human form', async () => {
    // The key moved from the URL fragment to session storage; the fragment is gone.
    expect(page.url()).not.toContain('key=');
    // The first screen introduces the app (GET /v1/info, /v1/parameters): name, opening statement, suggestions.
    await expect.poll(() => page.locator('#app-name').textContent()).toBe('Demo Agent');
    await expect.poll(() => page.locator('.welcome .opening').textContent()).toContain('I am the demo agent');
    expect(await page.locator('.welcome .suggested').allTextContents()).toContain('/calc 6*7');

    await send('My name is Ada.');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('My name is Ada.');
    await expect.poll(() => page.locator('#send').isEnabled()).toBe(true);

    await send('What did I say earlier?');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('Earlier you said: "My name is Ada."');

    await send('/calc 6*7');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('42');
    await expect.poll(() => page.locator('.msg.agent .thought').last().textContent()).toContain('calculator');
    // The tool card is readable: the arguments as name/value rows and the result, not raw JSON.
    const card = page.locator('.msg.agent .thought.tool').last();
    await expect.poll(() => card.locator('.tool-result').textContent()).toContain('42');
    expect(await card.locator('.kv dd').allTextContents()).toContain('6*7');
    expect(await card.textContent()).not.toContain('{"');

    await send('/ask What should I call you?');
    const form = page.locator('form.form').last();
    await form.waitFor({ timeout: 20_000 });
    await form.locator('textarea[name="answer"]').fill('Countess');
    await form.locator('button[value="submit"]').click();
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('You answered: "Countess"');

    // The sidebar lists the conversation under the name generated from its first message.
    await expect.poll(() => page.locator('#conversations li').first().textContent()).toContain('My name is Ada.');

    // After a reload the history shows the /ask question once (the continuation carries the same query).
    await page.reload();
    await page.locator('#conversations li').first().click();
    await expect
      .poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 })
      .toContain('You answered: "Countess"');
    const userTexts = await page.locator('.msg.user .text').allTextContents();
    expect(userTexts.filter((t) => t === '/ask What should I call you?')).toHaveLength(1);
    expect(userTexts).toHaveLength(4);
    // The question's card says it was answered, and the continuation shows the answer given.
    expect(await page.locator('.thought.tool .tool-state').allTextContents()).not.toContain('waiting for your answer');
    expect(await page.locator('.thought.tool .kv dd').allTextContents()).toContain('Countess');
    expect(failures).toEqual([]);
    const shot = path.join(inject('testDataDir'), 'chat-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(fs.statSync(shot).size).toBeGreaterThan(1000);
    // Kept beyond the run as the run's artifact (test-results/screenshots, git-ignored); E2E_SCREENSHOT: also there.
    fs.mkdirSync(screenshotDir(), { recursive: true });
    fs.copyFileSync(shot, path.join(screenshotDir(), 'chat-page.png'));
    if (process.env.E2E_SCREENSHOT) fs.copyFileSync(shot, process.env.E2E_SCREENSHOT);
  });
});
