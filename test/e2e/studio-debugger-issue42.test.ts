/**
 * Issue 42's studio debugger in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core
 * scan and a screenshot (test-results/screenshots), on the real stack and the demo model: a knowledge answer keeps its
 * citations card after a reload (from the debugger's history), and "Fork from here" under a finished answer — the chat
 * page's action (web/chat-fork.js) over the console's fork route — opens a new debugger conversation whose history is
 * the thread up to that answer and whose next turn goes on from there; a reload opens the fork, with its actions. The
 * turn inspector shows what the model was sent (system, user, the knowledge block) with a token count per part.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { openStudio } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const;

const TRAIN = 'The night train to Lisbon leaves from platform 9 at 23:47.';
const KB = '/kb When does the night train to Lisbon leave?';

let stack: Stack;

const consoleApi = async (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe.runIf(chromiumPath)('issue 42: the studio debugger (citations after a reload, fork)', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_debugger_issue42');
    // A dataset with one document, attached to the demo agent's shared draft (what the debugger runs).
    const created = await consoleApi('/datasets', 'POST', { name: 'Trip notes' });
    expect(created.status).toBe(201);
    const datasetId = ((await created.json()) as { id: string }).id;
    const doc = await consoleApi(`/datasets/${datasetId}/documents`, 'POST', {
      name: 'trip-notes.md',
      text: `# Trip notes\n\n${TRAIN}\n\nBring the blue suitcase.`,
    });
    expect([200, 201, 202]).toContain(doc.status);
    for (let i = 0; i < 100; i++) {
      const d = (await (await consoleApi(`/datasets/${datasetId}/documents`)).json()) as { data: { indexing_status: string }[] };
      if (d.data[0]?.indexing_status === 'completed') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const soul = demoSoulConfig();
    soul.knowledge = { enabled: true, dataset_ids: [datasetId], top_k: 3, score_threshold: 0.05, search_tool: true };
    expect((await consoleApi(`/apps/${stack.demo!.appId}/agent/draft`, 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`citations after a reload, and "Fork from here" opens a fork that goes on from that answer (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      open.push(s.browser);
      const page = s.page;
      const agents = page.locator('#messages .msg.agent');
      const idle = () => expect.poll(() => page.locator('#send').isEnabled(), { timeout: 60_000 }).toBe(true);
      const ask = async (text: string) => {
        await page.fill('#query', text);
        await page.click('#send');
        await expect.poll(() => agents.last().locator('.text').textContent(), { timeout: 60_000 }).not.toBe('');
        await idle();
      };
      const reload = async () => {
        await page.reload();
        await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
      };
      const citationsOf = async (i: number) => {
        const card = agents.nth(i).locator('.citations');
        await expect.poll(() => card.count(), { timeout: 20_000 }).toBe(1);
        return card.locator('.citation-doc').allTextContents();
      };

      // The studio opens the account's last debugger conversation (the desktop run's fork): then a new one.
      await page.waitForLoadState('networkidle');
      await page.click('#new-debug');
      await ask(KB);
      expect(await agents.last().locator('.text').textContent()).toContain('platform 9 at 23:47');
      await ask('My name is Bob.');
      const source = await stack.db.message.findFirstOrThrow({
        where: { app_id: stack.demo!.appId, query: 'My name is Bob.', invoke_from: 'debugger' },
        orderBy: { created_at: 'desc' },
      });

      // After a reload: the same conversation, the knowledge answer with its citations card, each answer with its fork.
      await reload();
      await expect.poll(() => agents.count(), { timeout: 20_000 }).toBe(2);
      expect(await citationsOf(0)).toEqual(['trip-notes.md']);
      expect(await agents.nth(1).locator('.citations').count()).toBe(0);
      // The inspector shows what the model was sent: system, the user's text and the knowledge block, with token counts.
      await agents.first().locator('.who .inspect').click();
      const parts = page.locator('#model-inputs .input-part');
      await expect
        .poll(() => parts.evaluateAll((ps) => ps.map((p) => (p as HTMLElement).dataset.kind)), { timeout: 20_000 })
        .toEqual(expect.arrayContaining(['system', 'user', 'knowledge']));
      const knowledge = page.locator('#model-inputs .input-part[data-kind="knowledge"]').first();
      expect(await knowledge.locator('.part-tokens').textContent()).toMatch(/^ [1-9]\d* tokens$/);
      await knowledge.locator('summary').click();
      expect(await knowledge.locator('.part-text').textContent()).toContain(TRAIN);
      const fork = agents.first().locator('.actions button.fork');
      expect(await fork.textContent()).toBe('Fork from here');
      expect(await agents.nth(1).locator('.actions button.fork').count()).toBe(1);

      await fork.click();
      // The fork opens in the debugger: the thread up to the answer forked at.
      await expect.poll(() => page.locator('#status').textContent(), { timeout: 20_000 }).toContain('Forked');
      await expect.poll(() => page.locator('#messages .msg.user .text').allTextContents()).toEqual([KB]);
      expect(await agents.count()).toBe(1);
      expect(await citationsOf(0)).toEqual(['trip-notes.md']);
      const forks = await stack.db.conversation.findMany({ where: { app_id: stack.demo!.appId, id: { not: source.conversation_id } } });
      expect(forks.length).toBeGreaterThan(0);

      // It goes on from there: the model's history holds the knowledge question, not Bob; the source keeps both.
      await ask('/echo-history');
      const history = (await agents.last().locator('.text').textContent())!;
      expect(history).toContain('/kb When does the night train');
      expect(history).toContain('"/echo-history"');
      expect(history).not.toContain('Bob');
      expect(await stack.db.message.count({ where: { conversation_id: source.conversation_id } })).toBe(2);

      // A reload opens the fork (the newest debugger conversation), with its citations and actions.
      await reload();
      await expect
        .poll(() => page.locator('#messages .msg.user .text').allTextContents(), { timeout: 20_000 })
        .toEqual([KB, '/echo-history']);
      expect(await citationsOf(0)).toEqual(['trip-notes.md']);
      expect(await agents.locator('.actions button.fork').count()).toBe(2);

      if (size.phone) expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
      expect(await axeViolations(page)).toEqual([]);
      await agents.first().scrollIntoViewIfNeeded();
      await screenshot(page, `studio-debugger-fork-${size.name}.png`, false);
      expect(failures).toEqual([]);
    }, 180_000);
  }
});
