/**
 * The studio's screens in a browser (issue 34 item 2): real Chromium on /studio against the real stack and the demo
 * model, at a desktop and a phone size. The agent screen puts config and debugger side by side (desktop) or stacks
 * them (phone). Datasets: create one, upload a document (with its progress bar), see it indexed, hit-test it with
 * scores, attach it to the agent, and the debugger answers from it (/kb). Tools: import an OpenAPI provider served by
 * a local HTTP server in this test (its operations previewed first; TOOL_ALLOW_PRIVATE_NETWORK lets tools reach
 * loopback here), tick its tool for the agent, and the debugger calls it; connect an MCP server and refresh its tools. Versions: restore a past one into the draft
 * and publish it again. API keys: create one, revoke it, and /v1 then answers 401 for it. Models: add a credential
 * for a fake OpenAI server (test/llm/providers), validate it, pick its model with its features shown. axe-core finds
 * no serious violation on any screen; screenshots of each go to test-results/screenshots (CI artifacts).
 */
import http from 'node:http';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { axeViolations as axeOf, chromiumPath, screenshot } from '../support/browser.js';
import { checkPhoneScreens, closeLocal, listenLocal, openStudio, studioScreen } from '../support/studio-page.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeProvider, type FakeProvider } from '../llm/providers/fake-providers.js';
import { pathToFileURL } from 'node:url';
import { AnthropicCredentials } from '../../core/domain/llm/providers/anthropic.js';
import { AzureCredentials } from '../../core/domain/llm/providers/azure.js';
import { BedrockCredentials } from '../../core/domain/llm/providers/bedrock.js';
import { GoogleCredentials } from '../../core/domain/llm/providers/google.js';
import { OllamaCredentials } from '../../core/domain/llm/providers/ollama.js';
import { OpenAiCompatibleCredentials } from '../../core/domain/llm/providers/openai-compatible.js';
import { OpenAiCredentials } from '../../core/domain/llm/providers/openai.js';
import { startTestStack } from '../support/stack.js';
import { FrameReader, postChat } from '../support/sse.js';

const OPENAI_KEY = 'sk-studio-openai-0123456789';

let stack: Stack;
let browser: Browser;
let page: Page;
let toolServer: http.Server;
let toolUrl = '';
let openai: FakeProvider;
let mcpServer: http.Server;
let mcpUrl = '';
/** The MCP server's tools: `subtract` appears once the test adds it (then a refresh lists it). */
let mcpHasSubtract = false;
const mcpAuth: (string | undefined)[] = [];
const toolCalls: string[] = [];
const failures: string[] = [];

const shot = (name: string) => screenshot(page, name);
/** axe-core's serious and critical violations of the page (or of the element `within` names), the logs section included. */
const axeViolations = (within?: string) => axeOf(page, within);

/** The inventory API the OpenAPI tool calls (loopback, this process). */
const INVENTORY_OPENAPI = () => ({
  openapi: '3.0.0',
  info: { title: 'Inventory', version: '1' },
  servers: [{ url: toolUrl }],
  paths: {
    '/stock': {
      get: {
        operationId: 'getStock',
        summary: 'How many of an item are in stock',
        parameters: [{ name: 'item', in: 'query', required: true, schema: { type: 'string' } }],
        responses: { '200': { description: 'The count.' } },
      },
    },
  },
});

const status = () => page.locator('#status').textContent();
const lastAgent = () => page.locator('.msg.agent').last();
const idle = () => expect.poll(() => page.locator('#send').isEnabled(), { timeout: 30_000 }).toBe(true);
const screen = (name: string) => studioScreen(page, name);
async function ask(text: string) {
  await screen('agent');
  // A new conversation: the draft's layers changed since the last one (a retained session would refuse them).
  await page.click('#new-debug');
  await page.fill('#query', text);
  await page.click('#send');
  await expect.poll(() => lastAgent().locator('.text').textContent(), { timeout: 30_000 }).not.toBe('');
  await idle();
  return (await lastAgent().locator('.text').textContent()) ?? '';
}

describe.runIf(chromiumPath)('the studio’s screens in a browser', () => {
  beforeAll(async () => {
    toolServer = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      toolCalls.push(u.pathname + u.search);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ result: `${u.searchParams.get('item')}: 17 in stock` }));
    });
    toolUrl = await listenLocal(toolServer);
    openai = await startFakeProvider('openai-responses');
    // A stateless MCP server over streamable HTTP (as test/integration/provider-tools.test.ts runs it).
    mcpServer = http.createServer(async (req, res) => {
      mcpAuth.push(req.headers.authorization);
      const server = new McpServer({ name: 'studio-calc', version: '1.0.0' });
      server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
        content: [{ type: 'text', text: `sum is ${a + b}` }],
      }));
      if (mcpHasSubtract)
        server.registerTool('subtract', { description: 'Subtract', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
          content: [{ type: 'text', text: `difference is ${a - b}` }],
        }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
    });
    mcpUrl = `${await listenLocal(mcpServer)}/mcp`;
    stack = await startTestStack('studio_screens', { env: { TOOL_ALLOW_PRIVATE_NETWORK: true, DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
    ({ browser, page } = await openStudio(stack, failures));
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await openai?.close();
    await closeLocal(toolServer);
    await closeLocal(mcpServer);
  });

  it('the agent screen: config and debugger side by side on a desktop', async () => {
    await expect.poll(() => page.inputValue('#f-prompt')).not.toBe('');
    const editor = (await page.locator('#editor').boundingBox())!;
    const debug = (await page.locator('#debugger').boundingBox())!;
    expect(debug.x).toBeGreaterThan(editor.x + editor.width - 1);
    expect(Math.abs(debug.y - editor.y)).toBeLessThan(40);
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-agent-desktop.png');
  });

  it('datasets: creates one, uploads a document with progress, sees it indexed, hit-tests it, attaches it; the debugger answers from it', async () => {
    await screen('datasets');
    await page.fill('#ds-new-name', 'Handbook');
    await page.click('#ds-create button[type="submit"]');
    await expect.poll(status).toBe('Created the dataset Handbook.');
    await page.setInputFiles('#ds-file', {
      name: 'handbook.md',
      mimeType: 'text/markdown',
      buffer: Buffer.from('# Office\n\nThe office parrot is called Captain Zebulon and sings every Tuesday morning.\n'),
    });
    await page.click('#ds-upload button');
    await expect.poll(() => page.locator('#ds-upload-status').textContent(), { timeout: 30_000 }).toMatch(/handbook\.md(:| uploaded)/);
    expect(await page.locator('#ds-progress').getAttribute('value')).toBe('100');
    const row = page.locator('#ds-docs tbody tr', { hasText: 'handbook.md' });
    await expect.poll(() => row.locator('.badge').textContent(), { timeout: 30_000 }).toBe('completed');
    expect(await page.locator('#ds-pager').textContent()).toContain('(1 document)');

    await page.fill('#ds-hit-query', 'What is the parrot called?');
    await page.click('#ds-hit button[type="submit"]');
    const hit = page.locator('#ds-hits li').first();
    await expect.poll(() => hit.textContent()).toContain('Captain Zebulon');
    expect(Number(await hit.locator('.score').textContent())).toBeGreaterThan(0);

    await page.click('#ds-actions button:has-text("Attach to the agent")');
    await expect.poll(status).toBe('Attached Handbook to the agent’s draft.');
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-datasets-desktop.png');
    // The agent screen's form shows the saved draft.
    await expect.poll(() => page.isChecked('#f-knowledge')).toBe(true);

    const answer = await ask('/kb What is the parrot called?');
    expect(answer).toContain('From the knowledge base:');
    expect(answer).toContain('Captain Zebulon');
  }, 120_000);

  it('tools: imports an OpenAPI provider from a preview of its operations, picks its tool for the agent; the debugger calls it', async () => {
    await screen('tools');
    await page.fill('#tp-oa-name', 'inventory');
    await page.fill('#tp-oa-doc', JSON.stringify(INVENTORY_OPENAPI(), null, 2));
    await expect.poll(() => page.locator('#tp-oa-preview li').textContent()).toContain('getStock GET /stock');
    await page.selectOption('#tp-oa-auth', 'bearer');
    await page.fill('#tp-oa-secret', 'inv-secret-123456789');
    await page.click('#tp-openapi button[type="submit"]');
    await expect.poll(status).toBe('Imported inventory: 1 tool.');
    const card = page.locator('#tp-list article[data-provider="inventory"]');
    const masked = (await card.locator('.masked').textContent()) ?? '';
    expect(masked).toContain('bearer');
    expect(masked).not.toContain('inv-secret-123456789');
    await card.locator('input[data-tool="inventory__getStock"]').check();
    await expect.poll(status).toBe('The agent’s draft may call inventory__getStock.');
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-tools-desktop.png');

    const answer = await ask('/tool inventory__getStock {"item":"widgets"}');
    expect(answer).toContain('widgets: 17 in stock');
    expect(toolCalls).toContain('/stock?item=widgets');
  }, 120_000);

  it('tools: connects an MCP server (its header masked) and refreshes its tools', async () => {
    await screen('tools');
    await page.fill('#tp-mcp-name', 'calc');
    await page.fill('#tp-mcp-url', mcpUrl);
    await page.fill('#tp-mcp-auth', 'Bearer mcp-secret-987654321');
    await page.click('#tp-mcp button[type="submit"]');
    await expect.poll(status).toBe('Connected calc: 1 tool.');
    expect(mcpAuth).toContain('Bearer mcp-secret-987654321');
    const card = page.locator('#tp-list article[data-provider="calc"]');
    await expect
      .poll(() => card.locator('input[data-tool]').evaluateAll((boxes) => boxes.map((b) => (b as HTMLInputElement).dataset.tool)))
      .toEqual(['calc__add']);
    const masked = (await card.locator('.masked').textContent()) ?? '';
    expect(masked).toContain('Authorization');
    expect(masked).not.toContain('mcp-secret-987654321');
    mcpHasSubtract = true;
    await card.locator('button:has-text("Refresh tools")').click();
    await expect.poll(status).toBe('calc: 2 tools.');
    await expect.poll(() => page.locator('#tp-list article[data-provider="calc"] input[data-tool="calc__subtract"]').count()).toBe(1);
  }, 60_000);

  it('versions: loads a past version into the draft and publishes it again', async () => {
    // Publish the draft (knowledge + tool) as a new version; v1 is the seeded one.
    await screen('agent');
    await page.click('#publish');
    await expect.poll(status).toMatch(/^Published version \d+\.$/);
    await screen('versions');
    const v1 = page.locator('#ver-table tbody tr[data-version="1"]');
    await v1.waitFor();
    expect(await page.locator('#ver-table tbody tr.active').getAttribute('data-version')).toBe('2');
    await v1.locator('button:has-text("Load into draft")').click();
    await expect.poll(status).toBe('Loaded v1 into the shared draft.');
    await expect.poll(() => page.isChecked('#f-knowledge')).toBe(false);
    await v1.locator('button:has-text("Publish again")').click();
    await expect.poll(status).toBe('Published v1 again as v3.');
    await expect.poll(() => page.locator('#ver-table tbody tr.active').getAttribute('data-version')).toBe('3');
    // The agent screen's versions list follows.
    await expect.poll(() => page.locator('#versions li.active').textContent()).toContain('v3 (active)');
    expect(await page.locator('#ver-table tbody tr[data-version="2"]').textContent()).toContain('knowledge on (1 dataset)');
    const agent = await stack.db.agent.findUniqueOrThrow({ where: { id: stack.demo!.agentId }, include: { active_config_snapshot: true } });
    const v1Row = await stack.db.agentConfigVersion.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, version: 1 } });
    expect(agent.active_config_snapshot!.config_snapshot).toEqual(v1Row.config_snapshot);
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-versions-desktop.png');
  }, 60_000);

  it('API keys: creates one (shown once), revokes it; the key then gets 401', async () => {
    await screen('keys');
    await page.fill('#key-name', 'ci');
    await page.click('#key-create button[type="submit"]');
    const key = ((await page.locator('#key-new code').textContent({ timeout: 10_000 })) ?? '').trim();
    expect(key).toMatch(/^app-/);
    const v1 = () => fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    expect(await v1()).toBe(200);
    const row = page.locator('#key-table tbody tr', { hasText: 'ci' });
    expect(await row.textContent()).not.toContain(key);
    await row.locator('button:has-text("Revoke")').click();
    await expect.poll(() => row.locator('.badge').textContent()).toContain('revoked');
    expect(await v1()).toBe(401);
    // The seeded key still works.
    expect((await fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${stack.demo!.apiKey}` } })).status).toBe(200);
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-keys-desktop.png');
  });

  it('API keys: revoking with "also stops the turns" ticked stops the turn the key started (waiting for a human), and says so', async () => {
    await screen('keys');
    // The previous case's key may still be shown: wait for this one's.
    const shown = () =>
      page
        .locator('#key-new code')
        .textContent({ timeout: 10_000 })
        .catch(() => '');
    const before = await shown();
    await page.fill('#key-name', 'busy');
    await page.click('#key-create button[type="submit"]');
    await expect.poll(shown, { timeout: 10_000 }).not.toBe(before);
    const key = ((await shown()) ?? '').trim();
    // A turn of that key waiting for a human (ask_human): it would wait for hours.
    const res = await postChat(stack.apiUrl, key, { query: '/ask Which plan?', user: 'busy-user' });
    expect(res.status, await res.clone().text()).toBe(200);
    const reader = new FrameReader(res);
    const head = await reader.read((f) => f.event === 'human_input_required');
    expect(head.at(-1)?.event).toBe('human_input_required');
    const taskId = head[0]!.data.task_id as string;
    await expect.poll(async () => (await stack.db.message.findUniqueOrThrow({ where: { id: taskId } })).status).toBe('paused');
    await page.check('#key-stop-turns');
    const row = page.locator('#key-table tbody tr', { hasText: 'busy' });
    await row.locator('button:has-text("Revoke")').click();
    await expect.poll(status, { timeout: 20_000 }).toMatch(/^Revoked busy \(app-.*…\); stopped 1 turn\.$/);
    await expect.poll(() => row.locator('.badge').textContent()).toContain('revoked');
    await expect
      .poll(async () => (await stack.db.message.findUniqueOrThrow({ where: { id: taskId } })).status, { timeout: 30_000 })
      .toBe('stopped');
    await page.uncheck('#key-stop-turns');
    expect(await axeViolations()).toEqual([]);
  }, 60_000);

  it('models: adds a credential for a provider (validated), sees it masked, picks its model with its features', async () => {
    await screen('models');
    const card = page.locator('#mp-list article[data-provider="openai"]');
    await card.locator('input[aria-label="openai API key"]').fill(OPENAI_KEY);
    await card.locator('input[aria-label="openai Base URL"]').fill(`${openai.url}/v1`);
    await card.locator('button:has-text("Validate")').click();
    await expect.poll(() => card.locator('[role="status"]').textContent()).toBe('Valid: a real call worked.');
    await card.locator('button:has-text("Add")').click();
    await expect.poll(status).toBe('Saved the openai credentials (checked with a real call).');
    const saved = page.locator('#mp-list article[data-provider="openai"]');
    await expect.poll(() => saved.locator('.masked').textContent()).toContain('sk-…6789');
    expect(await saved.textContent()).not.toContain(OPENAI_KEY);
    expect(await saved.locator('.badge').textContent()).toBe('usable');

    await page.selectOption('#mp-provider', 'openai');
    await expect.poll(() => page.locator('#mp-model option').count()).toBeGreaterThan(0);
    await page.selectOption('#mp-model', 'gpt-4o-mini');
    await expect.poll(() => page.locator('#mp-features').textContent()).toContain('tool calls');
    await page.click('#mp-pick button[type="submit"]');
    await expect.poll(status).toBe('The agent’s draft now uses openai / gpt-4o-mini.');
    await expect.poll(() => page.inputValue('#f-model')).toBe('gpt-4o-mini');
    expect(await axeViolations()).toEqual([]);
    await shot('studio-screens-models-desktop.png');

    // Rotate (a new key) and delete.
    await saved.locator('input[aria-label="openai API key"]').fill('sk-studio-rotated-99999');
    await saved.locator('input[aria-label="openai Base URL"]').fill(`${openai.url}/v1`);
    await saved.locator('button:has-text("Rotate")').click();
    await expect.poll(() => page.locator('#mp-list article[data-provider="openai"] .masked').textContent()).toContain('9999');
  }, 60_000);

  it('models: each provider’s form asks for the fields its credential schema declares (demo: no form)', async () => {
    const fieldsFile = pathToFileURL(path.join(import.meta.dirname, '../../web/studio-model-fields.js')).href;
    const { CREDENTIAL_FIELDS } = (await import(fieldsFile)) as {
      CREDENTIAL_FIELDS: Record<string, { key: string; secret?: boolean; required?: boolean }[]>;
    };
    // The page's table agrees with the server's schemas: every field it asks for is one the schema takes, and
    // every field the schema requires is asked for (left out on purpose: `models`, openai's organization / api,
    // Ollama's optional api_key: see web/studio-model-fields.js).
    const schemas = {
      openai: OpenAiCredentials,
      anthropic: AnthropicCredentials,
      google: GoogleCredentials,
      azure: AzureCredentials,
      bedrock: BedrockCredentials,
      ollama: OllamaCredentials,
      openai_compatible: OpenAiCompatibleCredentials,
    };
    expect(Object.keys(CREDENTIAL_FIELDS).sort()).toEqual(['demo', ...Object.keys(schemas)].sort());
    expect(CREDENTIAL_FIELDS.demo).toEqual([]);
    for (const [provider, schema] of Object.entries(schemas)) {
      const shape = schema.shape as Record<string, { isOptional(): boolean }>;
      const asked = CREDENTIAL_FIELDS[provider].map((f) => f.key);
      for (const key of asked) expect(Object.keys(shape), `${provider}.${key}`).toContain(key);
      for (const [key, t] of Object.entries(shape)) if (!t.isOptional()) expect(asked, `${provider} requires ${key}`).toContain(key);
      for (const f of CREDENTIAL_FIELDS[provider])
        expect(f.required ?? false, `${provider}.${f.key} required`).toBe(!shape[f.key].isOptional());
    }

    await screen('models');
    const fieldsOf = (provider: string) =>
      page
        .locator(`#mp-list article[data-provider="${provider}"] input[data-field]`)
        .evaluateAll((inputs) => inputs.map((i) => `${(i as HTMLInputElement).dataset.field}:${(i as HTMLInputElement).type}`));
    await page.locator('#mp-list article[data-provider="demo"]').waitFor();
    // demo: no credentials, no form.
    const demo = page.locator('#mp-list article[data-provider="demo"]');
    expect(await demo.locator('input, button').count()).toBe(0);
    expect(await demo.textContent()).toContain('Takes no credentials.');
    // Ollama: a base URL, no key.
    expect(await fieldsOf('ollama')).toEqual(['base_url:url']);
    expect(await page.locator('#mp-list article[data-provider="ollama"] input[aria-label="ollama API key"]').count()).toBe(0);
    expect(await fieldsOf('azure')).toEqual(['api_key:password', 'resource_name:text', 'base_url:url', 'api_version:text']);
    expect(await fieldsOf('bedrock')).toEqual([
      'region:text',
      'access_key_id:password',
      'secret_access_key:password',
      'session_token:password',
      'base_url:url',
    ]);
    // A Bedrock save with a bad region is refused by the server's schema (it got the field names the schema takes).
    const bedrock = page.locator('#mp-list article[data-provider="bedrock"]');
    await bedrock.locator('input[data-field="region"]').fill('nowhere');
    await bedrock.locator('input[data-field="access_key_id"]').fill('AKIAEXAMPLE0000');
    await bedrock.locator('input[data-field="secret_access_key"]').fill('bedrock-secret-0123456789');
    const put = page.waitForResponse((r) => r.url().endsWith('/model-providers/bedrock/credentials') && r.request().method() === 'PUT');
    await bedrock.locator('button:has-text("Add")').click();
    const res = await put;
    expect(res.status()).toBe(400);
    expect(res.request().postDataJSON()).toEqual({
      credentials: { region: 'nowhere', access_key_id: 'AKIAEXAMPLE0000', secret_access_key: 'bedrock-secret-0123456789' },
    });
    await expect.poll(status).toContain('region');
    // That 400 was the point: not a failure of the page.
    const expected = failures.findIndex((f) => f.startsWith('400 ') && f.endsWith('/model-providers/bedrock/credentials'));
    expect(expected).toBeGreaterThanOrEqual(0);
    failures.splice(expected, 1);
    expect(await axeViolations()).toEqual([]);
  }, 60_000);

  it('the phone layout: one column, every screen scanned by axe', async () => {
    await checkPhoneScreens(page, ['agent', 'logs', 'datasets', 'tools', 'models', 'keys', 'versions'], 'studio-screens');
    // The logs screen at a phone size: its conversations table scrolls sideways in a focusable, named region.
    await screen('logs');
    expect(await page.locator('#logs .table-scroll[role="region"][tabindex="0"]').isVisible()).toBe(true);
    expect(await axeViolations('#logs'), 'logs').toEqual([]);
    await screen('agent');
    const editor = (await page.locator('#editor').boundingBox())!;
    const debug = (await page.locator('#debugger').boundingBox())!;
    expect(debug.y).toBeGreaterThanOrEqual(editor.y + editor.height - 1);
    expect(failures).toEqual([]);
  }, 120_000);
});
