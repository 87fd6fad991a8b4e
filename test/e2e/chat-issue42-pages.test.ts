/**
 * Issue 42's chat-page items of the pages' work, each at a desktop's size (1366x900) and a phone's (390x844), with an
 * axe-core scan and a screenshot (test-results/screenshots). Citations (problem 6): a knowledge answer cites its
 * passages by number — no raw "[dataset … · chunk … · score …]" tail — and a citations card under it names each
 * source with its score and opens to the chunk's text, while it streams and from history after a reload. Fork from
 * the UI: "Fork from here" under an answer opens a new conversation, listed in the sidebar as the open one, whose
 * history is the thread up to that answer and whose next turn goes on from there.
 */
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;
type Size = (typeof SIZES)[number];

const TRAIN = 'The night train to Lisbon leaves from platform 9 at 23:47.';

let stack: Stack;
let browser: Browser;

const consoleApi = async (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** A fresh browser context of `size` for a user of its own, on the demo app's chat page. */
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

async function send(page: Page, text: string) {
  await page.fill('#query', text);
  await page.click('#send');
}

const idle = (page: Page) => expect.poll(() => page.locator('#stop').isDisabled(), { timeout: 60_000 }).toBe(true);

describe.runIf(chromiumPath)('issue 42: the chat page (citations, fork)', () => {
  beforeAll(async () => {
    stack = await startTestStack('chat_issue42_pages');
    browser = await launchChromium();
    // A dataset with one document, attached to the demo agent (retriever_resource left at its default: on).
    const created = await consoleApi('/datasets', 'POST', { name: 'Trip notes' });
    expect(created.status).toBe(201);
    const datasetId = ((await created.json()) as { id: string }).id;
    const doc = await consoleApi(`/datasets/${datasetId}/documents`, 'POST', {
      name: 'trip-notes.md',
      text: `# Trip notes\n\n${TRAIN}\n\nBring the blue suitcase.`,
    });
    expect([200, 201]).toContain(doc.status);
    for (let i = 0; i < 100; i++) {
      const d = (await (await consoleApi(`/datasets/${datasetId}/documents`)).json()) as { data: { indexing_status: string }[] };
      if (d.data[0]?.indexing_status === 'completed') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const soul = demoSoulConfig();
    soul.knowledge = { enabled: true, dataset_ids: [datasetId], top_k: 3, score_threshold: 0.05, search_tool: true };
    const app = `/apps/${stack.demo!.appId}`;
    expect((await consoleApi(`${app}/agent/draft`, 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
    expect((await consoleApi(`${app}/agent/publish`, 'POST', { from: 'draft' })).status).toBe(201);
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`a knowledge answer cites by number, with a citations card naming each source and opening to its chunk (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await send(page, '/kb When does the night train to Lisbon leave?');
        const answer = page.locator('.msg.agent').last();
        await expect.poll(() => answer.locator('.text').textContent(), { timeout: 60_000 }).toContain('platform 9 at 23:47');
        await idle(page);
        const text = (await answer.locator('.text').textContent())!;
        // Cited by its number; the source is the card's, not a raw label ending the answer.
        expect(text.trim()).toMatch(/\[1\]$/);
        expect(text).not.toMatch(/dataset "|· chunk |· score /);

        const check = async (label: string) => {
          const card = answer.locator('.citations');
          await expect.poll(() => card.isVisible(), { timeout: 20_000 }).toBe(true);
          // Under the answer, above its actions.
          const order = await answer.evaluate((m) => [...m.children].map((c) => c.className.split(' ')[0]));
          expect(order.indexOf('citations')).toBeGreaterThan(order.indexOf('text'));
          expect(order.indexOf('citations')).toBeLessThan(order.indexOf('actions'));
          const first = card.locator('.citation').first();
          expect(await first.locator('.citation-n').textContent()).toBe('[1]');
          expect(await first.locator('.citation-doc').textContent()).toBe('trip-notes.md');
          expect(await first.locator('.citation-dataset').textContent()).toBe('Trip notes');
          expect(await first.locator('.citation-score').textContent()).toMatch(/^score 0\.\d\d$/);
          // The chunk's text shows on expand.
          expect(await first.locator('.citation-text').isVisible()).toBe(false);
          await first.locator('summary').click();
          await expect.poll(() => first.locator('.citation-text').isVisible()).toBe(true);
          expect(await first.locator('.citation-text').textContent()).toContain(TRAIN);
          // The summary is a finger-sized target.
          const box = (await first.locator('summary').boundingBox())!;
          expect(box.height).toBeGreaterThanOrEqual(44);
          expect(await axeViolations(page)).toEqual([]);
          await answer.scrollIntoViewIfNeeded();
          await screenshot(page, `chat-issue42-citations-${label}-${size.name}.png`, false);
        };
        await check('streamed');
        // From history after a reload: the same card (GET /v1/messages retriever_resources).
        await page.reload();
        await expect.poll(() => page.locator('.msg.agent').count(), { timeout: 20_000 }).toBe(1);
        await check('history');
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 180_000);
  }
  for (const size of SIZES) {
    it(`"Fork from here" under an answer opens a new conversation in the sidebar that goes on from that answer (${size.name})`, async () => {
      const failures: string[] = [];
      const { ctx, page } = await openChat(size, failures);
      try {
        await send(page, 'My name is Ada.');
        await idle(page);
        await send(page, 'My name is Bob.');
        await idle(page);
        await expect.poll(() => page.locator('#conversations li').count(), { timeout: 20_000 }).toBe(1);
        const source = (await page.locator('#conversations li').first().getAttribute('data-id'))!;
        const first = page.locator('.msg.agent').first();
        await first.locator('.actions').waitFor();
        const forkedAt = (await first.getAttribute('data-message-id'))!;
        const fork = first.locator('.actions button.fork');
        expect(await fork.textContent()).toBe('Fork from here');
        await fork.click();

        // The fork opens at once: listed beside its source, marked as the open one, named after it.
        await expect.poll(() => page.locator('#conversations li').count(), { timeout: 20_000 }).toBe(2);
        const active = page.locator('#conversations li.active');
        await expect.poll(() => active.getAttribute('data-id'), { timeout: 20_000 }).not.toBe(source);
        const forkedId = (await active.getAttribute('data-id'))!;
        expect(await active.locator('button.open').textContent()).toBe('My name is Ada. (fork)');
        expect(await active.locator('button.open').getAttribute('aria-current')).toBe('true');
        // Its history is the thread up to the answer forked at.
        await expect.poll(() => page.locator('.msg.user .text').allTextContents(), { timeout: 20_000 }).toEqual(['My name is Ada.']);
        expect(await page.locator('.msg.agent').count()).toBe(1);
        expect(await page.locator('#status').textContent()).toContain('Forked');
        const copied = await stack.db.message.findFirstOrThrow({ where: { conversation_id: forkedId } });
        expect((copied.metadata as { forked_from_message_id?: string }).forked_from_message_id).toBe(forkedAt);

        // It goes on from there: the model's history holds Ada, not Bob, and the source keeps both.
        await send(page, '/echo-history');
        await idle(page);
        const history = (await page.locator('.msg.agent .text').last().textContent())!;
        // (Rendered as a Markdown list: its items' text.)
        expect(history).toContain('"My name is Ada."');
        expect(history).toContain('"/echo-history"');
        expect(history).not.toContain('Bob');
        expect(await stack.db.message.count({ where: { conversation_id: source } })).toBe(2);
        if (size.phone) await page.click('#menu');
        expect(await axeViolations(page)).toEqual([]);
        await screenshot(page, `chat-issue42-fork-${size.name}.png`, false);
        expect(failures).toEqual([]);
      } finally {
        await ctx.close();
      }
    }, 180_000);
  }
});
