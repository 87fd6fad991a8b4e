/**
 * An app builder in the studio (issue 19 §3): headless Chromium on /studio served by the api, against the real
 * stack and the demo model. Edits and saves the prompt, sees a validation error next to its field, publishes and
 * diffs two versions, chats on the draft (a tool card, an ask_human form answered in the page), stops a turn and
 * opens the inspector of a turn: its agent log timeline and the link to its workflow in the Temporal UI.
 * Needs Chromium like test/e2e/chat-page.test.ts; screenshots go next to that test's (the test data dir).
 */
import { type Browser, type Page } from 'playwright-core';
import { chromiumPath, screenshot } from '../support/browser.js';
import { noBuildDraftYet, openStudio } from '../support/studio-page.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

/** The suite's Temporal dev server runs headless, so the link is checked by its form and the workflow it names. */
const UI = `http://127.0.0.1:${inject('temporalUiPort')}`;
let stack: Stack;
let browser: Browser;
let page: Page;
const failures: string[] = [];

const shot = (name: string) => screenshot(page, name);

describe.runIf(chromiumPath)('the studio in a browser', () => {
  beforeAll(async () => {
    stack = await startTestStack('studio_page', { env: { TEMPORAL_UI_URL: UI } });
    // A script or style the CSP blocks, or an uncaught error, shows up as a console error. Expected: the invalid
    // save's 400, and the 404 that says there is no build draft yet.
    ({ browser, page } = await openStudio(stack, failures, {
      viewport: { width: 1280, height: 1000 },
      expected: (status, url) => (status === 400 && url.endsWith('/agent/draft')) || noBuildDraftYet(status, url),
    }));
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const status = () => page.locator('#status').textContent();
  const lastAgent = () => page.locator('.msg.agent').last();
  const idle = () => expect.poll(() => page.locator('#send').isEnabled(), { timeout: 20_000 }).toBe(true);
  async function send(text: string) {
    await page.fill('#query', text);
    await page.click('#send');
  }
  const sharedPrompt = async () =>
    ((await stack.db.agentConfigDraft.findFirstOrThrow({ where: { draft_type: 'DRAFT' } })).config as { prompt: { system_prompt: string } })
      .prompt.system_prompt;

  it('edits and saves the prompt, shows a validation error inline, publishes and diffs versions, merges a build draft', async () => {
    expect(page.url()).not.toContain('key=');
    await expect.poll(() => page.locator('#apps li.active').textContent()).toBe('Demo Agent');
    await expect.poll(() => page.inputValue('#f-prompt')).toContain('helpful demo agent');
    expect(await page.isChecked('#f-ask-human')).toBe(true);
    expect(await page.isChecked('#f-tools input[value="calculator"]')).toBe(true);
    // The tool checkboxes are the api's shelf (GET /console/api/builtin-tools), not a list kept in the page.
    const shelf = (await (
      await fetch(`${stack.apiUrl}/console/api/builtin-tools`, { headers: { authorization: `Bearer ${stack.demo!.consoleKey}` } })
    ).json()) as { data: { name: string; description: string }[] };
    expect(shelf.data.map((t) => t.name)).toContain('code');
    const boxes = () => page.locator('#f-tools input').evaluateAll((bs) => bs.map((b) => (b as HTMLInputElement).value));
    expect(await boxes()).toEqual(shelf.data.map((t) => t.name));
    expect(await page.locator('#f-tools label').first().getAttribute('title')).toBe(shelf.data[0]!.description);
    expect(
      await page.evaluate(() => performance.getEntriesByType('resource').some((e) => e.name.endsWith('/console/api/builtin-tools'))),
    ).toBe(true);

    // The mention menu offers the tools; picking one inserts its token.
    await page.fill('#f-prompt', 'You are the studio agent. Use ');
    await page.focus('#f-prompt');
    await page.keyboard.press('End');
    await page.keyboard.type('{{#tool.calc');
    await page.locator('#mentions li', { hasText: 'calculator' }).dispatchEvent('mousedown');
    expect(await page.inputValue('#f-prompt')).toBe('You are the studio agent. Use {{#tool.calculator#}}');
    await page.click('#save');
    await expect.poll(status).toContain('Saved (DRAFT revision');
    expect(await sharedPrompt()).toBe('You are the studio agent. Use {{#tool.calculator#}}');

    // A provider the workspace has no credentials for (the picker marks it "add credentials"): 400
    // invalid_agent_config, its message next to the provider field, nothing saved.
    await page.selectOption('#f-provider', 'openai');
    await expect.poll(() => page.locator('#f-model option').count()).toBeGreaterThan(1);
    await page.fill('#f-prompt', 'This must not be saved.');
    await page.click('#save');
    const modelError = page.locator('.field[data-path="model.provider"] .field-error');
    await expect.poll(() => modelError.count()).toBe(1);
    expect(await modelError.getAttribute('data-error-for')).toBe('model.provider');
    expect(await modelError.textContent()).toContain('add credentials');
    expect(await sharedPrompt()).toBe('You are the studio agent. Use {{#tool.calculator#}}');
    await shot('studio-validation.png');
    await page.selectOption('#f-provider', 'demo');
    await page.selectOption('#f-model', 'demo-chat');
    await page.fill('#f-prompt', 'You are the studio agent.');
    await page.click('#save');
    await expect.poll(() => modelError.count()).toBe(0);
    expect(await sharedPrompt()).toBe('You are the studio agent.');

    await page.click('#publish');
    await expect.poll(status).toBe('Published version 2.');
    await expect.poll(() => page.locator('#versions li').count()).toBe(2);
    expect(await page.locator('#versions li.active').textContent()).toContain('v2 (active)');
    await page.click('#diff');
    await expect.poll(() => page.locator('#diff-title').textContent()).toBe('v1 → v2');
    expect(await page.locator('#diff-out .add').allTextContents()).toContain('+     "system_prompt": "You are the studio agent."\n');
    expect((await page.locator('#diff-out .del').allTextContents()).join('')).toContain('helpful demo agent');

    // My build draft: saved apart from the shared draft, then merged into it.
    await page.selectOption('#target', 'build');
    await expect.poll(() => page.locator('#draft-info').textContent()).toContain('new build draft');
    await page.fill('#f-prompt', 'You are the studio agent, built in my build draft.');
    await page.click('#save');
    await expect.poll(status).toContain('Saved (BUILD_DRAFT revision 1)');
    expect(await sharedPrompt()).toBe('You are the studio agent.');
    await page.click('#merge');
    await expect.poll(status).toBe('Merged your build draft into the shared draft.');
    expect(await sharedPrompt()).toBe('You are the studio agent, built in my build draft.');
    await page.selectOption('#target', 'draft');
    await expect.poll(() => page.inputValue('#f-prompt')).toBe('You are the studio agent, built in my build draft.');
  });

  it('chats on the draft, answers a debugger form, replies from an annotation, re-attaches to a turn after a reload and stops it', async () => {
    await send('/calc 6*7');
    await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 20_000 }).toContain('42');
    const card = lastAgent().locator('.thought.tool');
    await expect.poll(() => card.locator('.tool-result').textContent()).toContain('42');
    expect(await card.locator('.kv dd').allTextContents()).toContain('6*7');
    await idle();

    await send('/ask What should I call you?');
    const form = page.locator('form.form').last();
    await form.waitFor({ timeout: 20_000 });
    await form.locator('textarea[name="answer"]').fill('Countess');
    await form.locator('button[value="submit"]').click();
    await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 20_000 }).toContain('You answered: "Countess"');
    await idle();

    // An annotation answers a similar question instead of the agent once annotation reply is on.
    await page.fill('#ann-question', 'What are your opening hours?');
    await page.fill('#ann-content', 'Nine to five, every weekday.');
    await page.click('#ann-add');
    await expect.poll(() => page.locator('#ann-list li').textContent()).toContain('Nine to five, every weekday.');
    await page.check('#ann-enabled');
    await page.fill('#ann-threshold', '0.5');
    await page.click('#ann-apply');
    await expect.poll(status).toBe('Annotation reply on (threshold 0.5).');
    await send('What are your opening hours?');
    await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 20_000 }).toBe('Nine to five, every weekday.');
    await idle();

    await send('/slow 300 a b c d e f g h i j k l m n o p');
    await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 20_000 }).toMatch(/a/);
    // A reload mid-turn: the page re-attaches to the running debugger turn (console events route), then stops it.
    await page.reload();
    await expect.poll(() => page.locator('#stop').isEnabled(), { timeout: 20_000 }).toBe(true);
    await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 20_000 }).toContain('"a b');
    await page.click('#stop');
    await idle();
    await expect.poll(() => lastAgent().getAttribute('class')).toContain('stopped');
    const stoppedId = (await lastAgent().getAttribute('data-message-id'))!;
    const row = await stack.db.message.findUniqueOrThrow({ where: { id: stoppedId } });
    expect(row.status).toBe('stopped');
    expect(row.invoke_from).toBe('debugger');
    expect(row.answer).not.toContain('o p"');
    // Every debugger turn ran on the shared draft (and so with the saved prompt), not on the published version.
    const runs = await stack.db.message.findMany({ where: { invoke_from: 'debugger' } });
    expect(runs.length).toBeGreaterThanOrEqual(5);
    await shot('studio-debugger.png');
  });

  it('opens the inspector of a turn: the agent log timeline, usage, the backend run and the Temporal UI link', async () => {
    const calc = page.locator('.msg.agent', { hasText: '42' }).first();
    const messageId = (await calc.getAttribute('data-message-id'))!;
    await calc.locator('.inspect').click();
    await expect.poll(() => page.locator('#timeline .iteration').count()).toBeGreaterThanOrEqual(2);
    const call = page.locator('#timeline .tool-call').first();
    expect(await call.locator('.tool-head').textContent()).toContain('calculator · success');
    expect(await call.locator('.tool-input').textContent()).toContain('6*7');
    expect(await call.locator('.tool-output').textContent()).toContain('42');
    expect(await page.locator('#timeline .iteration-head').first().textContent()).toMatch(/Iteration 1 · \d+ tokens/);
    const facts = await page.locator('#run-facts').textContent();
    const backendRun = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    expect(facts).toContain(backendRun.backend_run_id!);
    expect(facts).toContain(`agent-turn-${messageId}`);
    expect(facts).toContain('succeeded');
    const answer = page.locator('#run-facts dt', { hasText: /^answer$/ }).locator('xpath=following-sibling::dd[1]');
    expect(await answer.textContent()).toBe(await calc.locator('.text').textContent());

    const link = page.locator('#temporal-link');
    expect(await link.isVisible()).toBe(true);
    const href = (await link.getAttribute('href'))!;
    expect(href).toBe(`${UI}/namespaces/default/workflows/agent-turn-${messageId}`);
    // The link names the turn's real workflow.
    const workflowId = decodeURIComponent(href.split('/workflows/')[1]!);
    expect((await stack.temporal.workflow.getHandle(workflowId).describe()).status.name).toBe('COMPLETED');
    await shot('studio-inspector.png');
    expect(failures).toEqual([]);
  });
});
