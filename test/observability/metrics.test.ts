/**
 * Issue 20: every process's /metrics after a few real turns (success, failure, stop, ask_human): the counters and
 * histograms moved as they should, the Temporal SDK's worker metrics are there, no label carries an id, and
 * /readyz of each process says ready.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { parseProm, scrape, sum, type Sample } from './prom.js';

let stack: Stack;
let key: string;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

beforeAll(async () => {
  stack = await startTestStack('obs_metrics', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

const urls = () => ({ api: stack.apiUrl, worker: stack.workerHttpUrl!, backend: stack.agentBackendUrl });

async function scrapeAll(): Promise<Record<'api' | 'worker' | 'backend', Sample[]>> {
  const u = urls();
  const [api, worker, backend] = await Promise.all([scrape(u.api), scrape(u.worker), scrape(u.backend)]);
  return { api: parseProm(api), worker: parseProm(worker), backend: parseProm(backend) };
}

describe('metrics of the api, the worker and the agent backend', () => {
  it('move with a success, a failure, an ask_human pause (and a 409 behind it) and a stop; no label is an id', async () => {
    const before = await scrapeAll();

    const ok = await chat(stack.apiUrl, key, { query: 'Hello there', user: 'obs' });
    expect(ok.frames.at(-1)!.event).toBe('message_end');

    const failed = await chat(stack.apiUrl, key, { query: '/fail InvokeBadRequestError', user: 'obs' });
    const error = failed.frames.at(-1)!;
    expect(error.event).toBe('error');
    const failureCode = error.data.code as string;

    const asked = await chat(stack.apiUrl, key, { query: '/ask What is your name?', user: 'obs' });
    expect(asked.frames.some((f) => f.event === 'human_input_required')).toBe(true);
    const conversationId = asked.frames.at(-1)!.data.conversation_id as string;
    const busy = await chat(stack.apiUrl, key, { query: 'again', user: 'obs', conversation_id: conversationId });
    expect(busy.status).toBe(409);

    const res = await postChat(stack.apiUrl, key, { query: '/slow 40 /long 300', user: 'obs' });
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 2);
    const taskId = head[0]!.data.task_id as string;
    const stopped = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'obs' }),
    });
    expect(stopped.status).toBe(200);
    expect((await reader.read()).at(-1)!.event).toBe('message_end');

    // The workflows end just after their last event: wait for the worker to count the three that ended.
    let after = await scrapeAll();
    const ended = (s: Sample[]) => sum(s, 'agent_turns_completed_total') - sum(before.worker, 'agent_turns_completed_total');
    for (let i = 0; i < 100 && ended(after.worker) < 3; i++) {
      await new Promise((r) => setTimeout(r, 200));
      after = await scrapeAll();
    }
    const d = (part: 'api' | 'worker' | 'backend', name: string, labels: Record<string, string> = {}) =>
      sum(after[part], name, labels) - sum(before[part], name, labels);

    // api
    expect(d('api', 'agent_turns_started_total', { invoke_from: 'service-api' })).toBe(4);
    expect(d('api', 'agent_turn_lock_conflicts_total', { code: 'conversation_waiting_for_human' })).toBe(1);
    expect(d('api', 'agent_api_errors_total', { status: '409', code: 'conversation_waiting_for_human' })).toBe(1);
    expect(d('api', 'agent_turn_first_token_seconds_count')).toBeGreaterThanOrEqual(3);
    expect(d('api', 'agent_turn_end_seconds_count', { event: 'message_end' })).toBe(3); // success, ask_human's pause, stop
    expect(d('api', 'agent_turn_end_seconds_count', { event: 'error' })).toBe(1);
    expect(sum(after.api, 'agent_sse_connections_open')).toBe(0);
    expect(d('api', 'agent_model_calls_total', { provider: 'demo', outcome: 'ok' })).toBeGreaterThanOrEqual(2);
    expect(d('api', 'agent_model_calls_total', { provider: 'demo', outcome: 'error' })).toBe(1);
    expect(d('api', 'agent_model_calls_total', { provider: 'demo', outcome: 'aborted' })).toBe(1);
    expect(d('api', 'agent_model_tokens_total', { provider: 'demo', kind: 'completion' })).toBeGreaterThan(0);
    expect(d('api', 'agent_credits_charged_total', { provider: 'demo' })).toBeGreaterThan(0);
    expect(d('api', 'agent_model_call_seconds_count', { provider: 'demo' })).toBeGreaterThanOrEqual(4);
    expect(sum(after.api, 'agent_turns_waiting_for_human')).toBe(1);
    expect(sum(after.api, 'agent_turns_in_flight')).toBe(1); // the conversation held by its form

    // worker: outcomes from the workflows themselves, the pause, the event-log commits, Temporal's own metrics
    expect(d('worker', 'agent_turns_completed_total', { outcome: 'succeeded' })).toBe(1);
    expect(d('worker', 'agent_turns_completed_total', { outcome: 'failed', code: failureCode })).toBe(1);
    expect(d('worker', 'agent_turns_completed_total', { outcome: 'stopped' })).toBe(1);
    expect(d('worker', 'agent_turn_pauses_total')).toBe(1);
    expect(d('worker', 'agent_event_commit_seconds_count', { kind: 'terminal' })).toBe(4);
    expect(d('worker', 'agent_event_commit_seconds_count', { kind: 'text' })).toBeGreaterThan(0);
    const temporalNames = new Set(after.worker.filter((s) => s.name.startsWith('temporal_')).map((s) => s.name));
    expect(temporalNames).toContain('temporal_activity_schedule_to_start_latency_count');
    expect(temporalNames).toContain('temporal_workflow_completed');
    expect(sum(after.worker, 'temporal_activity_execution_latency_count', { activity_type: 'runAgent' })).toBeGreaterThanOrEqual(4);

    // agent backend: runs by terminal (ask_human's deferred call is a run_succeeded)
    expect(d('backend', 'agent_backend_runs_total', { terminal: 'run_succeeded' })).toBe(2);
    expect(d('backend', 'agent_backend_runs_total', { terminal: 'run_failed' })).toBe(1);
    expect(d('backend', 'agent_backend_runs_total', { terminal: 'run_cancelled' })).toBe(1);
    expect(d('backend', 'agent_backend_model_request_seconds_count', { outcome: 'ok' })).toBeGreaterThanOrEqual(4);
    expect(sum(after.backend, 'agent_backend_runs_active')).toBe(0);

    // Bounded labels: nothing that looks like an id (tenant, app, conversation, message, run, workflow).
    for (const [part, samples] of Object.entries(after)) {
      const ids = samples.flatMap((s) =>
        Object.entries(s.labels)
          .filter(([, v]) => UUID.test(v))
          .map(([k, v]) => `${part} ${s.name} ${k}=${v}`),
      );
      expect(ids).toEqual([]);
    }
  });

  it('each process is ready: api (database, Temporal, backend), worker (polling), backend (database, inner API)', async () => {
    const u = urls();
    const [api, worker, backend] = await Promise.all([u.api, u.worker, u.backend].map((x) => fetch(`${x}/readyz`)));
    expect(api!.status).toBe(200);
    expect((await worker!.json()) as unknown).toEqual({ status: 'ok', checks: { temporal: true, database: true, polling: true } });
    // The backend's readiness also reports the shell isolation in force (issue 27; test/workspace/runtime-lifecycle.test.ts).
    const ready = (await backend!.json()) as { status: string; checks: unknown; isolation: { shell: string } };
    expect(ready).toMatchObject({ status: 'ok', checks: { database: true, inner_api: true } });
    expect(ready.checks).toEqual({ database: true, inner_api: true });
    expect(['available', 'refused', 'unconfined', 'unavailable', 'unknown']).toContain(ready.isolation.shell);
  });
});
