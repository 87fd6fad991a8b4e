/**
 * Fail fast, everywhere (issue 14 §1). Configs that cannot run used to spin ~100 s through activity retries and
 * end in a generic 500; now:
 * - a turn on such a config — stored directly as the agent's active version, as an old or hand-edited config
 *   would be — ends with a clear `error` event naming the problem, well within 2 s, after exactly one attempt of
 *   the failing activity (asserted on the workflow history);
 * - a config the api-side checks pass but the agent backend refuses (runtime on a deployment without
 *   SHELLCTL_AUTH_TOKEN) fails the same way, on the backend's 400;
 * - the console refuses each of them when saved or published: 400 `invalid_agent_config` naming the field;
 * - the backend's registry endpoints answer what it can run.
 * The 2 s bound is generous on purpose (a failing turn takes well under a second here; the machine is shared): what it
 * guards against is the old ~100 s of retries, not milliseconds. A warm-up turn takes the fresh stack's one-off
 * costs first.
 */
import crypto from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_RESPONSES } from '../../api/openapi/console.js';
import { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { backendRunsOf } from '../support/sql.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
const FAST_MS = 2_000;

beforeAll(async () => {
  // No SHELLCTL_AUTH_TOKEN: this backend cannot run runtime/shell (module_unavailable), a backend-only rule.
  stack = await startTestStack('config_fail_fast', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0, SHELLCTL_AUTH_TOKEN: undefined } });
  const warm = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'warm up', user: 'warm' });
  expect(warm.frames.at(-1)?.event).toBe('message_end');
});
afterAll(async () => stack?.stop());

type Soul = Record<string, unknown>;
const soul = (edit: (s: Soul & ReturnType<typeof demoSoulConfig>) => void): Soul => {
  const s = structuredClone(demoSoulConfig()) as Soul & ReturnType<typeof demoSoulConfig>;
  edit(s);
  return s;
};

/** The misconfigurations, as the console would have taken them before (and as an old config still holds them). */
const unknownDataset = crypto.randomUUID();
const CASES = {
  knowledgeWithoutDataset: soul((s) => (s.knowledge = { ...s.knowledge, enabled: true, dataset_ids: [] })),
  knowledgeUnknownDataset: soul((s) => (s.knowledge = { ...s.knowledge, enabled: true, dataset_ids: [unknownDataset] })),
  coreToolNotBuiltin: soul((s) => ((s.tools as Soul).core = ['current_time', 'web_search'])),
  pluginToolWithDot: soul((s) => (s.tools.plugin = [{ provider: 'weather', name: 'get.forecast', description: '', parameters: {} }])),
  pluginToolNamedLikeBuiltin: soul((s) => (s.tools.plugin = [{ provider: 'acme', name: 'calculator', description: '', parameters: {} }])),
  runtimeWithoutShellctlToken: soul((s) => (s.runtime = { enabled: true })),
};

/** A new agent app whose active version holds `raw` as is (bypassing the console). */
async function appWithStoredConfig(raw: Soul): Promise<string> {
  const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
    name: `ff-${crypto.randomUUID().slice(0, 8)}`,
    soul: demoSoulConfig(),
  });
  await stack.db.agentConfigVersion.update({ where: { id: app.configVersionId }, data: { config_snapshot: raw as object } });
  return app.apiKey;
}

interface TurnResult {
  ms: number;
  error: Record<string, unknown>;
  events: string[];
  messageId: string;
  history: temporal.api.history.v1.IHistoryEvent[];
}

async function failingTurn(raw: Soul): Promise<TurnResult> {
  const key = await appWithStoredConfig(raw);
  const t0 = performance.now();
  const { status, frames } = await chat(stack.apiUrl, key, { query: 'hello', user: 'ff-user' });
  const ms = performance.now() - t0;
  expect(status).toBe(200);
  const events = frames.map((f) => f.event ?? '');
  const error = frames.find((f) => f.event === 'error')?.data;
  expect(error, JSON.stringify(events)).toBeDefined();
  const messageId = error!.message_id as string;
  const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
  const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
  // A failed turn's workflow fails with its code as the failure's type (workflows/agent-turn.ts, issue 42).
  await expect(handle.result()).rejects.toMatchObject({ cause: { type: error!.code, nonRetryable: true } });
  const history = (await handle.fetchHistory()).events ?? [];
  // Stored like every failed turn: the message, its one error event, the conversation free for the next turn.
  expect([msg.status, msg.error_code]).toEqual(['failed', error!.code]);
  expect(await stack.db.messageEvent.count({ where: { message_id: messageId, event: 'error' } })).toBe(1);
  expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } })).active_message_id).toBeNull();
  return { ms, error: error!, events, messageId, history };
}

const ofType = (h: TurnResult['history'], type: string) =>
  h.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === type);

/** Local activities leave one marker each, whose data carries the attempt the result came from. */
function localActivityAttempts(h: TurnResult['history'], type: string): number[] {
  return h
    .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
    .map((e) => {
      const payload = e.markerRecordedEventAttributes!.details!.data!.payloads![0]!;
      return JSON.parse(Buffer.from(payload.data!).toString('utf8')) as { activity_type: string; attempt: number };
    })
    .filter((d) => d.activity_type === type)
    .map((d) => d.attempt);
}

/**
 * Failed before the backend, in the turn's preparation: since `prepare-in-run-agent` that runs inside runAgent, so
 * runAgent was scheduled once, started once (attempt 1) and failed for good; no prepareTurn local activity.
 */
function expectFailedInPrepare(r: TurnResult) {
  expect(r.error).toMatchObject({ code: 'agent_config_invalid', status: 400 });
  expect(localActivityAttempts(r.history, 'prepareTurn')).toEqual([]);
  expect(ofType(r.history, 'runAgent')).toHaveLength(1);
  const started = r.history.filter((e) => e.activityTaskStartedEventAttributes);
  expect(started.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
  const failed = r.history.filter((e) => e.activityTaskFailedEventAttributes);
  expect(failed).toHaveLength(1);
  expect(failed[0]!.activityTaskFailedEventAttributes!.failure?.applicationFailureInfo?.nonRetryable).toBe(true);
}

/** Refused by the backend: runAgent ran exactly once (its started event records the attempt that completed). */
function expectRefusedOnce(r: TurnResult) {
  expect(ofType(r.history, 'runAgent')).toHaveLength(1);
  const started = r.history.filter((e) => e.activityTaskStartedEventAttributes);
  expect(started.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
}

describe('a turn on a config that cannot run fails fast, once, naming the problem', () => {
  it('knowledge enabled without a dataset', async () => {
    const r = await failingTurn(CASES.knowledgeWithoutDataset);
    expectFailedInPrepare(r);
    expect(r.error.message).toContain('knowledge.dataset_ids: knowledge is enabled but no dataset is selected');
    expect(r.ms).toBeLessThan(FAST_MS);
  });

  it('knowledge enabled with a dataset that does not exist', async () => {
    const r = await failingTurn(CASES.knowledgeUnknownDataset);
    // Refused before the backend: the dataset check (core/domain/knowledge/validate.ts) finds no such dataset in the tenant.
    expectFailedInPrepare(r);
    expect(r.error.message).toMatch(/knowledge\.dataset_ids\[0\]/);
    expect(r.ms).toBeLessThan(FAST_MS);
  });

  it('a core tool name outside the four builtins', async () => {
    const r = await failingTurn(CASES.coreToolNotBuiltin);
    expectFailedInPrepare(r);
    expect(r.error.message).toContain(
      'tools.core[1]: builtin tools are current_time, calculator, scratchpad_set, scratchpad_get, http_request, json_query, text',
    );
    expect(r.error.message).toContain('web_search');
    expect(r.ms).toBeLessThan(FAST_MS);
  });

  it('a plugin tool name containing "."', async () => {
    const r = await failingTurn(CASES.pluginToolWithDot);
    expectFailedInPrepare(r);
    expect(r.error.message).toContain('tools.plugin[0].name: tool names may contain letters, digits, _ and - only');
    expect(r.ms).toBeLessThan(FAST_MS);
  });

  it('a plugin tool named like a builtin', async () => {
    const r = await failingTurn(CASES.pluginToolNamedLikeBuiltin);
    // Provider tools are offered as provider__name, so the clash with the builtin is gone; what is left wrong is a
    // provider that does not exist in the tenant (core/domain/tools/validate.ts), refused before the backend.
    expectFailedInPrepare(r);
    expect(r.error.message).toMatch(/tools\.plugin\[0\]\.provider/);
    expect(r.ms).toBeLessThan(FAST_MS);
  });

  it("the api's checks pass but the backend refuses (runtime without SHELLCTL_AUTH_TOKEN): failed on its 400, once", async () => {
    const r = await failingTurn(CASES.runtimeWithoutShellctlToken);
    expect(r.error).toMatchObject({ code: 'module_unavailable', status: 400 });
    expect(r.error.message).toContain("layer 'runtime'");
    expect(r.error.message).toContain('SHELLCTL_AUTH_TOKEN');
    expectRefusedOnce(r);
    expect(r.ms).toBeLessThan(FAST_MS);
    // The backend created nothing; the refusal is kept beside the client's error.
    expect(await backendRunsOf(stack.databaseUrl, r.messageId)).toBe(0);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: r.messageId } });
    expect((msg.metadata as { agent_failure?: unknown }).agent_failure).toMatchObject({
      reason: 'run_refused',
      code: 'module_unavailable',
    });
  });
});

describe('the console refuses a config that cannot run: 400 invalid_agent_config naming the field', () => {
  const consoleFetch = (path: string, method = 'GET', body?: unknown) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  async function refused(res: Response): Promise<{ message: string; issues: { path: string; message: string }[] }> {
    const body = (await res.json()) as { code: string; status: number; message: string; issues: { path: string; message: string }[] };
    expect([res.status, body.code, body.status], JSON.stringify(body)).toEqual([400, 'invalid_agent_config', 400]);
    // The shape the OpenAPI document gives it (api/openapi/console.ts).
    expect(CONSOLE_RESPONSES.InvalidAgentConfigResponse.safeParse(body).success).toBe(true);
    expect(body.issues.length).toBeGreaterThan(0);
    // The message names every issue's field.
    for (const i of body.issues) expect(body.message).toContain(i.path ? `${i.path}: ${i.message}` : i.message);
    return body;
  }

  const EXPECTED_PATH: Record<keyof typeof CASES, RegExp> = {
    knowledgeWithoutDataset: /^knowledge\.dataset_ids$/,
    // The dataset check (once the tables exist) names the id; the backend's registry the knowledge layer.
    knowledgeUnknownDataset: /^knowledge(\.dataset_ids\[0\])?$/,
    coreToolNotBuiltin: /^tools\.core\[1\]$/,
    pluginToolWithDot: /^tools\.plugin\[0\]\.name$/,
    pluginToolNamedLikeBuiltin: /^tools\.plugin(\[0\](\.provider|\.name)?)?$/,
    runtimeWithoutShellctlToken: /^runtime$/,
  };

  for (const [name, config] of Object.entries(CASES) as [keyof typeof CASES, Soul][]) {
    it(`${name}: the shared draft and the build draft are not saved`, async () => {
      const before = await (await consoleFetch('/agent/draft')).json();
      const shared = await refused(await consoleFetch('/agent/draft', 'PUT', { config }));
      expect(shared.issues[0]!.path).toMatch(EXPECTED_PATH[name]);
      expect(await (await consoleFetch('/agent/draft')).json()).toEqual(before);
      const build = await refused(await consoleFetch('/agent/build-draft', 'PUT', { config }));
      expect(build.issues).toEqual(shared.issues);
    });
  }

  it('names the value given and the backend reason', async () => {
    const core = await refused(await consoleFetch('/agent/draft', 'PUT', { config: CASES.coreToolNotBuiltin }));
    expect(core.message).toContain('web_search');
    const runtime = await refused(await consoleFetch('/agent/draft', 'PUT', { config: CASES.runtimeWithoutShellctlToken }));
    expect(runtime.message).toContain('SHELLCTL_AUTH_TOKEN');
  });

  it('publishing a draft that cannot run (saved before these checks) is refused and creates no version', async () => {
    const draft = await stack.db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: stack.demo!.agentId, draft_type: 'DRAFT' } });
    const versions = await stack.db.agentConfigVersion.count({ where: { agent_id: stack.demo!.agentId } });
    await stack.db.agentConfigDraft.update({ where: { id: draft.id }, data: { config: CASES.pluginToolWithDot as object } });
    try {
      const body = await refused(await consoleFetch('/agent/publish', 'POST', {}));
      expect(body.issues[0]!.path).toBe('tools.plugin[0].name');
      expect(await stack.db.agentConfigVersion.count({ where: { agent_id: stack.demo!.agentId } })).toBe(versions);
    } finally {
      await stack.db.agentConfigDraft.update({ where: { id: draft.id }, data: { config: draft.config as object } });
    }
  });

  it('a valid config still saves and publishes', async () => {
    const config = soul((s) => (s.prompt.system_prompt = 'Still valid.'));
    expect((await consoleFetch('/agent/draft', 'PUT', { config })).status).toBe(200);
    expect((await consoleFetch('/agent/build-draft', 'PUT', { config })).status).toBe(200);
    expect((await consoleFetch('/agent/publish', 'POST', {})).status).toBe(201);
  });
});

describe("the agent backend's registry", () => {
  const client = () => new AgentBackendClient(stack.agentBackendUrl, stack.config.AGENT_BACKEND_TOKEN);

  it('GET /modules lists every module with its availability and config schema', async () => {
    const { modules } = await client().listModules();
    const byName = new Map(modules.map((m) => [m.name, m]));
    expect(byName.get('core_tools')).toMatchObject({ capability: 'toolset', available: true, unavailable_reason: null });
    expect(JSON.stringify(byName.get('core_tools')!.config_schema)).toContain('scratchpad_get');
    expect(byName.get('runtime')).toMatchObject({ available: false });
    expect(byName.get('runtime')!.unavailable_reason).toContain('SHELLCTL_AUTH_TOKEN');
    expect(byName.get('llm')?.capability).toBe('model');
  });

  it('POST /compositions/validate answers as POST /runs would, and creates no run', async () => {
    const layers = [
      {
        name: 'execution_context',
        type: 'execution_context',
        deps: [],
        metadata: {},
        config: {
          tenant_id: 't',
          user_id: 'u',
          app_id: 'a',
          conversation_id: null,
          agent_id: 'g',
          agent_config_version_id: null,
          invoke_from: 'debugger',
        },
      },
      {
        name: 'llm',
        type: 'llm',
        deps: ['execution_context'],
        metadata: {},
        config: { provider: 'demo', model: 'demo-chat', execution_context: 'execution_context' },
      },
    ];
    const key = `validate-${crypto.randomUUID()}`;
    expect(await client().validateComposition({ composition: { schema_version: 1, layers }, idempotency_key: key })).toEqual({ ok: true });
    const bad = await client().validateComposition({
      composition: { schema_version: 1, layers: [...layers, { name: 'kb', type: 'knowledge_base', deps: [], metadata: {}, config: {} }] },
    });
    expect(bad).toEqual({
      ok: false,
      error: { code: 'unknown_module', status: 400, message: "layer 'kb': unknown module type 'knowledge_base'" },
    });
    const runs = await stack.db.$queryRawUnsafe<{ n: number }[]>(
      `select count(*)::int as n from agent_backend.runs where idempotency_key = $1`,
      key,
    );
    expect(runs[0]!.n).toBe(0);
  });

  it('both need the backend token', async () => {
    for (const [method, path] of [
      ['GET', '/modules'],
      ['POST', '/compositions/validate'],
    ]) {
      const res = await fetch(`${stack.agentBackendUrl}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: method === 'POST' ? '{}' : undefined,
      });
      expect(res.status, path).toBe(401);
    }
  });
});
