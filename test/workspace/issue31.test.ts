/**
 * Issue 31 through the real stack (HTTP → api → Temporal → agent backend → demo model → shell → shellctl):
 * prompt mentions resolved against the composition and refused at save when unknown; files that follow
 * /v1/parameters; binding_lost when a workspace vanishes between turns (and a fresh binding after it); the config
 * manifest through the dify-agent CLI; pull and push agreeing on shared-draft turns; the backend's refusal of
 * resource layers out of Runtime → Shell → Config order; build-draft bindings retired with the draft's lifecycle.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { LayerSpec } from '../../core/protocol/run.js';
import type { Stack } from '../../stack/start-stack.js';
import { buildComposition } from '../../core/domain/soul-composition.js';
import { BINDING_LOST_MESSAGE } from '../../activities/classify-failure.js';
import { LEGACY_MARKER_FILE, markerPath } from '../../core/domain/workspace-marker.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { upload } from '../api/helpers.js';

let stack: Stack;
let key: string;

const consoleFetch = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

function workspaceSoul(edit: (s: AgentSoulConfig) => void = () => undefined): AgentSoulConfig {
  const s = demoSoulConfig();
  s.runtime = { enabled: true };
  s.shell = { enabled: true, timeout_ms: 20_000 };
  edit(s);
  return AgentSoulConfig.parse(s);
}

beforeAll(async () => {
  stack = await startTestStack('issue31', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', SHELL_MAX_OUTPUT_BYTES: 8192, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  key = stack.demo!.apiKey;
  expect((await consoleFetch('/agent/draft', 'PUT', { config: workspaceSoul() })).status).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);
afterAll(async () => stack?.stop());

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(query: string, user: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, { query, user, ...(conversationId ? { conversation_id: conversationId } : {}) });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  return {
    frames,
    answer: answerOf(frames),
    conversationId: end.data.conversation_id as string,
    messageId: end.data.message_id as string,
    end,
  };
}

async function debug(query: string, draft: 'draft' | 'build', conversationId?: string) {
  const res = await consoleFetch('/agent/debug/chat-messages', 'POST', {
    query,
    draft,
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(res.status).toBe(200);
  const frames = await readFrames(res);
  const end = frames.at(-1)!;
  return {
    frames,
    answer: answerOf(frames),
    end,
    messageId: end.data.message_id as string,
    conversationId: end.data.conversation_id as string,
  };
}

const layersOf = async (messageId: string) =>
  (
    (await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } })).request as {
      composition: { layers: LayerSpec[] };
    }
  ).composition.layers;

const buildDraft = () =>
  stack.db.agentConfigDraft.findFirstOrThrow({
    where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: stack.demo!.accountId },
  });

describe('item 1: prompt mentions resolved by the composition', () => {
  it('refuses an unknown mention at save, naming it', async () => {
    const datasetId = crypto.randomUUID();
    const res = await consoleFetch('/agent/draft', 'PUT', {
      config: workspaceSoul(
        (s) => (s.prompt.system_prompt = 'Use {{#tool.web_search#}}, [§dataset:' + datasetId + '§] and {{#env.HOME#}}.'),
      ),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string; issues: { path: string; message: string }[] };
    expect(body.code).toBe('invalid_agent_config');
    expect(body.message).toContain('{{#tool.web_search#}}');
    expect(body.message).toContain(`{{#dataset.${datasetId}#}}`);
    expect(body.message).toContain('{{#env.HOME#}}');
    expect(body.issues.every((i) => i.path === 'prompt.system_prompt')).toBe(true);
  });

  it('tools become the names the model is offered, datasets their names, variables their values', async () => {
    const ds = await stack.db.dataset.create({ data: { tenant_id: stack.demo!.tenantId, name: 'Employee Handbook' } });
    const prompt =
      'Tools: {{#tool.calculator.calc#}}, [§tool:shell:Shell§], {{#tool.ask_human#}}. ' +
      `Read {{#dataset.${ds.id}#}}. The user asked: {{#sys.query#}} (topic {{#inputs.topic#}}).`;
    const soul = workspaceSoul((s) => {
      s.prompt.system_prompt = prompt;
      s.knowledge = { enabled: true, dataset_ids: [ds.id], top_k: 4, score_threshold: 0, search_tool: false };
    });
    const saved = await consoleFetch('/agent/draft', 'PUT', { config: soul });
    expect(saved.status).toBe(200);
    const t = await debug('What is 6*7?', 'draft');
    const layers = await layersOf(t.messageId);
    expect(layers.find((l) => l.name === 'agent_soul_prompt')!.config.system_prompt).toBe(
      'Tools: calculator, shell, ask_human. Read Employee Handbook. The user asked: What is 6*7? (topic ).',
    );
    // The dataset named is the one the knowledge layer retrieves from.
    expect(layers.find((l) => l.name === 'knowledge')!.config.dataset_ids).toEqual([ds.id]);
    expect((await consoleFetch('/agent/draft', 'PUT', { config: workspaceSoul() })).status).toBe(200);
  });
});

describe('item 2: files follow /v1/parameters', () => {
  it('a document for an agent without a workspace is a 400 naming the file; with one, the prompt lists name and type', async () => {
    const plain = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'No workspace' });
    const params = (await (
      await fetch(`${stack.apiUrl}/v1/parameters?user=f`, { headers: { authorization: `Bearer ${plain.apiKey}` } })
    ).json()) as {
      file_upload: { allowed_file_types: string[] };
    };
    expect(params.file_upload.allowed_file_types).not.toContain('document');
    const up = await upload(stack.apiUrl, plain.apiKey, new TextEncoder().encode('numbers: 42\n'), 'notes.txt', 'f', 'text/plain');
    expect(up.status).toBe(201);
    const id = (up.body as { id: string }).id;
    const refused = await chat(stack.apiUrl, plain.apiKey, {
      query: 'read it',
      user: 'f',
      files: [{ type: 'document', transfer_method: 'local_file', upload_file_id: id }],
    });
    expect(refused.status).toBe(400);
    expect(String(refused.frames[0]!.data.message)).toContain('files.0 (notes.txt): documents are not accepted by this app');
    expect(await stack.db.message.count({ where: { app_id: plain.appId } })).toBe(0);

    const up2 = await upload(stack.apiUrl, key, new TextEncoder().encode('numbers: 42\n'), 'notes.txt', 'f', 'text/plain');
    const t = await chat(stack.apiUrl, key, {
      query: '/sh cat uploads/*/notes.txt',
      user: 'f',
      files: [{ type: 'document', transfer_method: 'local_file', upload_file_id: (up2.body as { id: string }).id }],
    });
    expect(t.status).toBe(200);
    expect(answerOf(t.frames)).toContain('numbers: 42');
    const messageId = t.frames.at(-1)!.data.message_id as string;
    const text = (await layersOf(messageId)).find((l) => l.name === 'agent_app_user_prompt')!.config.text as string;
    expect(text).toContain(`- uploads/${messageId}/notes.txt (document, text/plain)`);
  });
});

describe('item 3: binding_lost', () => {
  it('a workspace deleted between turns fails the turn with the seed message; the next turn starts a fresh binding', async () => {
    const t1 = await turn('/sh echo kept > note.txt && ls -A', 'lost');
    expect(t1.answer).toContain('The command exited with code 0.');
    expect(t1.answer).not.toContain(LEGACY_MARKER_FILE);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    const first = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const dir = path.join(stack.config.workspacesDir, first.workspace_id);
    expect(JSON.parse(fs.readFileSync(markerPath(dir), 'utf8'))).toMatchObject({ workspace_id: first.workspace_id, generation: 1 });

    fs.rmSync(dir, { recursive: true, force: true });
    const t2 = await turn('/sh cat note.txt', 'lost', t1.conversationId);
    expect(t2.end.event).toBe('error');
    expect(t2.end.data).toMatchObject({ code: 'completion_request_error', message: BINDING_LOST_MESSAGE });
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: t2.messageId } });
    expect((msg.metadata as { agent_failure: { reason: string } }).agent_failure.reason).toBe('binding_lost');
    const retired = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: first.id }, include: { workspace: true } });
    expect([retired.retired_reason, retired.workspace.status]).toEqual(['binding_lost', 'retired']);
    expect(retired.retired_at).not.toBeNull();

    const t3 = await turn('/sh ls -A; cat note.txt', 'lost', t1.conversationId);
    expect(t3.end.event).toBe('message_end');
    expect(t3.answer).toContain('No such file or directory');
    const conv3 = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    const next = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv3.agent_workspace_binding_id! } });
    expect(next.id).not.toBe(first.id);
    expect(next.workspace_id).not.toBe(first.workspace_id);
    expect([next.incarnation, next.retired_at, next.agent_config_version_id]).toEqual([2, null, first.agent_config_version_id]);
    expect(fs.existsSync(markerPath(path.join(stack.config.workspacesDir, next.workspace_id)))).toBe(true);
    expect(fs.existsSync(markerPath(dir)), 'the lost workspace marker is removed').toBe(false);
    // And it keeps going: the fourth turn continues the new binding's session.
    const t4 = await turn('/sh echo again', 'lost', t1.conversationId);
    expect(t4.end.event).toBe('message_end');
  });

  it('a workspace whose marker names another workspace is foreign: binding_lost', async () => {
    const t1 = await turn('/sh true', 'foreign');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    const b = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const marker = markerPath(path.join(stack.config.workspacesDir, b.workspace_id));
    fs.writeFileSync(marker, JSON.stringify({ workspace_id: crypto.randomUUID(), generation: 1 }));
    const t2 = await turn('/sh true', 'foreign', t1.conversationId);
    expect(t2.end.data).toMatchObject({ message: BINDING_LOST_MESSAGE });
  });

  it('the marker is outside what the shell may write: a turn that forges, then deletes, .dify-workspace keeps its binding', async () => {
    const t1 = await turn('/sh echo kept > note.txt', 'forger');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    const b = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const marker = markerPath(path.join(stack.config.workspacesDir, b.workspace_id));
    const before = fs.readFileSync(marker, 'utf8');
    // Where the previous release kept it, and the markers directory as the agent would guess it.
    const forged = JSON.stringify({ workspace_id: crypto.randomUUID(), generation: 1 });
    const t2 = await turn(
      `/sh printf '%s' '${forged}' > ${LEGACY_MARKER_FILE}; rm -f ../.markers/${b.workspace_id}; echo x > ../.markers/${b.workspace_id}; cat ${LEGACY_MARKER_FILE}`,
      'forger',
      t1.conversationId,
    );
    expect(t2.end.event).toBe('message_end');
    const t3 = await turn(`/sh rm -rf ${LEGACY_MARKER_FILE} .tmp; cat note.txt`, 'forger', t1.conversationId);
    expect(t3.end.event, JSON.stringify(t3.end.data)).toBe('message_end');
    expect(t3.answer).toContain('kept');
    const t4 = await turn('/sh cat note.txt', 'forger', t1.conversationId);
    expect(t4.end.event, JSON.stringify(t4.end.data)).toBe('message_end');
    expect(t4.answer).toContain('kept');
    expect(fs.readFileSync(marker, 'utf8')).toBe(before);
    const after = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: b.id } });
    expect(after.retired_at).toBeNull();
  });
});

describe('items 4 and 6: the config manifest, and pull/push on shared-draft turns', () => {
  it('dify-agent config manifest prints the saved config without the prompt; a shared-draft turn cannot push', async () => {
    const shared = await debug("/sh dify-agent config manifest; printf 'Edited.' | dify-agent config prompt push -; echo push=$?", 'draft');
    expect(shared.answer).toContain('"kind": "draft"');
    expect(shared.answer).toContain('"runtime"');
    expect(shared.answer).not.toContain('system_prompt');
    expect(shared.answer).toContain('This run uses the shared draft, not your build draft');
    expect(shared.answer).toContain('push=1');

    expect(
      (await consoleFetch('/agent/build-draft', 'PUT', { config: workspaceSoul((s) => (s.prompt.system_prompt = 'Mine.')) })).status,
    ).toBe(200);
    const build = await debug(
      "/sh dify-agent config manifest --to m.json && grep -c build_draft m.json; printf 'Edited.' | dify-agent config prompt push - && dify-agent config prompt pull && cat .dify_conf/prompt.md",
      'build',
    );
    expect(build.answer).toContain('The command exited with code 0.');
    expect(build.answer).toContain('{"prompt": "Edited."}');
    expect(build.answer).toMatch(/prompt\.md\s+Edited\./);
    expect(AgentSoulConfig.parse((await buildDraft()).config).prompt.system_prompt).toBe('Edited.');
  });
});

describe('item 5: Runtime → Shell → Config order', () => {
  it('the backend refuses resource layers out of order with a 400 naming the layers', async () => {
    const layers = buildComposition(workspaceSoul(), {
      tenantId: stack.demo!.tenantId,
      appId: stack.demo!.appId,
      agentId: stack.demo!.agentId,
      conversationId: crypto.randomUUID(),
      messageId: crypto.randomUUID(),
      userId: 'u',
      userFrom: 'end-user',
      invokeFrom: 'service-api',
      configVersionId: null,
      query: 'q',
      files: [],
      supportsVision: false,
      innerApiKey: 'x',
      workspaceId: crypto.randomUUID(),
    });
    const names = layers.map((l) => l.name);
    expect(names.indexOf('runtime')).toBeLessThan(names.indexOf('shell'));
    const swap = (a: string, b: string) => {
      const out = [...layers];
      const i = names.indexOf(a);
      const j = names.indexOf(b);
      [out[i], out[j]] = [out[j]!, out[i]!];
      return out;
    };
    const post = (p: string, ls: LayerSpec[]) =>
      fetch(`${stack.agentBackendUrl}${p}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.config.AGENT_BACKEND_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ composition: { schema_version: 1, layers: ls }, purpose: 'agent_app', session_snapshot: null }),
      });
    for (const [p, ls] of [
      ['/compositions/validate', swap('runtime', 'shell')],
      ['/runs', swap('shell', 'config')],
      ['/runs', swap('runtime', 'config')],
    ] as const) {
      const res = await post(p, ls);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe('invalid_layer_order');
      expect(body.message).toContain('Runtime → Shell → Config');
    }
    expect((await post('/compositions/validate', layers)).status).toBe(200);
  });
});

describe('item 7: build-draft bindings retired with the draft', () => {
  const bindingOfDraft = async () => {
    const d = await buildDraft();
    return d.agent_workspace_binding_id
      ? stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: d.agent_workspace_binding_id }, include: { workspace: true } })
      : null;
  };

  it('merge, a topology change and discard each retire the binding and its workspace; the next turn starts afresh', async () => {
    expect((await consoleFetch('/agent/build-draft', 'PUT', { config: workspaceSoul() })).status).toBe(200);
    await debug('/sh echo built > b.txt', 'build');
    const b1 = (await bindingOfDraft())!;
    expect(b1.retired_at).toBeNull();
    const dir1 = path.join(stack.config.workspacesDir, b1.workspace_id);
    expect(fs.existsSync(path.join(dir1, 'b.txt'))).toBe(true);

    // Merge.
    const merged = await consoleFetch('/agent/build-draft/merge', 'POST', { force: true });
    expect(merged.status).toBe(200);
    const after1 = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: b1.id }, include: { workspace: true } });
    expect([after1.retired_reason, after1.workspace.status, fs.existsSync(dir1)]).toEqual(['build_draft_lifecycle', 'retired', false]);
    const t2 = await debug('/sh cat b.txt', 'build');
    expect(t2.answer).toContain('No such file or directory');
    const b2 = (await bindingOfDraft())!;
    expect([b2.incarnation, b2.retired_at]).toEqual([2, null]);

    // A save that keeps the topology keeps the binding; one that changes it retires it.
    expect((await consoleFetch('/agent/build-draft', 'PUT', { config: workspaceSoul((s) => (s.prompt.system_prompt = 'x')) })).status).toBe(
      200,
    );
    expect((await bindingOfDraft())!.retired_at).toBeNull();
    expect((await consoleFetch('/agent/build-draft', 'PUT', { config: workspaceSoul((s) => (s.ask_human.enabled = false)) })).status).toBe(
      200,
    );
    expect((await bindingOfDraft())!.retired_reason).toBe('build_draft_lifecycle');
    const t3 = await debug('/sh true', 'build');
    expect(t3.end.event).toBe('message_end'); // not 409 agent_session_configuration_changed
    const b3 = (await bindingOfDraft())!;
    expect(b3.incarnation).toBe(3);

    // Discard.
    const discarded = await consoleFetch('/agent/build-draft', 'DELETE');
    expect(discarded.status).toBe(204);
    expect(
      await stack.db.agentConfigDraft.count({
        where: { id: (await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: b3.id } })).owner_id },
      }),
    ).toBe(0);
    const gone = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: b3.id }, include: { workspace: true } });
    expect([gone.retired_reason, gone.workspace.status]).toEqual(['build_draft_lifecycle', 'retired']);
    expect(fs.existsSync(path.join(stack.config.workspacesDir, b3.workspace_id))).toBe(false);
    expect((await consoleFetch('/agent/build-draft')).status).toBe(404);
  });
});
