/**
 * Issue 42 problem 3 in a browser, at a desktop's size (1366x900) and a phone's (390x844), with an axe-core scan and a
 * screenshot (test-results/screenshots): the agent form picks its provider and model from the catalogue (no free-text
 * boxes), its settings fields follow what the picked model declares (a thinking budget from 1024 on an Anthropic
 * reasoning model, a reasoning effort and no temperature on OpenAI's o3, neither on the demo model; max tokens bounded
 * by the model's max output; temperature and top P disabled, with a note, while an Anthropic thinking budget is filled),
 * a setting the model does not take is not saved, and a provider without credentials is
 * offered as "add credentials", leading to the Models screen's credential form for it.
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

async function consoleApi(method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.apiUrl}/console/api${path}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
}

describe.runIf(chromiumPath)('issue 42: the agent form picks a catalogue model and shows the settings it declares', () => {
  const open: Browser[] = [];
  beforeAll(async () => {
    stack = await startTestStack('studio_model_picker', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
    // The workspace's own OpenAI and Anthropic keys (saved unchecked: no turn runs on them here); Google has none.
    await consoleApi('PUT', '/model-providers/openai/credentials', {
      credentials: { api_key: 'sk-picker-openai-0123456789' },
      validate: false,
    });
    await consoleApi('PUT', '/model-providers/anthropic/credentials', {
      credentials: { api_key: 'sk-ant-picker-0123456789' },
      validate: false,
    });
  }, 300_000);
  afterAll(async () => {
    for (const b of open) await b.close();
    await stack?.stop();
  });

  const draftModel = async () =>
    (
      (await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } })).config as {
        model: { provider: string; model: string; model_settings: Record<string, unknown> };
      }
    ).model;

  for (const size of SIZES) {
    it(`picks the model from the catalogue with the settings it takes (${size.name})`, async () => {
      const failures: string[] = [];
      const s = await openStudio(stack, failures, {
        viewport: size.viewport,
        expected: (status, url) =>
          (status === 404 && url.endsWith('/agent/build-draft')) || (status === 400 && url.endsWith('/agent/draft')),
      });
      open.push(s.browser);
      const page = s.page;
      const status = () => page.locator('#status').textContent();
      const shown = (param: string) => page.locator(`#editor [data-param="${param}"]`).isVisible();
      await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
      // Both are lists, not text boxes: every provider of the deployment, the ones without credentials marked.
      expect(
        await page.evaluate(() => [document.getElementById('f-provider')!.tagName, document.getElementById('f-model')!.tagName]),
      ).toEqual(['SELECT', 'SELECT']);
      const providerOptions = () => page.locator('#f-provider option').allTextContents();
      await expect.poll(providerOptions).toContain('google (add credentials)');
      expect(await providerOptions()).toEqual(expect.arrayContaining(['demo', 'openai', 'anthropic']));
      expect(await page.inputValue('#f-provider')).toBe('demo');
      await expect.poll(() => page.locator('#f-model option').allTextContents()).toContain('Demo chat (deterministic) (demo-chat)');
      expect(await page.inputValue('#f-model')).toBe('demo-chat');
      // The demo model reasons not: no thinking budget, no reasoning effort; max tokens up to its 4096.
      await expect.poll(() => shown('reasoning_effort')).toBe(false);
      expect(await shown('thinking_budget')).toBe(false);
      expect(await shown('temperature')).toBe(true);
      expect(await page.getAttribute('#f-max-tokens', 'max')).toBe('4096');
      expect(await page.locator('#f-max-tokens-range').textContent()).toBe('(1–4,096 tokens)');
      expect(await page.locator('#f-model-info').textContent()).toContain('context 32,768 tokens');
      expect(await page.locator('#f-credentials').isVisible()).toBe(false);

      // Anthropic's reasoning model: a thinking budget from 1024, temperature up to 1, no reasoning effort.
      await page.selectOption('#f-provider', 'anthropic');
      await page.selectOption('#f-model', 'claude-sonnet-4-20250514');
      await expect.poll(() => shown('thinking_budget')).toBe(true);
      expect(await shown('reasoning_effort')).toBe(false);
      expect(await page.getAttribute('#f-thinking-budget', 'min')).toBe('1024');
      expect(await page.getAttribute('#f-thinking-budget', 'max')).toBe('63999');
      expect(await page.getAttribute('#f-temperature', 'max')).toBe('1');
      expect(await page.getAttribute('#f-max-tokens', 'max')).toBe('64000');
      await page.fill('#f-temperature', '0.5');
      // Below Anthropic's 1024: refused at save, next to its field, nothing saved.
      await page.fill('#f-thinking-budget', '512');
      await page.click('#save');
      const budgetError = page.locator('.field[data-path="model.model_settings.thinking_budget"] .field-error');
      await expect.poll(() => budgetError.count()).toBe(1);
      expect(await budgetError.textContent()).toContain('at least 1024');
      expect((await draftModel()).provider).toBe('demo');
      // A temperature or top P while it thinks would be dropped from the request (the AI SDK does): once a budget is
      // typed, both fields are disabled with a note saying why, and what they hold is not saved.
      const disabled = () =>
        page.evaluate(() => ['f-temperature', 'f-top-p'].map((id) => (document.getElementById(id) as HTMLInputElement).disabled));
      const note = page.locator('#f-sampling-note');
      expect(await disabled()).toEqual([true, true]);
      expect(await note.isVisible()).toBe(true);
      expect(await note.textContent()).toBe(
        'anthropic takes no temperature or top P while it thinks: clear the thinking budget to set them.',
      );
      // Cleared, they come back with their value; typed again, they go.
      await page.fill('#f-thinking-budget', '');
      await expect.poll(disabled).toEqual([false, false]);
      expect(await note.isVisible()).toBe(false);
      expect(await page.inputValue('#f-temperature')).toBe('0.5');
      await page.fill('#f-thinking-budget', '2048');
      await expect.poll(disabled).toEqual([true, true]);
      await page.fill('#f-max-tokens', '8000');
      expect(await axeViolations(page)).toEqual([]);
      await page.locator('#f-provider').scrollIntoViewIfNeeded();
      await screenshot(page, `studio-model-picker-thinking-${size.name}.png`, false);
      await page.click('#save');
      await expect.poll(status).toContain('Saved (DRAFT revision');
      expect(await draftModel()).toMatchObject({
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
        model_settings: { thinking_budget: 2048, max_tokens: 8000 },
      });
      expect((await draftModel()).model_settings.temperature).toBeUndefined();
      expect(await axeViolations(page)).toEqual([]);
      await page.locator('#f-provider').scrollIntoViewIfNeeded();
      await screenshot(page, `studio-model-picker-anthropic-${size.name}.png`, false);

      // OpenAI's o3 takes a reasoning effort and no temperature: what it does not take is not saved.
      await page.selectOption('#f-provider', 'openai');
      await page.selectOption('#f-model', 'o3');
      await expect.poll(() => shown('reasoning_effort')).toBe(true);
      expect(await shown('temperature')).toBe(false);
      expect(await shown('thinking_budget')).toBe(false);
      await page.selectOption('#f-reasoning-effort', 'high');
      await page.click('#save');
      await expect.poll(async () => (await draftModel()).model).toBe('o3');
      const o3 = await draftModel();
      expect(o3.provider).toBe('openai');
      expect(o3.model_settings).toMatchObject({ reasoning_effort: 'high', max_tokens: 8000 });
      expect(o3.model_settings.temperature).toBeUndefined();
      expect(o3.model_settings.thinking_budget).toBeUndefined();
      // Read back from the draft on a reload.
      await page.reload();
      await expect.poll(() => page.inputValue('#f-model')).toBe('o3');
      expect(await page.inputValue('#f-provider')).toBe('openai');
      await expect.poll(() => page.inputValue('#f-reasoning-effort')).toBe('high');

      // Google has no credentials: picking it says so and leads to its credential form on the Models screen.
      await page.selectOption('#f-provider', 'google');
      await expect.poll(() => page.locator('#f-credentials').isVisible()).toBe(true);
      expect(await page.locator('#f-credentials-text').textContent()).toContain('no google credentials');
      expect(await axeViolations(page)).toEqual([]);
      await page.locator('#f-credentials').scrollIntoViewIfNeeded();
      await screenshot(page, `studio-model-picker-credentials-${size.name}.png`, false);
      await page.click('#f-add-credentials');
      await expect.poll(() => page.evaluate(() => document.body.dataset.screen)).toBe('models');
      await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe('google API key');
      expect(await page.locator('#mp-list article[data-provider="google"]').isVisible()).toBe(true);

      // Back to the demo model for the next pass.
      await page.click('#screens button[data-screen="agent"]');
      await page.selectOption('#f-provider', 'demo');
      await page.selectOption('#f-model', 'demo-chat');
      await page.fill('#f-max-tokens', '');
      await page.click('#save');
      await expect.poll(async () => (await draftModel()).provider).toBe('demo');
      expect((await draftModel()).model_settings.reasoning_effort).toBeUndefined();
      expect(failures).toEqual([]);
    }, 180_000);
  }
});
