/**
 * Test harness: embedded PostgreSQL (one per test file: own port, dir and database), the scripted
 * inner LLM, the real backend on an ephemeral port, and a small HTTP client for the run protocol.
 */
import type { ModuleRegistry } from '../../agent-backend/modules/registry.js';
import { noPluginTools } from '../../agent-backend/modules/types.js';
import { loadConfig, type Config, type Env } from '../../core/platform/config.js';
import { createLogger } from '../../core/platform/logger.js';
import { RunEvent, type AgentStreamEvent, type CreateRunRequest } from '../../core/protocol/run.js';
import { parseSse } from '../../core/platform/sse.js';
import { createAgentBackend, type AgentBackendOptions, type RunningBackend } from '../../agent-backend/server.js';
import { PgRunStore } from '../../agent-backend/store.js';
import { freshDatabase } from '../support/db.js';
import { FakeInnerLlm } from './fake-inner-llm.js';

export const TOKEN = 'test-backend-token';
export const INNER_KEY = 'test-inner-key';

/**
 * A fresh database on the run's shared embedded PostgreSQL (test/support/global-setup.ts), so test files
 * running in parallel never compete for a port. `pg.stop()` is a no-op: the global teardown stops it.
 */
export async function startPg(name: string, _port?: number): Promise<{ pg: { stop: () => Promise<void> }; url: string }> {
  const url = await freshDatabase(`agent_backend_${name}`);
  return { pg: { stop: async () => undefined }, url };
}

export interface TestBackend {
  url: string;
  /** The agent stub's unix socket (the stub is not on `url`). */
  stubSocket: string;
  store: PgRunStore;
  config: Config;
  instanceId: string;
  running: RunningBackend;
  client: RunClient;
  stop(opts?: { abandonRuns?: boolean }): Promise<void>;
}

export async function startBackend(opts: {
  databaseUrl: string;
  apiUrl: string;
  env?: Partial<Env>;
  options?: Partial<AgentBackendOptions>;
  registry?: ModuleRegistry;
}): Promise<TestBackend> {
  const config = loadConfig(
    {},
    {
      DATABASE_URL: opts.databaseUrl,
      AGENT_BACKEND_TOKEN: TOKEN,
      INNER_API_KEY: INNER_KEY,
      API_INTERNAL_URL: opts.apiUrl,
      BACKEND_DELTA_COALESCE_MS: 20,
      LOG_LEVEL: 'silent',
      ...opts.env,
    },
  );
  const logger = createLogger('agent-backend-test', config.LOG_LEVEL);
  const store = new PgRunStore(opts.databaseUrl, logger);
  await store.init();
  // No tool providers behind this backend's fake api: plugin tools answer "not available" (docs/tools.md).
  const backend = createAgentBackend({
    config,
    logger,
    store,
    registry: opts.registry,
    toolResolver: noPluginTools,
    options: { pollMs: 250, ...opts.options },
  });
  const running = await backend.start(0, '127.0.0.1');
  return {
    url: running.url,
    stubSocket: running.stubSocket,
    store,
    config,
    instanceId: backend.instanceId,
    running,
    client: new RunClient(running.url, config.AGENT_BACKEND_TOKEN),
    stop: async (o) => {
      await running.close(o);
      await store.close();
    },
  };
}

export class RunClient {
  constructor(
    readonly url: string,
    readonly token: string,
  ) {}

  request(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(this.url + p, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  async createRun(body: CreateRunRequest | Record<string, unknown>): Promise<{ run_id: string; status: string }> {
    const res = await this.request('POST', '/runs', body);
    const json = await res.json();
    if (res.status !== 202) throw new Error(`create run failed ${res.status}: ${JSON.stringify(json)}`);
    return json;
  }

  async status(runId: string) {
    return (await this.request('GET', `/runs/${runId}`)).json();
  }

  async cancel(runId: string, body: Record<string, unknown> = {}) {
    return this.request('POST', `/runs/${runId}/cancel`, body);
  }

  async page(runId: string, query = ''): Promise<{ run_id: string; events: RunEvent[]; next_cursor: string | null }> {
    const res = await this.request('GET', `/runs/${runId}/events${query}`);
    if (res.status !== 200) throw new Error(`events failed ${res.status}: ${await res.text()}`);
    return res.json();
  }

  /** Reads the SSE stream until the server closes it; every event is validated against RunEvent. */
  async sse(runId: string, opts: { after?: string; lastEventId?: string; onEvent?: (e: RunEvent) => void; signal?: AbortSignal } = {}) {
    const q = opts.after !== undefined ? `?after=${opts.after}` : '';
    const res = await fetch(`${this.url}/runs/${runId}/events/sse${q}`, {
      headers: { authorization: `Bearer ${this.token}`, ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}) },
      signal: opts.signal,
    });
    if (res.status !== 200 || !res.body) throw new Error(`sse failed ${res.status}`);
    const frames: Array<{ id?: string; event?: string }> = [];
    const events: RunEvent[] = [];
    for await (const f of parseSse(res.body)) {
      const e = RunEvent.parse(JSON.parse(f.data));
      frames.push({ id: f.id, event: f.event });
      events.push(e);
      opts.onEvent?.(e);
    }
    return { frames, events };
  }

  /** All events of a finished run (waits for the terminal event through SSE). */
  async untilTerminal(runId: string): Promise<RunEvent[]> {
    return (await this.sse(runId)).events;
  }
}

export interface CompositionOptions {
  systemPrompt?: string;
  query?: string;
  files?: unknown[];
  history?: boolean | { max_messages?: number };
  coreTools?: string[];
  pluginTools?: unknown[];
  askHuman?: boolean | Record<string, unknown>;
  config?: boolean;
  modelSettings?: Record<string, unknown>;
  /** More llm layer config (context_window, max_output, prices: what the api resolves from the catalogue). */
  llm?: Record<string, unknown>;
  extraLayers?: Array<Record<string, unknown>>;
}

export const EXECUTION_CONTEXT = {
  tenant_id: 'tenant-1',
  user_id: 'user-1',
  user_from: 'end-user',
  app_id: 'app-1',
  conversation_id: 'conv-1',
  agent_id: 'agent-1',
  agent_config_version_id: 'v1',
  invoke_from: 'service-api',
  signature: 'sig-abc',
} as const;

/** An Agent App composition in the api's layer order. */
export function agentAppComposition(o: CompositionOptions = {}) {
  const layers: Array<Record<string, unknown>> = [
    { name: 'agent_soul_prompt', type: 'agent_soul_prompt', config: { system_prompt: o.systemPrompt ?? 'You are a helpful agent.' } },
    { name: 'agent_app_user_prompt', type: 'agent_app_user_prompt', config: { text: o.query ?? 'Hello?', files: o.files ?? [] } },
    { name: 'execution_context', type: 'execution_context', config: { ...EXECUTION_CONTEXT } },
  ];
  if (o.history !== false) layers.push({ name: 'history', type: 'history', config: typeof o.history === 'object' ? o.history : {} });
  layers.push({
    name: 'llm',
    type: 'llm',
    deps: ['execution_context'],
    config: { provider: 'openai', model: 'gpt-test', model_settings: o.modelSettings ?? { temperature: 0.2 }, ...o.llm },
  });
  if (o.pluginTools) layers.push({ name: 'tools', type: 'tools', config: { tools: o.pluginTools } });
  if (o.coreTools) layers.push({ name: 'core_tools', type: 'core_tools', config: { tools: o.coreTools } });
  if (o.askHuman) layers.push({ name: 'ask_human', type: 'ask_human', config: typeof o.askHuman === 'object' ? o.askHuman : {} });
  layers.push(...(o.extraLayers ?? []));
  // After any runtime/shell of extraLayers: resource layers go Runtime → Shell → Config (the planner refuses others).
  if (o.config) layers.push({ name: 'config', type: 'config', config: {} });
  layers.push({ name: 'output', type: 'output', config: {} });
  return { schema_version: 1 as const, layers };
}

export function runRequest(
  o: CompositionOptions & {
    idempotency_key?: string;
    metadata?: Record<string, unknown>;
    session_snapshot?: unknown;
    deferred_tool_results?: unknown;
  } = {},
) {
  return {
    composition: agentAppComposition(o),
    purpose: 'agent_app',
    ...(o.idempotency_key ? { idempotency_key: o.idempotency_key } : {}),
    ...(o.metadata ? { metadata: o.metadata } : {}),
    ...(o.session_snapshot !== undefined ? { session_snapshot: o.session_snapshot } : {}),
    ...(o.deferred_tool_results !== undefined ? { deferred_tool_results: o.deferred_tool_results } : {}),
  };
}

/** Events without ids/timestamps, for exact sequence assertions. */
export function shape(events: RunEvent[]): string[] {
  return events.map((e) => {
    if (e.type !== 'pydantic_ai_event') return e.type;
    const d = e.data;
    const kind = d.part?.part_kind ?? d.delta?.part_delta_kind ?? '';
    return `${d.event_kind}${kind ? `:${kind}` : ''}${(d.tool_name ?? d.part?.tool_name) ? `:${d.tool_name ?? d.part?.tool_name}` : ''}`;
  });
}

export function textOf(events: RunEvent[]): string {
  return events.map((e) => (e.type === 'agent_message_delta' ? e.data.delta : '')).join('');
}

export async function startFake(): Promise<FakeInnerLlm> {
  const fake = new FakeInnerLlm();
  await fake.start();
  return fake;
}

/** The pydantic_ai_event payloads of a run, optionally of one event kind. */
export function aiEvents(events: RunEvent[], kind?: AgentStreamEvent['event_kind']): AgentStreamEvent[] {
  return events.flatMap((e) => (e.type === 'pydantic_ai_event' && (!kind || e.data.event_kind === kind) ? [e.data] : []));
}
