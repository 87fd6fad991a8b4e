/**
 * Issue 42's chat-page problems, each at a desktop's size (1366x900) and a phone's (390x844), with an axe-core scan and
 * a screenshot (test-results/screenshots): a reload mid-turn re-attaches to the running turn and the conversation
 * list marks the conversation that is running (problem 2); a revoked or wrong key is a full-page error that says what
 * to do, and a new #key= pasted into the tab takes effect without a reload (problem 7); an ask_human question shows
 * once and typing while its form is open adds no error (problem 8); code blocks are highlighted by highlight.js,
 * loaded from this origin only when an answer has a code block (problem 5). The smaller items: a conversation is
 * named after what its first message says, without a leading slash command or Markdown; an uploaded image shows in
 * the sent message at once; the sibling arrows and a queued message's Stop are targets a finger can hit.
 */
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;
type Size = (typeof SIZES)[number];

/** A 1x1 PNG. */
const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

let stack: Stack;
let browser: Browser;

const consoleApi = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** A fresh browser context of `size` for a user of its own, and a page on the chat with `key` (the demo app's by default). */
async function openChat(
  size: Size,
  failures: string[],
  opts: { key?: string; expected?: (status: number, url: string) => boolean } = {},
): Promise<{ ctx: BrowserContext; page: Page }> {
  const ctx = await browser.newContext({
    viewport: size.viewport,
    ...(size.phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
  });
  const page = await ctx.newPage();
  watchPage(page, failures, opts.expected);
  await page.goto(`${stack.apiUrl}/chat/#key=${opts.key ?? stack.demo!.apiKey}`);
  return { ctx, page };
}

async function send(page: Page, text: string) {
  await page.fill('#query', text);
  await page.click('#send');
}

/** On a phone the conversations are in a drawer: open it to read or click them. */
async function showConversations(page: Page, size: Size) {
  if (size.phone && !(await page.evaluate(() => document.body.classList.contains('drawer-open')))) await page.click('#menu');
}

describe.runIf(chromiumPath)('issue 42: the chat page', () => {
  beforeAll(async () => {
    stack = await startTestStack('chat_issue42');
    browser = await launchChromium();
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`a reload mid-turn re-attaches to the running turn, and the list marks the running conversation (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        // A turn of ~12 s: 60 words at 200 ms each.
        await send(page, '/slow 200 /long 60');
        const agent = page.locator('.msg.agent .text').last();
        await expect.poll(() => agent.textContent(), { timeout: 30_000 }).toContain('alpha');
        await expect.poll(() => page.locator('#conversations li').count(), { timeout: 20_000 }).toBe(1);
        const conversationId = (await page.locator('#conversations li').first().getAttribute('data-id'))!;

        await page.reload();
        // The running turn's conversation, not the welcome screen: its question and the answer still streaming.
        await expect.poll(() => page.locator('.msg.user .text').allTextContents(), { timeout: 20_000 }).toEqual(['/slow 200 /long 60']);
        expect(await page.locator('.welcome').count()).toBe(0);
        await expect.poll(() => page.locator('.msg.agent.pending').count(), { timeout: 20_000 }).toBe(1);
        expect(await page.locator('#stop').isEnabled()).toBe(true);
        // The list marks the conversation that is running, in words a screen reader reads too.
        const row = page.locator(`#conversations li[data-id="${conversationId}"]`);
        await expect.poll(() => row.getAttribute('class'), { timeout: 20_000 }).toContain('running');
        expect(await row.locator('.running-mark').textContent()).toBe('answering');
        await showConversations(page, size);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-reload-running-${size.name}.png`, false);
        if (size.phone) await page.keyboard.press('Escape');

        // The answer streams on to its end in the reloaded page; then the mark goes.
        await expect.poll(() => page.locator('.msg.agent.pending').count(), { timeout: 60_000 }).toBe(0);
        const stored = await stack.db.message.findFirstOrThrow({ where: { conversation_id: conversationId } });
        expect(stored.status).toBe('succeeded');
        expect((await agent.textContent())!.trim()).toBe(stored.answer.trim());
        await expect.poll(() => row.getAttribute('class'), { timeout: 20_000 }).not.toContain('running');
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 180_000);
  }

  for (const size of SIZES) {
    it(`a wrong or revoked key is a full-page error saying what to do; a new #key= takes effect without a reload (${size.name})`, async () => {
      const failures: string[] = [];
      const unauthorized = (status: number) => status === 401;
      const { ctx, page } = await openChat(size, failures, { key: 'app-not-a-key-of-this-server', expected: unauthorized });
      // The page's requests in flight, and when one last started or ended.
      const inFlight = new Set<unknown>();
      let lastNetwork = Date.now();
      const track = (add: boolean) => (r: unknown) => {
        if (add) inFlight.add(r);
        else inFlight.delete(r);
        lastNetwork = Date.now();
      };
      page.on('request', track(true));
      page.on('requestfinished', track(false));
      page.on('requestfailed', track(false));
      const quiet = () =>
        expect.poll(() => inFlight.size === 0 && Date.now() - lastNetwork > 500, { timeout: 20_000, interval: 100 }).toBe(true);
      try {
        const error = page.locator('#key-error');
        await expect.poll(() => error.isVisible(), { timeout: 20_000 }).toBe(true);
        expect(await error.getAttribute('role')).toBe('alert');
        expect(await error.locator('h1').textContent()).toBe('This chat link does not work');
        expect(await error.textContent()).toContain('revoked or mistyped');
        expect(await error.textContent()).toContain('Ask the app’s owner for a new chat link');
        // Nothing else of the chat is offered with a key that does not work.
        expect(await page.locator('#composer').isVisible()).toBe(false);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-key-error-${size.name}.png`, false);

        // A new key pasted into this tab's address bar: the page takes it at once (the same document, no reload).
        const created = (await (await consoleApi('/api-keys', 'POST', { name: `issue42-${size.name}` })).json()) as {
          id: string;
          key: string;
        };
        await page.evaluate(() => ((window as unknown as { sameDocument: boolean }).sameDocument = true));
        await page.evaluate((key) => (location.hash = `#key=${key}`), created.key);
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        expect(await error.isVisible()).toBe(false);
        expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true);
        expect(page.url()).not.toContain('key=');
        await send(page, 'hello with the new key');
        await expect
          .poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 })
          .toContain('hello with the new key');

        // The turn over and the page quiet: its own follow-ups (the conversation list reloaded when a turn ends) have
        // come back, so none of them meets the revoked key before the request this case is about. (CI of c413c5f:
        // the revoke landed before that reload, whose 401 hid the chat, and the wait for the answer's actions timed
        // out on a hidden element.)
        await page.locator('.msg.agent .actions').last().waitFor();
        await quiet();
        // The key revoked while the page is open: the next request shows the same full-page error.
        expect((await consoleApi(`/api-keys/${created.id}`, 'DELETE')).status).toBe(204);
        await send(page, 'after the revoke');
        await expect.poll(() => error.isVisible(), { timeout: 20_000 }).toBe(true);
        expect(await error.textContent()).toContain('revoked or mistyped');
        expect(await page.locator('.msg.agent.error').count()).toBe(0);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }

  it('a key revoked while an answer streams: its stream ends, and the page is the key’s full-page error, not a failed message', async () => {
    const failures: string[] = [];
    const created = (await (await consoleApi('/api-keys', 'POST', { name: 'issue47-streaming' })).json()) as { id: string; key: string };
    const { ctx, page } = await openChat(SIZES[0], failures, { key: created.key, expected: (status) => status === 401 });
    try {
      await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
      await send(page, '/slow 200 /long 60');
      const agent = page.locator('.msg.agent .text').last();
      await expect.poll(() => agent.textContent(), { timeout: 30_000 }).toContain('alpha');
      // Issue 47: the stream's last event is `error` api_key_revoked (test/security/i47-key-revocation.test.ts).
      expect((await consoleApi(`/api-keys/${created.id}`, 'DELETE')).status).toBe(204);
      const error = page.locator('#key-error');
      await expect.poll(() => error.isVisible(), { timeout: 20_000 }).toBe(true);
      expect(await error.textContent()).toContain('revoked or mistyped');
      expect(await page.locator('.msg.agent.error').count()).toBe(0);
      expect(await page.locator('.error-line').count()).toBe(0);
      expect(failures).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 120_000);

  for (const size of SIZES) {
    it(`ask_human: the question shows once, and typing while the form is open adds no error (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        const question = 'Which colour should the report use?';
        await send(page, `/ask ${question}`);
        const form = page.locator('form.form').last();
        await form.waitFor({ timeout: 20_000 });
        await page.waitForTimeout(500);
        const count = () => page.evaluate((q) => document.getElementById('messages')!.innerText.split(q).length - 1, question);
        // Once in the agent's message (the question the user sent is the user's bubble, the /ask command).
        const agentText = await page.locator('.msg.agent').last().innerText();
        expect(agentText.split(question).length - 1).toBe(1);
        expect(await count()).toBe(2);

        // Typing into the composer and pressing Enter while the form waits: the text stays, the page points at the form.
        await page.fill('#query', 'a message typed while the form is open');
        await page.press('#query', 'Enter');
        await page.waitForTimeout(500);
        expect(await page.locator('.msg.error, .error-line').count()).toBe(0);
        expect(await page.inputValue('#query')).toBe('a message typed while the form is open');
        expect(await page.locator('#status').textContent()).toBe('Answer the question above first (or start a New chat).');
        expect(await page.locator('.msg.user').count()).toBe(1);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-ask-human-${size.name}.png`, false);

        await form.locator('textarea[name="answer"]').fill('Teal');
        await form.locator('button[value="submit"]').click();
        await expect
          .poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 })
          .toContain('You answered: "Teal"');
        expect(await count()).toBe(2);
        // Then the typed message goes as usual.
        await page.click('#send');
        await expect
          .poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 })
          .toContain('a message typed while the form is open');
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`code blocks are highlighted by highlight.js, loaded from this origin only once an answer has code (${size.name})`, async () => {
      const failures: string[] = [];
      const requests: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      page.on('request', (r) => requests.push(r.url()));
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        await send(page, 'no code in this one');
        await expect.poll(() => page.locator('.msg.agent .actions').count(), { timeout: 20_000 }).toBe(1);
        const highlighter = () => requests.filter((u) => /\/highlight-[\w-]+\.js$/.test(new URL(u).pathname));
        // Not part of the page's first load: an answer without code does not fetch it.
        expect(highlighter()).toEqual([]);

        await send(
          page,
          '/echo Two blocks:\n\n```js\nconst answer = 42; // the answer\n```\n\n```python\ndef greet(name):\n    return f"hi {name}"\n```',
        );
        const text = page.locator('.msg.agent .text').last();
        await expect.poll(() => text.locator('.code-block code .hljs-keyword').first().textContent(), { timeout: 20_000 }).toBe('const');
        expect(await text.locator('.code-block code.language-js .hljs-number').textContent()).toBe('42');
        expect(await text.locator('.code-block code.language-js .hljs-comment').textContent()).toBe('// the answer');
        expect(await text.locator('.code-block code.language-python .hljs-keyword').allTextContents()).toEqual(['def', 'return']);
        // The text is the same (copy still copies the code), only coloured.
        expect(await text.locator('.code-block code.language-js').textContent()).toBe('const answer = 42; // the answer\n');
        const colour = await text.locator('.code-block code.language-js .hljs-keyword').evaluate((e) => getComputedStyle(e).color);
        const plain = await text.locator('.code-block code.language-js').evaluate((e) => getComputedStyle(e).color);
        expect(colour).not.toBe(plain);
        // One file of this origin, fetched once; nothing from anywhere else.
        expect(highlighter()).toHaveLength(1);
        expect(requests.filter((u) => !u.startsWith(stack.apiUrl))).toEqual([]);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-highlight-${size.name}.png`, false);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`an uploaded image shows in the sent message at once, not only after a reload (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        expect(await page.locator('#attach').isVisible()).toBe(true);
        await page.setInputFiles('#file', { name: 'dot.png', mimeType: 'image/png', buffer: Buffer.from(PNG_B64, 'base64') });
        await expect.poll(() => page.locator('#attachments .chip').getAttribute('class')).toBe('chip');
        await send(page, 'What is in this picture?');
        const sent = page.locator('.msg.user').last().locator('img');
        await expect.poll(() => sent.count(), { timeout: 20_000 }).toBe(1);
        await expect.poll(() => sent.evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth), { timeout: 20_000 }).toBe(1);
        expect(await sent.getAttribute('alt')).toBe('dot.png');
        await expect.poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 }).toContain('I see 1 image');
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-sent-image-${size.name}.png`, false);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }

  for (const size of SIZES) {
    it(`the sibling arrows and a queued message's Stop are targets a finger can hit (${size.name})`, async () => {
      // WCAG 2.2's target size (24 x 24 px), and 36 px on a phone.
      const least = size.phone ? 36 : 24;
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        await send(page, 'an answer to regenerate');
        await page.locator('.msg.agent .actions button.again').waitFor({ timeout: 20_000 });
        await page.locator('.msg.agent .actions button.again').click();
        const prev = page.locator('.msg.agent .sibling.prev');
        await prev.waitFor({ timeout: 20_000 });
        for (const b of [prev, page.locator('.msg.agent .sibling.next')]) {
          const box = (await b.boundingBox())!;
          expect(box.width, 'sibling arrow width').toBeGreaterThanOrEqual(least);
          expect(box.height, 'sibling arrow height').toBeGreaterThanOrEqual(least);
        }

        expect((await consoleApi('/multitask-settings', 'PUT', { default_strategy: 'enqueue' })).status).toBe(200);
        await page.reload();
        await expect.poll(() => page.evaluate(() => document.body.classList.contains('multitask')), { timeout: 20_000 }).toBe(true);
        await page.click(size.phone ? '#new-chat-top' : '#new-chat');
        await send(page, '/slow 100 /long 300');
        await expect.poll(() => page.locator('.msg.agent .text').last().textContent(), { timeout: 30_000 }).toContain('alpha');
        await send(page, 'a follow-up that waits');
        const stopQueued = page.locator('.msg.agent.queued .stop-queued');
        await stopQueued.waitFor({ timeout: 20_000 });
        const box = (await stopQueued.boundingBox())!;
        expect(box.width, 'queued Stop width').toBeGreaterThanOrEqual(least);
        expect(box.height, 'queued Stop height').toBeGreaterThanOrEqual(least);
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-targets-${size.name}.png`, false);
        await stopQueued.click();
        await page.click('#stop');
        await expect.poll(() => page.locator('.msg.pending, .msg.queued').count(), { timeout: 60_000 }).toBe(0);
        expect(failures).toEqual([]);
      } finally {
        await consoleApi('/multitask-settings', 'PUT', { default_strategy: 'reject' });
        await ctx.close();
      }
    }, 180_000);
  }

  for (const size of SIZES) {
    it(`a conversation is named after what its first message says, without the slash command or Markdown (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
        await send(page, '/echo ## Weekly **report** for `team-a`\n\nand the rest of a long message that is not part of the name');
        await expect.poll(() => page.locator('.msg.agent .actions').count(), { timeout: 20_000 }).toBe(1);
        await showConversations(page, size);
        await expect
          .poll(() => page.locator('#conversations li .open').first().textContent(), { timeout: 20_000 })
          .toBe('Weekly report for team-a');
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-names-${size.name}.png`, false);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 120_000);
  }
});
