/**
 * Issue 27 item 6 through the real stack: the agent backend admits a runtime layer's workspace only for the run its
 * signed execution context and its binding name. A `POST /runs` with the right backend token — what anyone holding
 * that token, or a command that could reach the backend, would send — naming another conversation's workspace fails
 * `run_failed` / `workspace_not_authorized` before anything touches the workspace, whether the context is the turn's
 * own (signed for its own workspace), edited (signature broken) or signed for the other workspace (not the binding's);
 * the turn's own request works.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { signExecutionContext } from '../../core/protocol/exec-context.js';
import type { ExecutionContextLayerConfig, LayerSpec, RunEvent } from '../../core/protocol/run.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { buildComposition } from '../../core/domain/soul-composition.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let backend: AgentBackendClient;

function workspaceSoul(): AgentSoulConfig {
  const s = demoSoulConfig();
  s.runtime = { enabled: true };
  s.shell = { enabled: true, timeout_ms: 20_000 };
  return AgentSoulConfig.parse(s);
}

beforeAll(async () => {
  stack = await startTestStack('workspace_authz', { env: { SHELLCTL_AUTH_TOKEN: 'authz-shellctl-token', DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  backend = new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN);
  const consoleFetch = (p: string, method: string, body: unknown) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await consoleFetch('/agent/draft', 'PUT', { config: workspaceSoul() })).status).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);
afterAll(async () => stack?.stop());

/** A conversation with a workspace holding `secret.txt`; its binding and workspace. */
async function conversationWith(secret: string, user: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: `/sh printf ${secret} > secret.txt`, user });
  expect(status).toBe(200);
  const conversationId = frames.at(-1)!.data.conversation_id as string;
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
  const dir = path.join(stack.config.workspacesDir, binding.workspace_id);
  expect(fs.readFileSync(path.join(dir, 'secret.txt'), 'utf8')).toBe(secret);
  return { conversationId, binding, dir, workspaceId: binding.workspace_id };
}

/**
 * A turn of `conv` in progress, as the worker leaves it right before runAgent's POST /runs: the message running, its
 * run row naming the binding, and the layers buildComposition signs (the context carries the workspace id).
 */
async function turnInProgress(conv: Awaited<ReturnType<typeof conversationWith>>, query: string) {
  const d = stack.demo!;
  const message = await stack.db.message.create({
    data: {
      tenant_id: d.tenantId,
      app_id: d.appId,
      conversation_id: conv.conversationId,
      invoke_from: 'service-api',
      query,
      status: 'running',
      workflow_id: `authz-test-${crypto.randomUUID()}`,
    },
  });
  await stack.db.agentBackendRun.create({ data: { message_id: message.id, request: {}, binding_id: conv.binding.id } });
  const layers = buildComposition(workspaceSoul(), {
    tenantId: d.tenantId,
    appId: d.appId,
    agentId: d.agentId,
    conversationId: conv.conversationId,
    messageId: message.id,
    userId: 'authz-user',
    userFrom: 'end-user',
    invokeFrom: 'service-api',
    configVersionId: null,
    query,
    files: [],
    supportsVision: false,
    innerApiKey: stack.config.EXECUTION_CONTEXT_SIGNING_KEY,
    workspaceId: conv.workspaceId,
  });
  return { messageId: message.id, layers };
}

const layerOf = (layers: LayerSpec[], name: string) => layers.find((l) => l.name === name)!;

async function run(layers: LayerSpec[]): Promise<RunEvent> {
  const { run_id } = await backend.createRun({ composition: { schema_version: 1, layers }, purpose: 'agent_app' });
  for (let i = 0; i < 600; i++) {
    const status = await backend.getRun(run_id);
    if (status.status !== 'running') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const page = await backend.listEvents(run_id, null);
  return page.events.at(-1)!;
}

function expectRefused(terminal: RunEvent, why: string) {
  expect(terminal.type).toBe('run_failed');
  expect(terminal.data).toMatchObject({ error_type: 'workspace_not_authorized' });
  expect((terminal.data as { error: string }).error).toContain(why);
}

describe('a runtime layer is admitted only for the workspace its run was signed for', () => {
  let a: Awaited<ReturnType<typeof conversationWith>>;
  let b: Awaited<ReturnType<typeof conversationWith>>;

  beforeAll(async () => {
    a = await conversationWith('secret-of-a', 'authz-a');
    b = await conversationWith('secret-of-b', 'authz-b');
    expect(a.workspaceId).not.toBe(b.workspaceId);
  }, 120_000);

  it("a turn's own context naming another conversation's workspace in the runtime layer: refused, B untouched", async () => {
    const { layers } = await turnInProgress(a, '/sh cat secret.txt; echo forged > forged.txt');
    layerOf(layers, 'runtime').config = { kind: 'local', workspace_id: b.workspaceId };
    expectRefused(await run(layers), `signed for workspace ${a.workspaceId}, not ${b.workspaceId}`);
    expect(fs.existsSync(path.join(b.dir, 'forged.txt'))).toBe(false);
  });

  it('a context whose workspace_id was edited to the other workspace: its signature no longer holds', async () => {
    const { layers } = await turnInProgress(a, '/sh cat secret.txt');
    const ctx = layerOf(layers, 'execution_context').config as ExecutionContextLayerConfig;
    layerOf(layers, 'execution_context').config = { ...ctx, workspace_id: b.workspaceId };
    layerOf(layers, 'runtime').config = { kind: 'local', workspace_id: b.workspaceId };
    expectRefused(await run(layers), 'The execution context signature is invalid.');
  });

  it("a validly signed context for the other workspace: not the workspace of the turn's binding", async () => {
    const { layers } = await turnInProgress(a, '/sh cat secret.txt');
    const { signature: _s, exp: _e, ...unsigned } = layerOf(layers, 'execution_context').config as ExecutionContextLayerConfig;
    layerOf(layers, 'execution_context').config = signExecutionContext(
      { ...unsigned, workspace_id: b.workspaceId },
      stack.config.EXECUTION_CONTEXT_SIGNING_KEY,
    );
    layerOf(layers, 'runtime').config = { kind: 'local', workspace_id: b.workspaceId };
    expectRefused(await run(layers), "the workspace is not the one of the run's binding");
  });

  it('a context signed without a workspace, and one whose turn ended, are refused too', async () => {
    const { layers, messageId } = await turnInProgress(a, '/sh cat secret.txt');
    const {
      signature: _s,
      exp: _e,
      workspace_id: _w,
      ...unsigned
    } = layerOf(layers, 'execution_context').config as ExecutionContextLayerConfig;
    const bare = structuredClone(layers);
    layerOf(bare, 'execution_context').config = signExecutionContext(unsigned, stack.config.EXECUTION_CONTEXT_SIGNING_KEY);
    expectRefused(await run(bare), 'signed without a workspace');
    await stack.db.message.update({ where: { id: messageId }, data: { status: 'succeeded' } });
    expectRefused(await run(layers), 'is not in progress');
  });

  it("the turn's own request works: the shell runs in its own workspace", async () => {
    const { layers } = await turnInProgress(a, '/sh cat secret.txt');
    const terminal = await run(layers);
    expect(terminal.type).toBe('run_succeeded');
    expect((terminal.data as { output: string }).output).toContain('secret-of-a');
  });
});
