/**
 * A person chatting in the browser: headless Chromium on the chat page served by the api, against the real stack
 * (issue 34). Multi-turn memory, a tool call shown as a thought, an ask_human form answered in the page; Markdown
 * answers rendered safely (a <script> or onerror in an answer never runs); the view follows a 1,500-token stream
 * unless the reader scrolls up; one busy state (Enter during a turn sends nothing, Stop works, New chat during a
 * stream starts a new conversation); the agent's outputs/ files as attachments that download; an upload that reaches
 * the turn (an image the model sees; a document the agent reads with its shell); feedback, copy, regenerate (sibling answers with arrows between them; from the history too, its files sent again), rename, delete; the phone layout (the conversations in a drawer); an axe-core
 * scan of each layout with no serious violation. Screenshots of each: test-results/screenshots (CI artifacts).
 * Needs Chromium (`apt-get install chromium`, or CHROMIUM_PATH); CI installs it, elsewhere the test says how and is
 * skipped.
 */
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';
import { screenshotDir } from '../support/artifacts.js';

/** A 1x1 PNG. */
const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

let stack: Stack;
let browser: Browser;
let desktop: BrowserContext;
let page: Page;
/** Every response the page got with a 4xx/5xx status, every console error and uncaught page error. */
const failures: string[] = [];

const watch = (p: Page) => watchPage(p, failures);

async function shot(p: Page, name: string, fullPage = false) {
  await screenshot(p, name, fullPage);
  // E2E_SCREENSHOT: chat-page.png also there.
  if (name === 'chat-page.png' && process.env.E2E_SCREENSHOT) fs.copyFileSync(path.join(screenshotDir(), name), process.env.E2E_SCREENSHOT);
}

const api = async (p: string, init: RequestInit = {}) => {
  const res = await fetch(`${stack.apiUrl}${p}`, {
    ...init,
    headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  return res.status === 204 ? null : ((await res.json()) as Record<string, unknown>);
};
const userOf = (p: Page) => p.evaluate(() => localStorage.getItem('agent-chat-user')!);
const conversations = async (user: string) =>
  (await api(`/v1/conversations?user=${user}&limit=100`))!.data as { id: string; name: string }[];

describe.runIf(chromiumPath)('the chat page in a browser', () => {
  beforeAll(async () => {
    // The agent's shell on (outputs/ files), as in test/workspace/output-files-turns.test.ts.
    stack = await startTestStack('chat_page', { env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token' } });
    const soul = demoSoulConfig();
    soul.runtime = { enabled: true };
    soul.shell = { enabled: true, timeout_ms: 20_000 };
    const consoleFetch = (p: string, method: string, body: unknown) =>
      fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
        method,
        headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await consoleFetch('/agent/draft', 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
    expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
    browser = await launchChromium();
    desktop = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
    await desktop.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.apiUrl });
    page = await desktop.newPage();
    watch(page);
    await page.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const lastAgent = () => page.locator('.msg.agent').last();
  const lastAgentText = () => page.locator('.msg.agent .text').last();
  const idle = () => expect.poll(() => page.locator('#stop').isDisabled(), { timeout: 60_000 }).toBe(true);

  async function send(text: string) {
    await page.fill('#query', text);
    await page.click('#send');
  }

  it('chats, remembers the conversation, shows a tool call as a thought, and answers an ask_human form', async () => {
    // The key moved from the URL fragment to session storage; the fragment is gone.
    expect(page.url()).not.toContain('key=');
    // The first screen introduces the app (GET /v1/info, /v1/parameters): name, opening statement, suggestions.
    await expect.poll(() => page.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
    await expect.poll(() => page.locator('.welcome .opening').textContent(), { timeout: 20_000 }).toContain('I am the demo agent');
    expect(await page.locator('.welcome .suggested').allTextContents()).toContain('/calc 6*7');
    await shot(page, 'chat-desktop-welcome.png');

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
    await page.locator('#conversations li .open').first().click();
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
    await shot(page, 'chat-page.png', true);
  }, 120_000);

  it('renders a Markdown answer (heading, list, code block with copy, table, safe links) and runs none of its HTML', async () => {
    await page.click('#new-chat');
    const md = [
      '/echo ## Release notes',
      '',
      '- first item',
      '- second **bold** item',
      '',
      '```js',
      'const answer = 42;',
      '```',
      '',
      '| name | value |',
      '| ---- | ----- |',
      '| alpha | 1 |',
      '| bravo | 2 |',
      '',
      'See [the docs](https://example.com/docs) and [this](javascript:window.__xss=3).',
      '',
      '<script>window.__xss = 1</script><img src=x onerror="window.__xss=2"><b onmouseover="window.__xss=4">hover</b>',
      '<iframe src="https://example.com"></iframe><style>body{display:none}</style>',
    ].join('\n');
    // Shift+Enter makes a new line in the composer; Enter sends.
    await page.fill('#query', md);
    await page.press('#query', 'Enter');
    const text = lastAgentText();
    await expect.poll(() => text.locator('h2').textContent(), { timeout: 20_000 }).toBe('Release notes');
    await idle();
    expect(await text.locator('ul > li').allTextContents()).toEqual(['first item', 'second bold item']);
    expect(await text.locator('li strong').textContent()).toBe('bold');
    expect(await text.locator('.code-block pre code').textContent()).toBe('const answer = 42;\n');
    expect(await text.locator('.code-block .code-head').textContent()).toContain('js');
    expect(await text.locator('table th').allTextContents()).toEqual(['name', 'value']);
    expect(await text.locator('table td').allTextContents()).toEqual(['alpha', '1', 'bravo', '2']);
    const link = text.locator('a', { hasText: 'the docs' });
    expect(await link.getAttribute('href')).toBe('https://example.com/docs');
    expect(await link.getAttribute('target')).toBe('_blank');
    expect(await link.getAttribute('rel')).toContain('noopener');
    // Raw HTML is shown as the text it is, never parsed: no script, handler, frame, style or image, no javascript: URL.
    expect(await text.textContent()).toContain('<script>window.__xss = 1</script>');
    expect(await text.textContent()).toContain('<img src=x onerror="window.__xss=2">');
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(await text.locator('script, iframe, style, img, b, [onerror], [onmouseover]').count()).toBe(0);
    await text.locator('a', { hasText: 'this' }).click();
    expect(await text.locator('a', { hasText: 'this' }).getAttribute('href')).toBeNull();
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(await page.locator('body').isVisible()).toBe(true);
    // Copy code and copy answer put the text on the clipboard.
    await text.locator('.code-block .copy').click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('const answer = 42;\n');
    await lastAgent().locator('.actions button', { hasText: 'Copy' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toContain('## Release notes');
    expect(failures).toEqual([]);
    await shot(page, 'chat-desktop-markdown.png');
  }, 60_000);

  it('follows a 1,500-token stream to its end, and stays where the reader scrolled up to', async () => {
    await page.click('#new-chat');
    const gap = () =>
      page.evaluate(() => {
        const m = document.getElementById('messages')!;
        return m.scrollHeight - m.scrollTop - m.clientHeight;
      });
    const height = () => page.evaluate(() => document.getElementById('messages')!.scrollHeight);
    await send('/slow 10 /long 1500');
    // While it streams the view keeps the end of the answer in sight.
    await expect.poll(height, { timeout: 20_000 }).toBeGreaterThan(700);
    for (let i = 0; i < 3; i++) {
      expect(await gap()).toBeLessThan(60);
      await page.waitForTimeout(300);
    }
    // The reader scrolls up: the view stays there while the answer grows, and offers a way back.
    await page.mouse.move(700, 300);
    await page.mouse.wheel(0, -800);
    await page.waitForTimeout(600);
    const top = await page.evaluate(() => document.getElementById('messages')!.scrollTop);
    const h0 = await height();
    await expect.poll(height, { timeout: 20_000 }).toBeGreaterThan(h0 + 150);
    expect(Math.abs((await page.evaluate(() => document.getElementById('messages')!.scrollTop)) - top)).toBeLessThan(5);
    expect(await page.locator('#to-latest').isVisible()).toBe(true);
    await page.click('#to-latest');
    await idle();
    expect(await gap()).toBeLessThan(60);
    expect((await lastAgentText().textContent())!.split(/\s+/).filter(Boolean)).toHaveLength(1500);
  }, 150_000);

  it('sends nothing on Enter while a turn runs, stops it, and New chat during a stream starts a new conversation', async () => {
    await page.click('#new-chat');
    const user = await userOf(page);
    await send('/slow 40 /long 300');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('alpha');
    const users = await page.locator('.msg.user').count();
    await page.fill('#query', 'not now');
    await page.press('#query', 'Enter');
    // Send gives way to Stop while the turn runs; a submit by any other path sends nothing either.
    expect(await page.locator('#send').isVisible()).toBe(false);
    await page.evaluate(() => (document.getElementById('composer') as HTMLFormElement).requestSubmit());
    expect(await page.locator('.msg.user').count()).toBe(users);
    expect(await page.inputValue('#query')).toBe('not now');
    expect(await page.locator('#stop').isEnabled()).toBe(true);
    await page.click('#stop');
    await idle();
    await expect.poll(() => lastAgent().getAttribute('class')).toContain('stopped');
    expect((await lastAgentText().textContent())!.split(/\s+/).length).toBeLessThan(300);

    // New chat while the first answer still streams: the next message starts a conversation of its own.
    await page.fill('#query', '/slow 40 /long 400');
    await page.press('#query', 'Enter');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('alpha');
    await expect.poll(() => page.locator('#conversations li.active').count()).toBe(1);
    const old = (await page.locator('#conversations li.active').getAttribute('data-id'))!;
    await page.click('#new-chat');
    expect(await page.locator('#stop').isDisabled()).toBe(true);
    expect(await page.locator('#conversations li.active').count()).toBe(0);
    await send('Hello from a new chat');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('This is the first message I remember');
    await idle();
    await expect.poll(() => page.locator('#conversations li.active').count()).toBe(1);
    const fresh = (await page.locator('#conversations li.active').getAttribute('data-id'))!;
    expect(fresh).not.toBe(old);
    const queries = async (id: string) =>
      ((await api(`/v1/messages?conversation_id=${id}&user=${user}`))!.data as { query: string }[]).map((m) => m.query);
    expect(await queries(fresh)).toEqual(['Hello from a new chat']);
    // The stopped turn's conversation goes on with the next message; the new chat's does not.
    expect(await queries(old)).toEqual(['/slow 40 /long 300', '/slow 40 /long 400']);
    // The detached turn went on on the server: opening its conversation follows it to its end.
    await page.locator(`#conversations li[data-id="${old}"] .open`).click();
    await expect.poll(() => lastAgentText().textContent(), { timeout: 30_000 }).toContain('alpha');
    await idle();
    expect(failures).toEqual([]);
  }, 120_000);

  it("shows the agent's outputs/ files as attachments (the image inline) that download, live and in the history", async () => {
    await page.click('#new-chat');
    await send(`/sh echo ${PNG_B64} | base64 -d > outputs/dot.png && echo hi > outputs/report.txt`);
    await idle();
    const files = lastAgent().locator('.files');
    await expect.poll(() => files.locator('.file').count(), { timeout: 20_000 }).toBe(2);
    await expect
      .poll(() => files.locator('a.download').allTextContents())
      .toEqual(expect.arrayContaining(['Download dot.png', 'Download report.txt']));
    await expect.poll(() => files.locator('img').evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth)).toBe(1);
    const [download] = await Promise.all([page.waitForEvent('download'), files.locator('a.download', { hasText: 'report.txt' }).click()]);
    expect(download.suggestedFilename()).toBe('report.txt');
    expect(fs.readFileSync((await download.path())!, 'utf8')).toBe('hi\n');
    // The history hands out fresh links: the same attachments after a reload.
    await page.reload();
    await page.locator('#conversations li .open').first().click();
    await expect.poll(() => page.locator('.msg.agent .files .file').count(), { timeout: 20_000 }).toBe(2);
    await expect.poll(() => page.locator('.msg.agent .files img').evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth)).toBe(1);
    // History's message_files carry Dify's filename and size: the links are named (and sized) from them.
    const png = Buffer.from(PNG_B64, 'base64').length;
    expect((await page.locator('.msg.agent .files a.download').allTextContents()).sort()).toEqual([
      `Download dot.png (${png} B)`,
      'Download report.txt (3 B)',
    ]);
    expect(failures).toEqual([]);
    await shot(page, 'chat-desktop-files.png');
  }, 90_000);

  it('uploads an image that reaches the turn, rates an answer, regenerates it as a sibling, renames and deletes a conversation', async () => {
    await page.click('#new-chat');
    const user = await userOf(page);
    expect(await page.locator('#attach').isVisible()).toBe(true);
    await page.setInputFiles('#file', { name: 'dot.png', mimeType: 'image/png', buffer: Buffer.from(PNG_B64, 'base64') });
    await expect.poll(() => page.locator('#attachments .chip').textContent()).toContain('dot.png');
    await expect.poll(() => page.locator('#send').isEnabled()).toBe(true);
    await send('What is in this picture?');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 20_000 }).toContain('I see 1 image');
    await idle();
    expect(await page.locator('#attachments .chip').count()).toBe(0);
    expect(await page.locator('.msg.user').last().textContent()).toContain('dot.png');

    // Feedback: like, then the API has it; a second click takes it back.
    const like = lastAgent().locator('button.rate.like');
    await like.click();
    await expect.poll(() => like.getAttribute('aria-pressed')).toBe('true');
    const conv = (await conversations(user)).find((c) => c.name.startsWith('What is in this picture?'))!;
    const rated = async () =>
      ((await api(`/v1/messages?conversation_id=${conv.id}&user=${user}`))!.data as { feedback: { rating: string } | null }[]).map(
        (m) => m.feedback?.rating ?? null,
      );
    expect(await rated()).toEqual(['like']);
    await lastAgent().locator('button.rate.dislike').click();
    await expect.poll(rated).toEqual(['dislike']);
    await lastAgent().locator('button.rate.dislike').click();
    await expect.poll(rated).toEqual([null]);

    // Regenerate: the same question (with its picture) answered again as a sibling under the same parent, in place
    // of the answer; arrows switch between the two answers, each showing the thread through it.
    const firstId = (await lastAgent().getAttribute('data-message-id'))!;
    const post = page.waitForRequest((r) => r.url().endsWith('/v1/chat-messages') && r.method() === 'POST');
    await lastAgent().locator('button.again').click();
    const body = (await post).postDataJSON() as { query: string; parent_message_id: string; files: unknown[] };
    expect(body.query).toBe('What is in this picture?');
    expect(body.parent_message_id).toBe('00000000-0000-0000-0000-000000000000');
    expect(body.files).toHaveLength(1);
    await expect.poll(() => lastAgent().locator('.sibling-at').textContent(), { timeout: 30_000 }).toBe('2 / 2');
    await idle();
    const secondId = (await lastAgent().getAttribute('data-message-id'))!;
    expect(secondId).not.toBe(firstId);
    expect(await page.locator('.msg.user .text').allTextContents()).toEqual(['What is in this picture?']);
    expect(await lastAgentText().textContent()).toContain('I see 1 image');
    const thread = (await api(`/v1/messages?conversation_id=${conv.id}&user=${user}`))!.data as { id: string; sibling_ids: string[] }[];
    expect(thread.map((m) => m.id)).toEqual([secondId]);
    expect(thread[0]!.sibling_ids).toEqual([firstId, secondId]);
    await lastAgent().locator('button.sibling.prev').click();
    await expect.poll(() => lastAgent().getAttribute('data-message-id')).toBe(firstId);
    expect(await lastAgent().locator('.sibling-at').textContent()).toBe('1 / 2');
    expect(await lastAgent().locator('button.sibling.prev').isDisabled()).toBe(true);
    await lastAgent().locator('button.sibling.next').click();
    await expect.poll(() => lastAgent().getAttribute('data-message-id')).toBe(secondId);
    expect(await page.locator('.msg.agent .again').count()).toBe(1);
    // The arrows are named buttons (axe), shown in the screenshot.
    expect(await axeViolations(page)).toEqual([]);
    await shot(page, 'chat-desktop-regenerate.png');

    // From the history (after a reload) the question keeps its picture: message_files carry the upload's id
    // (upload_file_id), and a regenerate sends it again — the new sibling sees the image too.
    await page.reload();
    await page.locator('#conversations li', { hasText: 'What is in this picture?' }).locator('.open').click();
    await expect.poll(() => lastAgent().getAttribute('data-message-id'), { timeout: 20_000 }).toBe(secondId);
    const listed = (await api(`/v1/messages?conversation_id=${conv.id}&user=${user}`))!.data as {
      message_files: { belongs_to: string; type: string; transfer_method: string; upload_file_id: string | null }[];
    }[];
    const picture = listed[0]!.message_files.find((f) => f.belongs_to === 'user')!;
    expect(picture).toMatchObject({ type: 'image', transfer_method: 'local_file' });
    expect(picture.upload_file_id).toMatch(/^[0-9a-f-]{36}$/);
    const again = page.waitForRequest((r) => r.url().endsWith('/v1/chat-messages') && r.method() === 'POST');
    await lastAgent().locator('button.again').click();
    const body2 = (await again).postDataJSON() as { parent_message_id: string; files: unknown[] };
    expect(body2.parent_message_id).toBe('00000000-0000-0000-0000-000000000000');
    expect(body2.files).toEqual([{ type: 'image', transfer_method: 'local_file', upload_file_id: picture.upload_file_id }]);
    await expect.poll(() => lastAgent().locator('.sibling-at').textContent(), { timeout: 30_000 }).toBe('3 / 3');
    await idle();
    expect(await lastAgentText().textContent()).toContain('I see 1 image');

    // Rename in place, then delete (the button asks once more).
    const item = page.locator('#conversations li', { hasText: 'What is in this picture?' });
    await item.locator('.rename').click();
    await page.fill('#conversations input', 'Picture chat');
    await page.press('#conversations input', 'Enter');
    await expect.poll(() => page.locator('#conversations li .open').allTextContents()).toContain('Picture chat');
    expect((await conversations(user)).find((c) => c.id === conv.id)!.name).toBe('Picture chat');
    await shot(page, 'chat-desktop-actions.png');
    const renamed = page.locator('#conversations li', { hasText: 'Picture chat' });
    await renamed.locator('.delete').click();
    await renamed.locator('.delete', { hasText: 'Delete?' }).click();
    await expect.poll(() => page.locator('#conversations li .open').allTextContents()).not.toContain('Picture chat');
    expect((await conversations(user)).some((c) => c.id === conv.id)).toBe(false);
    await expect.poll(() => page.locator('.welcome').count()).toBe(1);
    expect(failures).toEqual([]);
  }, 120_000);

  it('attaches a document, sends it, and the agent reads it in its workspace (the shell)', async () => {
    await page.click('#new-chat');
    const user = await userOf(page);
    // The app takes documents: its agent has a workspace and a shell (GET /v1/parameters).
    expect(await page.locator('#file').getAttribute('accept')).toContain('.txt');
    const text = 'Meeting notes: the launch moves to Thursday; Priya owns the checklist.';
    await page.setInputFiles('#file', { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(`${text}\n`) });
    const chip = page.locator('#attachments .chip', { hasText: 'notes.txt' });
    await expect.poll(() => chip.getAttribute('class')).toBe('chip');
    await expect.poll(() => page.locator('#send').isEnabled()).toBe(true);
    await send('/sh cat uploads/*/notes.txt');
    await expect.poll(() => lastAgentText().textContent(), { timeout: 60_000 }).toContain(text);
    await idle();
    expect(await page.locator('#attachments .chip').count()).toBe(0);
    expect(await page.locator('.msg.user').last().textContent()).toContain('notes.txt');
    // The shell call is shown as a thought, with the file's content as its output.
    await expect.poll(() => lastAgent().locator('.thought.tool').first().textContent()).toContain('shell');
    // The API agrees: the message carries the document, and the turn's answer has its text.
    // Named without its slash command (issue 42).
    const conv = (await conversations(user)).find((c) => c.name.startsWith('cat uploads/'))!;
    const messages = (await api(`/v1/messages?conversation_id=${conv.id}&user=${user}`))!.data as {
      answer: string;
      message_files: { belongs_to: string; type: string; filename: string | null; mime_type: string | null; size: number | null }[];
    }[];
    expect(messages).toHaveLength(1);
    expect(messages[0]!.answer).toContain(text);
    expect(messages[0]!.message_files.filter((f) => f.belongs_to === 'user')).toEqual([
      expect.objectContaining({ type: 'document', filename: 'notes.txt', mime_type: 'text/plain', size: text.length + 1 }),
    ]);
    await shot(page, 'chat-desktop-document.png');
    // Opened from the history, the question shows the document by its name and size.
    await page.reload();
    await page.locator('#conversations li .open', { hasText: 'cat uploads/' }).click();
    await expect
      .poll(() => page.locator('.msg.user .sent-files').last().textContent(), { timeout: 20_000 })
      .toBe(`notes.txt (${text.length + 1} B)`);
    expect(failures).toEqual([]);
  }, 120_000);

  it('enqueue: a queued message shows its place in line and is stopped from the page before its turn; the next one moves up', async () => {
    const consoleApi = (body: unknown) =>
      fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/multitask-settings`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await consoleApi({ default_strategy: 'enqueue' })).status).toBe(200);
    const p = await desktop.newPage();
    watch(p);
    try {
      await p.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
      await expect.poll(() => p.evaluate(() => document.body.classList.contains('multitask')), { timeout: 20_000 }).toBe(true);
      const ask = async (text: string) => {
        await p.fill('#query', text);
        await p.click('#send');
      };
      // A long turn (a minute at most; it is stopped), then two follow-ups queued behind it.
      await ask('/slow 100 /long 600');
      await expect.poll(() => p.locator('.msg.agent .text').first().textContent(), { timeout: 30_000 }).toContain('alpha');
      await ask('first follow-up');
      await ask('second follow-up');
      const queued = p.locator('.msg.agent.queued');
      await expect.poll(() => queued.count()).toBe(2);
      const first = queued.nth(0);
      const second = queued.nth(1);
      await expect.poll(() => first.locator('.queue-place').textContent(), { timeout: 20_000 }).toBe('Queued: next in line.');
      await expect.poll(() => second.locator('.queue-place').textContent(), { timeout: 20_000 }).toBe('Queued: 2nd in line.');
      const firstId = (await first.getAttribute('data-message-id'))!;
      expect(firstId).toMatch(/^[0-9a-f-]{36}$/);
      expect(await axeViolations(p)).toEqual([]);
      await shot(p, 'chat-desktop-queued.png');

      // Stopped before its turn: it ends without running; the running answer goes on, the other follow-up moves up.
      await first.locator('button.stop-queued').click();
      const stoppedBox = p.locator(`.msg.agent[data-message-id="${firstId}"]`);
      await expect.poll(() => stoppedBox.getAttribute('class'), { timeout: 20_000 }).toContain('stopped');
      await expect.poll(() => stoppedBox.locator('.queued-note').count()).toBe(0);
      await expect.poll(() => p.locator('.msg.agent.queued .queue-place').textContent(), { timeout: 20_000 }).toBe('Queued: next in line.');
      expect(await p.locator('#stop').isEnabled()).toBe(true);
      const row = await stack.db.message.findUniqueOrThrow({ where: { id: firstId } });
      expect(row.query).toBe('first follow-up');
      expect(row.status).toBe('stopped');
      expect(await stack.db.agentBackendRun.count({ where: { message_id: firstId } })).toBe(0);

      // Stop the running answer: the remaining follow-up runs and completes.
      await p.click('#stop');
      await expect.poll(() => p.locator('.msg.pending, .msg.queued').count(), { timeout: 60_000 }).toBe(0);
      const statuses = await stack.db.message.findMany({
        where: { conversation_id: row.conversation_id },
        orderBy: { created_at: 'asc' },
        select: { query: true, status: true },
      });
      expect(statuses).toEqual([
        { query: '/slow 100 /long 600', status: 'stopped' },
        { query: 'first follow-up', status: 'stopped' },
        { query: 'second follow-up', status: 'succeeded' },
      ]);
      expect(await p.locator('.msg.agent .text').last().textContent()).not.toBe('');
      expect(failures).toEqual([]);
    } finally {
      await p.close();
      expect((await consoleApi({ default_strategy: 'reject' })).status).toBe(200);
    }
  }, 120_000);

  it('has no serious accessibility violation (axe-core) on the desktop layout', async () => {
    await page.locator('#conversations li .open').first().click();
    await expect.poll(() => page.locator('.msg.agent').count(), { timeout: 20_000 }).toBeGreaterThan(0);
    expect(await axeViolations(page)).toEqual([]);
  }, 60_000);

  it('works on a phone: the conversations in a drawer, nothing wider than the screen, no serious axe violation', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    // The same end user as the desktop page (its conversations in the drawer).
    await phone.addInitScript((u) => localStorage.setItem('agent-chat-user', u), await userOf(page));
    const p = await phone.newPage();
    watch(p);
    await p.goto(`${stack.apiUrl}/chat/#key=${stack.demo!.apiKey}`);
    await expect.poll(() => p.locator('#app-title').textContent(), { timeout: 20_000 }).toBe('Demo Agent');
    const sidebarX = async () => (await p.locator('#sidebar').boundingBox())!.x;
    expect(await sidebarX()).toBeLessThan(0);
    expect(await p.locator('#menu').isVisible()).toBe(true);
    const overflow = () => p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await shot(p, 'chat-phone-welcome.png');
    expect(await axeViolations(p)).toEqual([]);

    await p.fill(
      '#query',
      '/echo # Phone\n\n| a | b | c | d | e |\n|---|---|---|---|---|\n| long cell one | long cell two | long cell three | long cell four | long cell five |\n\n```\na very long line of code that is much wider than the screen of a phone, scrolled inside its block\n```',
    );
    await p.press('#query', 'Enter');
    await expect.poll(() => p.locator('.msg.agent .text h1').textContent(), { timeout: 20_000 }).toBe('Phone');
    await expect.poll(() => p.locator('#stop').isDisabled(), { timeout: 20_000 }).toBe(true);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await shot(p, 'chat-phone-answer.png');
    expect(await axeViolations(p)).toEqual([]);

    await p.tap('#menu');
    await expect.poll(sidebarX).toBe(0);
    await expect.poll(() => p.locator('#conversations li').count()).toBeGreaterThan(0);
    await shot(p, 'chat-phone-drawer.png');
    await p.locator('#conversations li .open', { hasText: 'My name is Ada.' }).tap();
    // Closed: wholly off the screen once its slide ends.
    await expect
      .poll(async () => sidebarX().then(async (x) => x + (await p.locator('#sidebar').boundingBox())!.width))
      .toBeLessThanOrEqual(0);
    await expect.poll(() => p.locator('.msg.agent .text').last().textContent(), { timeout: 20_000 }).toContain('You answered: "Countess"');
    await shot(p, 'chat-phone-history.png');
    await phone.close();
    expect(failures).toEqual([]);
  }, 90_000);
});
