/**
 * Issue 20: one turn is one trace — the api's request span, the workflow start (client interceptor), the workflow
 * run (workflow interceptors, exported through the worker's sink), its activities, the agent backend's POST /runs,
 * the backend's model request and the api's inner LLM call all carry the same trace id, parented in that order.
 * The SDK's in-memory exporter stands in for an OTLP collector.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTracing, shutdownTracing } from '../../core/platform/tracing/index.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const exporter = new InMemorySpanExporter();
let stack: Stack;

beforeAll(async () => {
  initTracing({ serviceName: 'dify-agent-test', exporter });
  stack = await startTestStack('obs_tracing');
});
afterAll(async () => {
  await stack?.stop();
  await shutdownTracing();
});

const named = (spans: ReadableSpan[], name: string | RegExp) =>
  spans.filter((s) => (typeof name === 'string' ? s.name === name : name.test(s.name)));

describe('tracing', () => {
  it('puts a whole turn in one trace: api → workflow → activities → agent backend → inner LLM call', async () => {
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'Hello, trace me', user: 'tracer' });
    expect(frames.at(-1)!.event).toBe('message_end');

    const root = () => exporter.getFinishedSpans().find((s) => s.name === 'POST /v1/chat-messages');
    let spans: ReadableSpan[] = [];
    // Workflow spans reach the exporter when the workflow task that ends them completes: wait a little for them.
    for (let i = 0; i < 100; i++) {
      const r = root();
      spans = r ? exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === r.spanContext().traceId) : [];
      if (named(spans, /^RunWorkflow:agentTurn/).length && named(spans, 'POST /inner/api/agent/llm/invoke').length) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    const api = root()!;
    expect(api, 'the api request span').toBeDefined();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentOf = (s: ReadableSpan) => byId.get(s.parentSpanId ?? '');
    const one = (name: string | RegExp) => {
      const found = named(spans, name);
      expect(found.length, `${String(name)} in ${JSON.stringify(spans.map((s) => s.name))}`).toBeGreaterThan(0);
      return found[0]!;
    };

    const start = one(/^StartWorkflow:agentTurn/);
    const run = one(/^RunWorkflow:agentTurn/);
    const activity = one(/^RunActivity:runAgent/);
    const backendRun = one('POST /runs');
    const modelRequest = one('agent_backend.model_request');
    const llm = one('POST /inner/api/agent/llm/invoke');

    expect(parentOf(start)).toBe(api);
    expect(parentOf(run)).toBe(start);
    // Activities hang under the workflow (its StartActivity spans), never in a trace of their own.
    const ancestors = (s: ReadableSpan): ReadableSpan[] => {
      const p = parentOf(s);
      return p ? [p, ...ancestors(p)] : [];
    };
    expect(ancestors(activity)).toContain(run);
    // The turn's preparation runs inside runAgent (workflows/agent-turn.ts `prepare-in-run-agent`): no span of its own.
    expect(named(spans, /^RunActivity:prepareTurn/)).toHaveLength(0);
    expect(parentOf(backendRun)).toBe(activity);
    expect(ancestors(modelRequest)).toContain(backendRun);
    expect(parentOf(llm)).toBe(modelRequest);
    expect(backendRun.attributes.component).toBe('agent_backend');
    expect(llm.attributes.component).toBe('api');
  });
});
