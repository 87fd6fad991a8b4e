/**
 * The project's Prometheus metrics (docs/operations.md "Observability"), one registry per component so that each process
 * exposes what it does on its own `/metrics` — also when `npm start` runs the api, the worker and the agent
 * backend in one process. Labels are bounded sets only (outcomes, error codes, providers and models of the
 * deployment's registry): never a tenant, app, user, conversation, message or run id.
 *
 * The `record*` helpers are what the rest of the code calls; they do nothing when metrics are off
 * (METRICS_ENABLED=false), so the bench can compare the hot path with and without them.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type Component = 'api' | 'worker' | 'agent_backend';

let enabled = true;

/** Process-wide: set once by each composition root from METRICS_ENABLED (default on). */
export function setMetricsEnabled(on: boolean): void {
  enabled = on;
}

export function metricsEnabled(): boolean {
  return enabled;
}

export const registries: Record<Component, Registry> = {
  api: new Registry(),
  worker: new Registry(),
  agent_backend: new Registry(),
};

const defaultsCollected = new Set<Component>();

/** Node's process metrics (CPU, memory, event-loop lag, GC) on a component's registry, once. */
export function collectProcessMetrics(component: Component): void {
  if (defaultsCollected.has(component)) return;
  defaultsCollected.add(component);
  collectDefaultMetrics({ register: registries[component] });
}

/** Seconds: from sub-second (first token on a warm path) to a long agent run. */
const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600];
/** Seconds: one database statement or transaction. */
const DB_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

// --- api ------------------------------------------------------------------------------------------
const api = [registries.api];

export const turnsStarted = new Counter({
  name: 'agent_turns_started_total',
  help: 'Turns started (a user message accepted and its workflow started), by where they came from.',
  labelNames: ['invoke_from'] as const,
  registers: api,
});

export const apiErrors = new Counter({
  name: 'agent_api_errors_total',
  help: 'Error answers of the api by HTTP status and error code (the code is one of the api’s fixed set).',
  labelNames: ['status', 'code'] as const,
  registers: api,
});

export const turnLockConflicts = new Counter({
  name: 'agent_turn_lock_conflicts_total',
  help: 'Messages refused with 409 because their conversation already has a turn in flight or waits for a form.',
  labelNames: ['code'] as const,
  registers: api,
});

export const rateLimitRefusals = new Counter({
  name: 'agent_rate_limit_refusals_total',
  help: 'Requests refused with 429 by the per-key / per-user limits.',
  registers: api,
});

export const sseConnectionsOpen = new Gauge({
  name: 'agent_sse_connections_open',
  help: 'Event streams (SSE) currently open on this api process.',
  registers: api,
});

export const timeToFirstToken = new Histogram({
  name: 'agent_turn_first_token_seconds',
  help: 'From a streaming chat request to the first answer text sent to its client.',
  buckets: LATENCY_BUCKETS,
  registers: api,
});

export const timeToMessageEnd = new Histogram({
  name: 'agent_turn_end_seconds',
  help: 'From a streaming chat request to the turn’s last event sent to its client, by that event.',
  labelNames: ['event'] as const,
  buckets: LATENCY_BUCKETS,
  registers: api,
});

export const modelCalls = new Counter({
  name: 'agent_model_calls_total',
  help: 'Model calls through the inner LLM endpoint, by provider, model and outcome (ok, error, aborted).',
  labelNames: ['provider', 'model', 'outcome'] as const,
  registers: api,
});

export const modelWarnings = new Counter({
  name: 'agent_model_warnings_total',
  help: 'Warnings of the provider package about model calls (a setting it dropped as unsupported, a compatibility mode), by provider, model, type and the setting named.',
  labelNames: ['provider', 'model', 'type', 'feature'] as const,
  registers: api,
});

export const modelCallSeconds = new Histogram({
  name: 'agent_model_call_seconds',
  help: 'Duration of one model call through the inner LLM endpoint.',
  labelNames: ['provider', 'model'] as const,
  buckets: LATENCY_BUCKETS,
  registers: api,
});

export const modelTokens = new Counter({
  name: 'agent_model_tokens_total',
  help: 'Tokens of model calls, by provider, model and kind (prompt, completion); estimated counts included.',
  labelNames: ['provider', 'model', 'kind'] as const,
  registers: api,
});

export const creditsCharged = new Counter({
  name: 'agent_credits_charged_total',
  help: 'Credits charged to tenants for model calls on system-hosted credentials.',
  labelNames: ['provider', 'model'] as const,
  registers: api,
});

// --- worker ---------------------------------------------------------------------------------------
const worker = [registries.worker];

export const turnsCompleted = new Counter({
  name: 'agent_turns_completed_total',
  help: 'Turn workflows that ended, by outcome and (for failures) the client error code.',
  labelNames: ['outcome', 'code'] as const,
  registers: worker,
});

export const turnPauses = new Counter({
  name: 'agent_turn_pauses_total',
  help: 'Turns that paused to wait for a human (ask_human form created).',
  registers: worker,
});

export const eventCommitSeconds = new Histogram({
  name: 'agent_event_commit_seconds',
  help: 'Event-log writes of runAgent (answer text, batches of events, the terminal commit), one transaction each.',
  labelNames: ['kind'] as const,
  buckets: DB_BUCKETS,
  registers: worker,
});

// --- agent backend --------------------------------------------------------------------------------
const backend = [registries.agent_backend];

export const backendRuns = new Counter({
  name: 'agent_backend_runs_total',
  help: 'Agent backend runs that ended, by terminal event (a deferred tool call is a run_succeeded).',
  labelNames: ['terminal'] as const,
  registers: backend,
});

export const backendModelRequests = new Histogram({
  name: 'agent_backend_model_request_seconds',
  help: 'Model requests of the agent loop to the api’s inner LLM endpoint, until the response started, by outcome.',
  labelNames: ['outcome'] as const,
  buckets: LATENCY_BUCKETS,
  registers: backend,
});

// --- helpers --------------------------------------------------------------------------------------

/** Provider and model names come from the deployment's registry; still, never let one grow a series without bound. */
function bounded(v: string): string {
  return v.length > 64 ? `${v.slice(0, 61)}...` : v;
}

export function recordApiError(status: number, code: string): void {
  if (!enabled) return;
  apiErrors.inc({ status: String(status), code: bounded(code) });
  if (status === 409 && (code === 'conversation_busy' || code === 'conversation_waiting_for_human')) turnLockConflicts.inc({ code });
  if (status === 429 && code === 'too_many_requests') rateLimitRefusals.inc();
}

export function recordTurnStarted(invokeFrom: string): void {
  if (enabled) turnsStarted.inc({ invoke_from: bounded(invokeFrom) });
}

export interface ModelCallRecord {
  provider: string;
  model: string;
  outcome: 'ok' | 'error' | 'aborted';
  seconds: number;
  tokens?: { prompt_tokens: number; completion_tokens: number };
  credits?: bigint;
}

export function recordModelCall(r: ModelCallRecord): void {
  if (!enabled) return;
  const provider = bounded(r.provider);
  const model = bounded(r.model);
  modelCalls.inc({ provider, model, outcome: r.outcome });
  modelCallSeconds.observe({ provider, model }, r.seconds);
  if (r.tokens) {
    modelTokens.inc({ provider, model, kind: 'prompt' }, r.tokens.prompt_tokens);
    modelTokens.inc({ provider, model, kind: 'completion' }, r.tokens.completion_tokens);
  }
  if (r.credits && r.credits > 0n) creditsCharged.inc({ provider, model }, Number(r.credits));
}

/** One warning of the provider package about a model call; `feature` is the package's setting name (a bounded set). */
export function recordModelWarning(r: { provider: string; model: string; type: string; feature?: string }): void {
  if (enabled)
    modelWarnings.inc({ provider: bounded(r.provider), model: bounded(r.model), type: bounded(r.type), feature: bounded(r.feature ?? '') });
}

/** Times `fn` into agent_event_commit_seconds{kind} (only when metrics are on). */
export async function timedCommit<T>(kind: 'text' | 'batch' | 'terminal', fn: () => Promise<T>): Promise<T> {
  if (!enabled) return fn();
  const end = eventCommitSeconds.startTimer({ kind });
  try {
    return await fn();
  } finally {
    end();
  }
}

export function recordTurnEnded(outcome: string, code: string | null): void {
  if (enabled) turnsCompleted.inc({ outcome: bounded(outcome), code: code ? bounded(code) : '' });
}

export function recordTurnPaused(): void {
  if (enabled) turnPauses.inc();
}

export function recordBackendRunEnded(terminal: string): void {
  if (enabled) backendRuns.inc({ terminal });
}

export function recordBackendModelRequest(outcome: 'ok' | 'error', seconds: number): void {
  if (enabled) backendModelRequests.observe({ outcome }, seconds);
}

/**
 * A streaming chat request's timings as its client sees them: the first `agent_message` (first token) and the
 * turn's last event (message_end or error), measured from when the request arrived. Re-attaches are not timed
 * (they start late by definition). Also keeps the open-streams gauge.
 */
export function streamObserver(startedAtMs: number | null): { onEvent: (event: string) => void; close: () => void } {
  if (!enabled) return { onEvent: () => undefined, close: () => undefined };
  sseConnectionsOpen.inc();
  let firstToken = startedAtMs === null;
  let closed = false;
  return {
    onEvent(event) {
      if (startedAtMs === null) return;
      if (!firstToken && event === 'agent_message') {
        firstToken = true;
        timeToFirstToken.observe((performance.now() - startedAtMs) / 1000);
      }
      if (event === 'message_end' || event === 'error') timeToMessageEnd.observe({ event }, (performance.now() - startedAtMs) / 1000);
    },
    close() {
      if (closed) return;
      closed = true;
      sseConnectionsOpen.dec();
    },
  };
}
