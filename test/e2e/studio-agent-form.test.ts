/**
 * Issue 42's agent form (part A) in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core
 * scan and a screenshot (test-results/screenshots): the opening statement and the suggested questions (one a line) are
 * edited in the form, saved into the shared draft's features (Dify's shape) and, once published, answered by
 * GET /v1/parameters — what the chat page shows before a first message; the model's parameters beyond temperature and
 * max tokens (top_p, stop sequences, thinking budget, reasoning effort) are edited into the draft's model_settings, and
 * a model that does not reason is offered no reasoning setting.
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

  for (const size of SIZES) {
    it(`edits the model's parameters: top_p, stop sequences, reasoning (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, {
        viewport: size.viewport,
        expected: (status, url) =>
          (status === 404 && url.endsWith('/agent/build-draft')) || (status === 400 && url.endsWith('/agent/draft')),
      });
      open.push(s.browser);
      const page = s.page;
      const settings = async () =>
        (
          (await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } })).config as {
            model: { model_settings: Record<string, unknown> };
          }
        ).model.model_settings;
      await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
      await page.fill('#f-top-p', '0.85');
      await page.fill('#f-stop', `END-${size.name}\n\nSTOP HERE`);
      await page.click('#save');
      await expect.poll(() => page.locator('#status').textContent()).toContain('Saved (DRAFT revision');
      expect(await settings()).toMatchObject({ top_p: 0.85, stop_sequences: [`END-${size.name}`, 'STOP HERE'] });
      // Filled back in from the draft on a reload.
      await page.reload();
      await expect.poll(() => page.inputValue('#f-top-p')).toBe('0.85');
      expect(await page.inputValue('#f-stop')).toBe(`END-${size.name}\nSTOP HERE`);

      // The demo model does not reason: the form offers no reasoning settings, as the model declares none (a reasoning
      // model's, and the save-time refusal of one shown next to its field: test/e2e/studio-model-picker.test.ts).
      await expect.poll(() => page.locator('#editor [data-param="reasoning_effort"]').isVisible()).toBe(false);
      expect(await page.locator('#editor [data-param="thinking_budget"]').isVisible()).toBe(false);
      expect((await settings()).reasoning_effort).toBeUndefined();
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `studio-agent-form-parameters-${size.name}.png`, false);
      // Cleared fields leave the settings.
      await page.fill('#f-top-p', '');
      await page.fill('#f-stop', '');
      await page.click('#save');
      await expect.poll(() => page.locator('#status').textContent()).toContain('Saved (DRAFT revision');
      await expect.poll(async () => Object.keys(await settings()).sort()).toEqual(['temperature']);
      expect(failures).toEqual([]);
    }, 120_000);
  }
});
