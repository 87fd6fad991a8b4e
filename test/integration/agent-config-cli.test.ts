/**
 * The `dify-agent` CLI end to end (docs/PROTOCOL.md §3/§4): CLI → agent stub on the real backend (its unix socket,
 * per-run stub token) → the api's inner agent-config endpoint (signed execution context) → PostgreSQL. Pull reads the
 * raw prompt; push writes only the calling account's build draft; an end user may read but not write.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildComposition } from '../../core/domain/soul-composition.js';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';
import { readFrames } from '../support/sse.js';
import type { LayerSpec } from '../../core/protocol/run.js';

const run = promisify(execFile);
const CLI = path.resolve(import.meta.dirname, '../../cli/dify-agent.ts');
// The CLI runs in a scratch dir: load tsx by absolute URL, not by package name.
const TSX = pathToFileURL(path.resolve(import.meta.dirname, '../../node_modules/tsx/dist/loader.mjs')).href;
let stack: Stack;

beforeAll(async () => {
  stack = await startTestStack('agent_config_cli');
  const soul = demoSoulConfig();
  soul.prompt.system_prompt = 'Be kind. Cite [§dataset:ds-1:Handbook§] and {{#sys.query#}}.\r\nSecond line.';
  await stack.db.agentConfigDraft.updateMany({
    where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' },
    data: { config: soul as object },
  });
});
afterAll(async () => stack?.stop());

/**
 * A running backend run whose composition has a `config` layer; returns its stub token. An account's run is on its
 * build draft unless `draftType` says the shared DRAFT (what the message's metadata records, as a debugger turn's does).
 */
async function runningRun(
  userFrom: 'account' | 'end-user',
  userId: string,
  draftType: 'DRAFT' | 'BUILD_DRAFT' = 'BUILD_DRAFT',
): Promise<{ token: string; runId: string }> {
  const d = stack.demo!;
  // The context is honoured only while its turn is in progress (issue 17 L2): a real turn, running.
  const conversation = await stack.db.conversation.create({ data: { tenant_id: d.tenantId, app_id: d.appId, invoke_from: 'debugger' } });
  const message = await stack.db.message.create({
    data: {
      tenant_id: d.tenantId,
      app_id: d.appId,
      conversation_id: conversation.id,
      invoke_from: 'debugger',
      query: 'q',
      status: 'running',
      ...(userFrom === 'account' ? { account_id: userId, metadata: { draft_type: draftType } } : {}),
      workflow_id: `cli-test-${crypto.randomUUID()}`,
    },
  });
  const layers = buildComposition(demoSoulConfig(), {
    tenantId: d.tenantId,
    appId: d.appId,
    agentId: d.agentId,
    conversationId: conversation.id,
    messageId: message.id,
    userId,
    userFrom,
    invokeFrom: 'debugger',
    configVersionId: null,
    query: '/slow 200 /long 200',
    files: [],
    supportsVision: false,
    innerApiKey: stack.config.EXECUTION_CONTEXT_SIGNING_KEY,
  });
  const at = layers.findIndex((l) => l.name === 'history');
  layers.splice(at, 0, { name: 'config', type: 'config', deps: [], metadata: {}, config: { execution_context: 'execution_context' } });
  const backend = new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN);
  const created = await backend.createRun({ composition: { schema_version: 1, layers }, purpose: 'agent_app' });
  return { runId: created.run_id, token: mintStubToken(stack.config.AGENT_BACKEND_TOKEN, created.run_id) };
}

function cli(args: string[], token: string, cwd: string, input?: string) {
  const p = run(process.execPath, ['--import', TSX, CLI, ...args], {
    cwd,
    env: { ...process.env, DIFY_AGENT_STUB_SOCKET: stack.agentStubSocket!, DIFY_AGENT_STUB_TOKEN: token },
  });
  if (input !== undefined) {
    p.child.stdin!.end(input);
  }
  return p;
}

describe('dify-agent config prompt', () => {
  it('pulls the raw prompt (markers unexpanded, line endings kept) and pushes into the account’s own build draft only', async () => {
    const account = stack.demo!.accountId;
    const { token, runId } = await runningRun('account', account);
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
    const pulled = await cli(['config', 'prompt', 'pull'], token, cwd);
    const file = pulled.stdout.trim();
    expect(file).toBe(path.join(cwd, '.dify_conf', 'prompt.md'));
    expect(fs.readFileSync(file, 'utf8')).toBe('Be kind. Cite [§dataset:ds-1:Handbook§] and {{#sys.query#}}.\r\nSecond line.');

    fs.writeFileSync(file, 'New prompt with [§tool:calculator:Calc§].\n');
    const pushed = await cli(['config', 'prompt', 'push'], token, cwd);
    expect(JSON.parse(pushed.stdout)).toEqual({ prompt: 'New prompt with [§tool:calculator:Calc§].\n' });

    const own = await stack.db.agentConfigDraft.findFirstOrThrow({
      where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: account },
    });
    expect(AgentSoulConfig.parse(own.config).prompt.system_prompt).toBe('New prompt with [§tool:calculator:Calc§].\n');
    // Only the prompt changed; the shared draft and the published version are untouched.
    expect(AgentSoulConfig.parse(own.config).model).toEqual(demoSoulConfig().model);
    const shared = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
    expect(AgentSoulConfig.parse(shared.config).prompt.system_prompt).toContain('Be kind.');
    const published = await stack.db.agentConfigVersion.findUniqueOrThrow({ where: { id: stack.demo!.configVersionId } });
    expect(AgentSoulConfig.parse(published.config_snapshot).prompt.system_prompt).toBe(demoSoulConfig().prompt.system_prompt);

    // Reads now follow the personal build draft; `-` reads stdin; empty text clears it.
    const again = await cli(['config', 'prompt', 'pull', '--to', 'p.md'], token, cwd);
    expect(fs.readFileSync(again.stdout.trim(), 'utf8')).toBe('New prompt with [§tool:calculator:Calc§].\n');
    const cleared = await cli(['config', 'prompt', 'push', '-'], token, cwd, '');
    expect(JSON.parse(cleared.stdout)).toEqual({ prompt: '' });
    await new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN).cancelRun(runId);
  });

  it('reads follow the run’s own scope: a run on the shared DRAFT reads the shared draft though its account has a build draft', async () => {
    const account = stack.demo!.accountId;
    const own = await stack.db.agentConfigDraft.findFirst({
      where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: account },
    });
    const mine = demoSoulConfig();
    mine.prompt.system_prompt = 'Only on my build draft.';
    if (own) await stack.db.agentConfigDraft.update({ where: { id: own.id }, data: { config: mine as object } });
    else
      await stack.db.agentConfigDraft.create({
        data: {
          tenant_id: stack.demo!.tenantId,
          agent_id: stack.demo!.agentId,
          draft_type: 'BUILD_DRAFT',
          account_id: account,
          config: mine as object,
        },
      });
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
    const shared = await runningRun('account', account, 'DRAFT');
    const pulledShared = await cli(['config', 'prompt', 'pull'], shared.token, cwd);
    expect(fs.readFileSync(pulledShared.stdout.trim(), 'utf8')).toContain('Be kind.');
    const build = await runningRun('account', account, 'BUILD_DRAFT');
    const pulledBuild = await cli(['config', 'prompt', 'pull', '--to', 'b.md'], build.token, cwd);
    expect(fs.readFileSync(pulledBuild.stdout.trim(), 'utf8')).toBe('Only on my build draft.');
    const backend = new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN);
    await backend.cancelRun(shared.runId);
    await backend.cancelRun(build.runId);
  });

  it('lets an end user read but not write', async () => {
    const { token, runId } = await runningRun('end-user', 'some-end-user');
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
    await cli(['config', 'prompt', 'pull'], token, cwd);
    await expect(cli(['config', 'prompt', 'push'], token, cwd)).rejects.toMatchObject({ code: 1 });
    await new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN).cancelRun(runId);
  });

  it('refuses a forged execution context at the inner endpoint', async () => {
    const ctx = {
      tenant_id: stack.demo!.tenantId,
      user_id: 'x',
      user_from: 'account',
      app_id: stack.demo!.appId,
      conversation_id: null,
      agent_id: stack.demo!.agentId,
      agent_config_version_id: null,
      invoke_from: 'debugger',
      signature: 'ab'.repeat(32),
    };
    const res = await fetch(`${stack.apiUrl}/inner/api/agent-config/${stack.demo!.agentId}/prompt`, {
      headers: {
        'x-inner-api-key': stack.config.INNER_API_KEY,
        'x-agent-execution-context': Buffer.from(JSON.stringify(ctx)).toString('base64'),
      },
    });
    expect(res.status).toBe(403);
    const noKey = await fetch(`${stack.apiUrl}/inner/api/agent-config/${stack.demo!.agentId}/prompt`);
    expect(noKey.status).toBe(401);
  });
});

/** A debugger turn on the caller's build draft through the api; the system prompt its stored run request was built with. */
async function buildDraftTurn(query: string): Promise<string> {
  const res = await fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/agent/debug/chat-messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, draft: 'build' }),
  });
  expect(res.status).toBe(200);
  const end = (await readFrames(res)).at(-1)!;
  expect(end.event).toBe('message_end');
  return promptOf(end.data.message_id as string);
}
const promptOf = async (messageId: string) => {
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
  const layers = (run.request as { composition: { layers: LayerSpec[] } }).composition.layers;
  return layers.find((l) => l.name === 'agent_soul_prompt')!.config.system_prompt as string;
};
const buildDraftPrompt = async () =>
  AgentSoulConfig.parse(
    (
      await stack.db.agentConfigDraft.findFirstOrThrow({
        where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: stack.demo!.accountId },
      })
    ).config,
  ).prompt.system_prompt;

describe('issue 43: push checks like a save; local edits do nothing until pushed', () => {
  it('an unknown mention is refused at push with the code and message of a save in the studio, and nothing is stored', async () => {
    const { token, runId } = await runningRun('account', stack.demo!.accountId);
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
    await cli(['config', 'prompt', 'push', '-'], token, cwd, 'Known: {{#tool.calculator#}}.');
    const text = 'Use {{#tool.no_such_tool#}} and [§dataset:ds-9:Gone§].';
    const refused = (await cli(['config', 'prompt', 'push', '-'], token, cwd, text).then(
      () => null,
      (e: unknown) => e,
    )) as { code: number; stderr: string; stdout: string } | null;
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused!.stderr).toContain('error: the agent stub answered 400 invalid_agent_config: ');
    expect(refused!.stderr).toContain('the mention {{#tool.no_such_tool#}} is unknown');
    expect(refused!.stderr).toContain('the mention {{#dataset.ds-9#}} is unknown');
    expect(await buildDraftPrompt()).toBe('Known: {{#tool.calculator#}}.');

    // The studio's save of the same prompt: the same code and message.
    const soul = demoSoulConfig();
    soul.prompt.system_prompt = text;
    const save = await fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}/agent/build-draft`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config: soul }),
    });
    const body = (await save.json()) as { code: string; message: string };
    expect([save.status, body.code]).toEqual([400, 'invalid_agent_config']);
    expect(refused!.stderr).toBe(`error: the agent stub answered 400 invalid_agent_config: ${body.message}\n`);
    await new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN).cancelRun(runId);
  });

  it('a pulled prompt edited locally changes nothing until pushed; requests built before keep their prompt', async () => {
    const { token, runId } = await runningRun('account', stack.demo!.accountId);
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
    await cli(['config', 'prompt', 'push', '-'], token, cwd, 'Before the edit.');
    const file = (await cli(['config', 'prompt', 'pull'], token, cwd)).stdout.trim();
    expect(await buildDraftTurn('/echo one')).toBe('Before the edit.');

    fs.writeFileSync(file, 'After the edit.');
    expect(await buildDraftPrompt()).toBe('Before the edit.');
    const second = await buildDraftTurn('/echo two');
    expect(second).toBe('Before the edit.');

    expect(JSON.parse((await cli(['config', 'prompt', 'push'], token, cwd)).stdout)).toEqual({ prompt: 'After the edit.' });
    expect(await buildDraftTurn('/echo three')).toBe('After the edit.');
    // The turns built before the push were sent, and are stored, with the prompt they were built with.
    const earlier = await stack.db.message.findMany({
      where: { account_id: stack.demo!.accountId, query: { in: ['/echo one', '/echo two'] } },
      select: { id: true },
    });
    expect(await Promise.all(earlier.map((m) => promptOf(m.id)))).toEqual(['Before the edit.', 'Before the edit.']);
    await new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN).cancelRun(runId);
  });
});
