/**
 * Issue 42's agent form (part A) in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core
 * scan and a screenshot (test-results/screenshots): the opening statement and the suggested questions (one a line) are
 * edited in the form, saved into the shared draft's features (Dify's shape) and, once published, answered by
 * GET /v1/parameters — what the chat page shows before a first message.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { openStudio } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

const SIZES = [
  { name: 'desktop', viewport: { width: 1366, height: 900 } },
  { name: 'phone', viewport: { width: 390, height: 844 } },
] as const;

let stack: Stack;

describe.runIf(chromiumPath)('issue 42: the studio agent form', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_agent_form', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  for (const size of SIZES) {
    it(`edits the opening statement and suggested questions (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, { viewport: size.viewport });
      open.push(s.browser);
      const page = s.page;
      // The draft's opening statement and questions are filled in (the seeded ones, then the desktop pass's).
      const before = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
      const was = (before.config as { features: { opening_statement: string; suggested_questions: string[] } }).features;
      expect(was.opening_statement).not.toBe('');
      expect(was.suggested_questions.length).toBeGreaterThan(0);
      await expect.poll(() => page.inputValue('#f-opening')).toBe(was.opening_statement);
      expect(await page.inputValue('#f-suggested')).toBe(was.suggested_questions.join('\n'));
      const opening = `Welcome (${size.name})! Ask me anything.`;
      await page.fill('#f-opening', opening);
      await page.fill('#f-suggested', `What can you do on a ${size.name}?\n\n  /calc 2+2  \nTell me a joke`);
      await page.click('#save');
      await expect.poll(() => page.locator('#status').textContent()).toContain('Saved (DRAFT revision');
      const draft = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
      const features = (draft.config as { features: { opening_statement: string; suggested_questions: string[] } }).features;
      expect(features.opening_statement).toBe(opening);
      expect(features.suggested_questions).toEqual([`What can you do on a ${size.name}?`, '/calc 2+2', 'Tell me a joke']);
      // The editors are the form's width.
      const widths = await page.evaluate(() => ({
        opening: document.getElementById('f-opening')!.getBoundingClientRect().width,
        editor: document.getElementById('editor')!.getBoundingClientRect().width,
      }));
      expect(widths.opening).toBeGreaterThanOrEqual(widths.editor * 0.9);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-agent-form-opener-${size.name}.png`, false);

      await page.click('#publish');
      await expect.poll(() => page.locator('#status').textContent()).toMatch(/^Published version \d+\.$/);
      const params = await fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${stack.demo!.apiKey}` } });
      expect(params.status).toBe(200);
      const body = (await params.json()) as { opening_statement: string; suggested_questions: string[] };
      expect(body.opening_statement).toBe(opening);
      expect(body.suggested_questions).toEqual([`What can you do on a ${size.name}?`, '/calc 2+2', 'Tell me a joke']);
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
