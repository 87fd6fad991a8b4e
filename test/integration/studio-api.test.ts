/**
 * The studio's console reads (api/console/studio.ts, issue 19 §3) on the real stack: the tenant's agent apps, one
 * version's config, and a turn's run facts with its Temporal UI link — and nothing of another tenant's (404, or
 * absent from the list).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STUDIO_RESPONSES } from '../../api/openapi/studio.js';
import { BUILTIN_TOOLS, builtinParameters } from '../../core/protocol/builtin-tools.js';
import { BUILTIN_TOOL_NAMES } from '../../core/protocol/tool-names.js';
import { ensureAccount, ensureAgentApp, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const UI = 'http://temporal-ui.example:8233/';
let stack: Stack;
let strangerKey: string;
let strangerAppId: string;

beforeAll(async () => {
  stack = await startTestStack('studio_api', { env: { TEMPORAL_UI_URL: UI } });
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
  strangerAppId = (await ensureAgentApp(stack.db, { tenantId: tenant.id, name: 'Theirs', createdBy: stranger.id }, demoSoulConfig())).appId;
});
afterAll(async () => stack?.stop());

const get = (path: string, key = stack.demo!.consoleKey) =>
  fetch(`${stack.apiUrl}/console/api${path}`, { headers: { authorization: `Bearer ${key}` } });

describe('the studio console reads', () => {
  it('lists only the caller tenant’s agent apps', async () => {
    const mine = (await (await get('/apps')).json()) as { data: { id: string; name: string; active_version_id: string | null }[] };
    expect(STUDIO_RESPONSES.StudioAppListResponse.safeParse(mine).error).toBeUndefined();
    expect(mine.data.map((a) => a.id)).toEqual([stack.demo!.appId]);
    expect(mine.data[0]!.active_version_id).not.toBeNull();
    const theirs = (await (await get('/apps', strangerKey)).json()) as { data: { id: string }[] };
    expect(theirs.data.map((a) => a.id)).toEqual([strangerAppId]);
    expect((await get('/apps', 'not-a-key')).status).toBe(401);
  });

  it('reads one version with its config; another tenant gets 404', async () => {
    const { appId } = stack.demo!;
    const versions = (await (await get(`/apps/${appId}/agent/versions`)).json()) as { data: { id: string; version: number }[] };
    const v = versions.data[0]!;
    const res = await get(`/apps/${appId}/agent/versions/${v.id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { version: number; config: { model: unknown }; active: boolean };
    expect(STUDIO_RESPONSES.AgentVersionResponse.safeParse(body).error).toBeUndefined();
    expect(body.version).toBe(v.version);
    expect(body.config.model).toBeDefined();
    expect((await get(`/apps/${appId}/agent/versions/${v.id}`, strangerKey)).status).toBe(404);
    // Their own app, our version id: not theirs either.
    expect((await get(`/apps/${strangerAppId}/agent/versions/${v.id}`, strangerKey)).status).toBe(404);
    expect((await get(`/apps/${appId}/agent/versions/not-a-uuid`)).status).toBe(400);
  });

  it('lists the app’s annotations (and the reply settings in the apps list); another tenant gets 404', async () => {
    const { appId, consoleKey } = stack.demo!;
    const write = (path: string, method: string, body: unknown) =>
      fetch(`${stack.apiUrl}/console/api/apps/${appId}${path}`, {
        method,
        headers: { authorization: `Bearer ${consoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await write('/annotations', 'POST', { question: 'What are your hours?', content: 'Nine to five.' });
    expect(created.status).toBe(201);
    expect(STUDIO_RESPONSES.AnnotationResponse.safeParse(await created.json()).error).toBeUndefined();
    const settings = await write('/annotation-settings', 'PUT', { enabled: true, score_threshold: 0.6 });
    expect(STUDIO_RESPONSES.AnnotationSettingsResponse.safeParse(await settings.json()).error).toBeUndefined();
    const list = (await (await get(`/apps/${appId}/annotations`)).json()) as { data: { question: string; hit_count: number }[] };
    expect(STUDIO_RESPONSES.AnnotationListResponse.safeParse(list).error).toBeUndefined();
    expect(list.data).toEqual([expect.objectContaining({ question: 'What are your hours?', content: 'Nine to five.', hit_count: 0 })]);
    const apps = (await (await get('/apps')).json()) as { data: { annotation_reply: unknown }[] };
    expect(apps.data[0]!.annotation_reply).toEqual({ enabled: true, score_threshold: 0.6 });
    expect((await get(`/apps/${appId}/annotations`, strangerKey)).status).toBe(404);
    expect(((await (await get(`/apps/${strangerAppId}/annotations`, strangerKey)).json()) as { data: unknown[] }).data).toEqual([]);
  });

  it('gives a turn’s workflow, its Temporal UI link and the backend run id; another tenant gets 404', async () => {
    const { appId, apiKey } = stack.demo!;
    const { frames } = await chat(stack.apiUrl, apiKey, {
      query: 'hello inspector',
      user: 'studio-u',
      inputs: {},
      response_mode: 'streaming',
    });
    const messageId = frames.find((f) => f.event === 'message_end')!.data.message_id as string;
    const res = await get(`/apps/${appId}/agent/messages/${messageId}/run`);
    expect(res.status).toBe(200);
    const run = (await res.json()) as {
      workflow_id: string;
      backend_run_id: string | null;
      turn_status: string;
      temporal: { namespace: string; workflow_url: string };
    };
    expect(STUDIO_RESPONSES.TurnRunResponse.safeParse(run).error).toBeUndefined();
    expect(run.workflow_id).toBe(`agent-turn-${messageId}`);
    expect(run.turn_status).toBe('succeeded');
    const row = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    expect(run.backend_run_id).toBe(row.backend_run_id);
    expect(run.backend_run_id).toBeTruthy();
    expect(run.temporal.workflow_url).toBe(`http://temporal-ui.example:8233/namespaces/default/workflows/agent-turn-${messageId}`);
    // The workflow the link names is the turn's real workflow.
    const handle = stack.temporal.workflow.getHandle(run.workflow_id);
    await handle.result();
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect((await get(`/apps/${appId}/agent/messages/${messageId}/run`, strangerKey)).status).toBe(404);
    expect((await get(`/apps/${strangerAppId}/agent/messages/${messageId}/run`, strangerKey)).status).toBe(404);
  });

  it('lists the builtin shelf from the backend’s contract: names, descriptions, argument JSON schemas; 401 without a key', async () => {
    const res = await get('/builtin-tools');
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      data: { name: string; description: string; sandbox: boolean; parameters: Record<string, unknown> }[];
    };
    expect(STUDIO_RESPONSES.BuiltinToolListResponse.safeParse(body).error).toBeUndefined();
    expect(body.data.map((t) => t.name)).toEqual([...BUILTIN_TOOL_NAMES]);
    for (const t of body.data) {
      expect(t.description).toBe(BUILTIN_TOOLS[t.name as keyof typeof BUILTIN_TOOLS].description);
      expect(t.parameters).toEqual(builtinParameters(t.name as keyof typeof BUILTIN_TOOLS));
    }
    // What the zod schemas say, as JSON schema: http_request needs its url, code runs only in the sandbox.
    const http = body.data.find((t) => t.name === 'http_request')!;
    expect(http.parameters).toMatchObject({ type: 'object', required: ['url'], additionalProperties: false });
    expect((http.parameters.properties as Record<string, { enum?: string[] }>).method!.enum).toContain('POST');
    expect(body.data.find((t) => t.name === 'code')).toMatchObject({ sandbox: true, parameters: { required: ['code'] } });
    expect((await get('/builtin-tools', 'not-a-key')).status).toBe(401);
    expect((await fetch(`${stack.apiUrl}/console/api/builtin-tools`)).status).toBe(401);
  });
});
