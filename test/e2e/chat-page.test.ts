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

const executable = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => p && fs.existsSync(p));
if (!executable) {
  if (process.env.CI) throw new Error('Chromium is required in CI: apt-get install -y chromium (see .ci/run)');
  console.warn('[e2e] Chromium not found: install it (apt-get install chromium) or set CHROMIUM_PATH to run the browser test.');
}

let stack: Stack;
let browser: Browser;
let page: Page;

describe.runIf(executable)('the chat page in a browser', () => {
  beforeAll(async () => {
    stack = await startTestStack('chat_page');
    browser = await chromium.launch({
      executablePath: executable,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage();
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

    await send('My name is Ada.');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('My name is Ada.');
    await expect.poll(() => page.locator('#send').isEnabled()).toBe(true);

    await send('What did I say earlier?');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('Earlier you said: "My name is Ada."');

    await send('/calc 6*7');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('42');
    await expect.poll(() => page.locator('.msg.agent .thought').last().textContent()).toContain('calculator');

    await send('/ask What should I call you?');
    const form = page.locator('form.form').last();
    await form.waitFor({ timeout: 20_000 });
    await form.locator('textarea[name="answer"]').fill('Countess');
    await form.locator('button[value="submit"]').click();
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('You answered: "Countess"');

    // The sidebar lists the conversation under the name generated from its first message.
    await expect.poll(() => page.locator('#conversations li').first().textContent()).toContain('My name is Ada.');
    const shot = path.join(inject('testDataDir'), 'chat-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(fs.statSync(shot).size).toBeGreaterThan(1000);
    if (process.env.E2E_SCREENSHOT) fs.copyFileSync(shot, process.env.E2E_SCREENSHOT);
  });
});
