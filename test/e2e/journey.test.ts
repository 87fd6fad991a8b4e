/**
 * One person's whole journey in a browser (issue 34 "Done when"), from the studio link `npm start` prints
 * (stack/links.ts, the same function stack/dev.ts prints with) and nothing else: open the studio, create an agent
 * (New agent) with a prompt; give it a document (the Datasets screen: create a dataset, upload a Markdown file, wait
 * until it is indexed) and an API tool (the Tool providers screen: import an OpenAPI document served by a loopback
 * server in this test, whose preview lists its operation, with a bearer secret, and tick its tool for the agent;
 * TOOL_ALLOW_PRIVATE_NETWORK lets the tool reach loopback here); in the agent form turn on the shell and pick the
 * dataset by name in the knowledge section; save and publish; create its API key and open its chat page from the
 * key's link — on a phone-sized screen — chat: the shell call as a thought, an ask_human form answered, a question
 * answered from the document (the demo model's `/kb` cites the passages retrieval gave it, the citations card names the
 * document), the API tool called (its
 * server gets the call with the secret), a long turn stopped; then back in the studio find that conversation in the
 * logs (its stopped turn) and open a turn in the inspector; and fork the conversation at the document answer from the
 * chat page, going on from there. Every step goes through the pages (nothing is set up
 * behind them). Real Chromium, the real stack, the demo model; screenshots of each step go to
 * test-results/screenshots (CI artifacts), axe-core runs on each page.
 */
import http from 'node:http';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageLinks } from '../../stack/links.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, chromiumPath, launchChromium, screenshot, watchPage } from '../support/browser.js';
import { startTestStack } from '../support/stack.js';
import { closeLocal, listenLocal, studioScreen } from '../support/studio-page.js';

let stack: Stack;
let browser: Browser;
let context: BrowserContext;
const failures: string[] = [];
let weather: http.Server;
let weatherUrl = '';
/** What the weather API got: each call's path and query, and its Authorization header. */
const weatherCalls: { url: string; auth: string | undefined }[] = [];
const WEATHER_SECRET = 'wx-journey-secret-24680';
/** A fact only the uploaded document holds. */
const FACT = 'The night train to Lisbon leaves from platform 9 at 23:47 and its dining car serves pastéis de nata.';

/** The weather API the agent's tool calls (loopback, this process). */
const WEATHER_OPENAPI = () => ({
  openapi: '3.0.0',
  info: { title: 'Weather', version: '1' },
  servers: [{ url: weatherUrl }],
  paths: {
    '/forecast': {
      get: {
        operationId: 'getForecast',
        summary: 'Tomorrow’s weather in a city',
        parameters: [{ name: 'city', in: 'query', required: true, schema: { type: 'string' } }],
        responses: { '200': { description: 'The forecast.' } },
      },
    },
  },
});

describe.runIf(chromiumPath)('a journey from the printed studio link to a conversation in the logs', () => {
  beforeAll(async () => {
    weather = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      weatherCalls.push({ url: u.pathname + u.search, auth: req.headers.authorization });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ forecast: `${u.searchParams.get('city')}: sunny, 24 °C` }));
    });
    weatherUrl = await listenLocal(weather);
    // SHELLCTL_AUTH_TOKEN: the agent's shell (as npm start generates it; test stacks set their own secrets).
    // TOOL_ALLOW_PRIVATE_NETWORK: the API tool's server is this test's loopback one.
    stack = await startTestStack('journey', { env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', TOOL_ALLOW_PRIVATE_NETWORK: true } });
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await closeLocal(weather);
  });

  it('creates an agent, gives it a document, an API tool and the shell, publishes it, chats on a phone (shell, form, document with its citation, tool, stop), finds it in the logs and forks it', async () => {
    const studio = await context.newPage();
    watchPage(studio, failures, (s, url) => s === 404 && url.endsWith('/agent/build-draft'));
    await studio.goto(pageLinks(stack).studio);
    await studio.locator('#apps li.active').waitFor({ timeout: 30_000 });
    const say = () => studio.locator('#status').textContent();

    // 1. A new agent, with its first prompt.
    await studio.click('aside button.new-app');
    await expect.poll(() => studio.locator('#na-model option').count()).toBeGreaterThan(0);
    await studio.fill('#na-name', 'Trip planner');
    await studio.fill('#na-icon', '🧭');
    await studio.fill('#na-description', 'Plans trips and asks before it books.');
    await studio.fill('#na-prompt', 'You plan trips. Ask the traveller before you decide anything.');
    await studio.click('#na-form button[type="submit"]');
    await expect.poll(() => studio.locator('#apps li.active').textContent()).toBe('Trip planner');
    await expect.poll(() => studio.inputValue('#f-prompt')).toBe('You plan trips. Ask the traveller before you decide anything.');
    await screenshot(studio, 'journey-1-created.png');

    // 2. A document: a new dataset, a Markdown file uploaded into it, indexed.
    await studioScreen(studio, 'datasets');
    await studio.fill('#ds-new-name', 'Trip notes');
    await studio.click('#ds-create button[type="submit"]');
    await expect.poll(say).toBe('Created the dataset Trip notes.');
    await studio.setInputFiles('#ds-file', {
      name: 'trip-notes.md',
      mimeType: 'text/markdown',
      buffer: Buffer.from(`# Getting to Lisbon\n\n${FACT}\n\nBook a couchette: the seats sell out by noon.\n`),
    });
    await studio.click('#ds-upload button');
    const doc = studio.locator('#ds-docs tbody tr', { hasText: 'trip-notes.md' });
    await expect.poll(() => doc.locator('.badge').textContent(), { timeout: 60_000 }).toBe('completed');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-2-document.png');

    // 3. An API tool: an OpenAPI document imported (its operation previewed first), a bearer secret; its tool ticked.
    await studioScreen(studio, 'tools');
    await studio.fill('#tp-oa-name', 'weather');
    await studio.fill('#tp-oa-doc', JSON.stringify(WEATHER_OPENAPI(), null, 2));
    await expect.poll(() => studio.locator('#tp-oa-preview li').textContent()).toContain('getForecast GET /forecast');
    await studio.selectOption('#tp-oa-auth', 'bearer');
    await studio.fill('#tp-oa-secret', WEATHER_SECRET);
    await studio.click('#tp-openapi button[type="submit"]');
    await expect.poll(say).toBe('Imported weather: 1 tool.');
    await studio.locator('#tp-list article[data-provider="weather"] input[data-tool="weather__getForecast"]').check();
    await expect.poll(say).toBe('The agent’s draft may call weather__getForecast.');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-3-tool.png');

    // 4. The agent form: the tool is there; the shell (in the agent's workspace) and the dataset, picked by its name
    // in the knowledge section; ask_human on (the default); saved and published.
    await studioScreen(studio, 'agent');
    await expect.poll(() => studio.locator('#f-plugin-tools').textContent()).toContain('weather__getForecast');
    expect(await studio.isChecked('#f-ask-human')).toBe(true);
    await studio.check('#f-runtime');
    await studio.check('#f-shell');
    const dataset = studio.locator('#f-datasets label', { hasText: 'Trip notes' }).locator('input');
    await dataset.waitFor({ timeout: 10_000 });
    expect(await studio.isChecked('#f-knowledge')).toBe(false);
    await dataset.check();
    // Picking a dataset turns retrieval on.
    expect(await studio.isChecked('#f-knowledge')).toBe(true);
    await studio.click('#save');
    await expect.poll(say).toMatch(/^Saved \(DRAFT revision \d+\)\.$/);
    await studio.click('#publish');
    await expect.poll(say).toBe('Published version 2.');
    await expect.poll(() => studio.locator('#versions li.active').textContent()).toContain('v2 (active)');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-4-published.png');
    const app = await stack.db.app.findFirstOrThrow({
      where: { name: 'Trip planner' },
      include: { agent: { include: { active_config_snapshot: true } } },
    });
    const ds = await stack.db.dataset.findFirstOrThrow({ where: { name: 'Trip notes' } });
    expect(app.agent!.active_config_snapshot!.config_snapshot).toMatchObject({
      runtime: { enabled: true },
      shell: { enabled: true },
      knowledge: { enabled: true, dataset_ids: [ds.id] },
      tools: { plugin: [expect.objectContaining({ provider: 'weather', name: 'getForecast' })] },
    });

    // 5. Its API key, and its chat page from the key's link (a new tab), on a phone-sized screen.
    await studio.click('#screens button[data-screen="keys"]');
    await studio.fill('#key-name', 'web');
    await studio.click('#key-create button[type="submit"]');
    const [chat] = await Promise.all([context.waitForEvent('page'), studio.click('#key-new a.open-chat')]);
    watchPage(chat, failures);
    await chat.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => chat.locator('#app-name').textContent(), { timeout: 20_000 }).toBe('Trip planner');
    expect(chat.url()).not.toContain('key=');
    const last = () => chat.locator('.msg.agent').last();
    const lastText = () => last().locator('.text').textContent();
    const idle = () => expect.poll(() => chat.locator('#stop').isDisabled(), { timeout: 60_000 }).toBe(true);
    const send = async (text: string) => {
      await chat.fill('#query', text);
      await chat.click('#send');
    };

    /** Sends `query`; the answer has `result`, and the call of `tool` shows as a thought with it. */
    const toolTurn = async (query: string, tool: string, result: string) => {
      await send(query);
      await expect.poll(lastText, { timeout: 60_000 }).toContain(result);
      await idle();
      const card = last().locator('.thought.tool').first();
      expect(await card.textContent()).toContain(tool);
      await expect.poll(() => card.locator('.tool-result').textContent()).toContain(result);
    };

    // 6. Chat: the shell runs in the agent's workspace, shown as a thought.
    await toolTurn('/sh echo packing list ready', 'shell', 'packing list ready');
    await screenshot(chat, 'journey-5-chat-shell-phone.png');

    // 7. An ask_human form, answered in the page; the agent goes on with the answer.
    await send('/ask Where do you want to go?');
    const form = chat.locator('form.form').last();
    await form.waitFor({ timeout: 30_000 });
    await screenshot(chat, 'journey-6-form-phone.png');
    await form.locator('textarea[name="answer"]').fill('Lisbon');
    await form.locator('button[value="submit"]').click();
    await expect.poll(lastText, { timeout: 30_000 }).toContain('You answered: "Lisbon"');
    await idle();
    // The question's card says it was answered.
    expect(await chat.locator('.thought.tool .tool-state').allTextContents()).not.toContain('waiting for your answer');

    // 8. A question the document answers: retrieval gives the model its passage, and the answer cites it — by number,
    // with the citations card under it naming the document (issue 42 problem 6).
    await send('/kb When does the night train to Lisbon leave?');
    await expect.poll(lastText, { timeout: 60_000 }).toContain('From the knowledge base:');
    await idle();
    expect(await lastText()).toContain('platform 9 at 23:47');
    expect(await lastText()).toContain('[1]');
    const cited = chat.locator('.msg.agent').last().locator('.citations .citation').first();
    await expect.poll(() => cited.locator('.citation-doc').textContent(), { timeout: 20_000 }).toBe('trip-notes.md');
    await cited.locator('summary').click();
    expect(await cited.locator('.citation-text').textContent()).toContain('platform 9 at 23:47');
    await screenshot(chat, 'journey-7-document-answer-phone.png');

    // 9. A question for the API tool: its call shows as a thought with its result, and the weather API got it with the secret.
    await toolTurn('/tool weather__getForecast {"city":"Lisbon"}', 'weather__getForecast', 'Lisbon: sunny, 24 °C');
    expect(weatherCalls).toEqual([{ url: '/forecast?city=Lisbon', auth: `Bearer ${WEATHER_SECRET}` }]);
    expect(await axeViolations(chat)).toEqual([]);
    await screenshot(chat, 'journey-8-api-tool-phone.png');

    // 10. A long answer, stopped while it streams.
    await send('/slow 60 /long 400');
    await expect.poll(async () => ((await lastText()) ?? '').split(/\s+/).filter(Boolean).length, { timeout: 30_000 }).toBeGreaterThan(5);
    await chat.click('#stop');
    await expect.poll(() => last().getAttribute('class'), { timeout: 30_000 }).toContain('stopped');
    await idle();
    expect(((await lastText()) ?? '').split(/\s+/).filter(Boolean).length).toBeLessThan(400);
    expect(await axeViolations(chat)).toEqual([]);
    await screenshot(chat, 'journey-9-stopped-phone.png');

    // 11. Back in the studio: the logs (a screen of their own, issue 42) list the conversation (an end user's, with the
    // stopped turn) and the inspector opens a turn.
    await studio.bringToFront();
    await studio.click('#screens button[data-screen="logs"]');
    await studio.selectOption('#log-status', 'stopped');
    const rows = studio.locator('#log-table tbody tr');
    // The stop lands in the database as the turn's workflow ends: filter again until the list has it.
    await expect
      .poll(
        async () => {
          await studio.click('#log-filters button[type="submit"]');
          await studio.waitForTimeout(300);
          return rows.allTextContents();
        },
        { timeout: 30_000 },
      )
      // The conversation is named from its first message without the leading trigger (issue 42).
      .toEqual([expect.stringMatching(/^echo packing list ready/)]);
    await rows.first().locator('button.link').click();
    const detail = studio.locator('#log-messages');
    await expect.poll(() => detail.locator('.msg.agent').count()).toBe(6);
    expect(await detail.textContent()).toContain('You answered: "Lisbon"');
    expect(await detail.textContent()).toContain('platform 9 at 23:47');
    expect(await detail.textContent()).toContain('Lisbon: sunny, 24 °C');
    expect(await detail.locator('.msg.agent.stopped').count()).toBe(1);
    await detail.locator('.msg.agent').first().locator('button.inspect').click();
    await expect.poll(() => studio.locator('#inspector').isVisible()).toBe(true);
    await expect.poll(() => studio.locator('#timeline').textContent()).toContain('shell');
    expect(await studio.locator('#run-facts').textContent()).toContain('succeeded');
    expect(await axeViolations(studio)).toEqual([]);
    await screenshot(studio, 'journey-10-logs.png');

    // The database agrees: one conversation of the new app, from the chat page's end user, its last turn stopped.
    const convs = await stack.db.conversation.findMany({
      where: { app_id: app.id },
      include: { messages: { orderBy: { created_at: 'asc' } } },
    });
    expect(convs).toHaveLength(1);
    expect(convs[0]!.messages.map((m) => m.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded', 'stopped']);

    // 12. Back in the chat: fork the conversation at the document answer (issue 42): the fork opens in the sidebar,
    // its history ends with that answer (its citations too), and its next turn goes on from there, not from the stop.
    await chat.bringToFront();
    const documentAnswer = chat.locator('.msg.agent', { hasText: 'From the knowledge base:' });
    await documentAnswer.locator('button.fork').click();
    await expect.poll(() => chat.locator('#conversations li').count(), { timeout: 20_000 }).toBe(2);
    await expect
      .poll(() => chat.locator('#conversations li.active button.open').textContent(), { timeout: 20_000 })
      .toMatch(/^echo packing list ready.* \(fork\)$/);
    await expect.poll(() => lastText(), { timeout: 20_000 }).toContain('platform 9 at 23:47');
    expect(await chat.locator('.msg.agent').count()).toBe(4);
    expect(await last().locator('.citations .citation-doc').first().textContent()).toBe('trip-notes.md');
    await send('/echo-history');
    await expect.poll(lastText, { timeout: 60_000 }).toContain('Your messages so far');
    await idle();
    expect(await lastText()).toContain('When does the night train to Lisbon leave?');
    expect(await lastText()).not.toContain('weather__getForecast');
    expect(await lastText()).not.toContain('/long 400');
    expect(await axeViolations(chat)).toEqual([]);
    await screenshot(chat, 'journey-11-fork-phone.png');
    expect(failures).toEqual([]);
  }, 300_000);
});
