/**
 * Agent backend paths no test reached (issue 18 item 9): a second ask_human call in the same model step
 * is not a second form (the first call defers, the second gets an error observation the model sees); the
 * resources a run's layers acquired are released in `finally` when the run fails or is cancelled.
 * Real backend over a real PostgreSQL, scripted inner LLM (test/agent-backend/harness.ts).
 */
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRegistry } from '../../agent-backend/modules/registry.js';
import { defineModule } from '../../agent-backend/modules/types.js';
import { isTerminal } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from '../agent-backend/fake-inner-llm.js';
import { aiEvents, runRequest, startBackend, startFake, startPg, type TestBackend } from '../agent-backend/harness.js';

let fake: FakeInnerLlm;
let backend: TestBackend;

/** Run ids whose `lease_probe` resource was released. */
const released: string[] = [];
/** A layer that acquires one resource per run (as shell sessions or runtime leases do) and records its release. */
const leaseProbe = defineModule<Record<string, never>, Record<string, never>>({
  name: 'lease_probe',
  capability: 'resource',
  description: 'test: records the release of its resource',
  configSchema: z.object({}).strict() as unknown as z.ZodType<Record<string, never>>,
  stateSchema: z.object({}) as unknown as z.ZodType<Record<string, never>>,
  initialState: () => ({}),
  create: ({ name, state, services }) => ({
    name,
    type: 'lease_probe',
    state,
    capability: { kind: 'resource' },
    async enter() {
      services.resources.acquire('probe', services.runId, () => void released.push(services.runId));
    },
  }),
});
const probeLayer = { name: 'probe', type: 'lease_probe', config: {} };

beforeAll(async () => {
  const db = await startPg('paths');
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url, registry: createRegistry([leaseProbe]) });
}, 120_000);
afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
});

describe('ask_human', () => {
  it('a second call in one run gets an error observation; only the first is deferred', async () => {
    fake.script({
      toolCalls: [
        { id: 'ask_a', name: 'ask_human', args: { question: 'First question?' } },
        { id: 'ask_b', name: 'ask_human', args: { question: 'Second question?' } },
      ],
    });
    const { run_id } = await backend.client.createRun(runRequest({ askHuman: true, query: 'Ask me twice' }));
    const events = await backend.client.untilTerminal(run_id);
    const terminal = events.filter(isTerminal);
    expect(terminal.map((e) => e.type)).toEqual(['run_succeeded']);
    const data = terminal[0]!.data as { deferred_tool_call?: { tool_call_id: string } };
    expect(data.deferred_tool_call?.tool_call_id).toBe('ask_a');
    const results = aiEvents(events, 'function_tool_result');
    expect(results.map((r) => [r.tool_call_id, r.is_error])).toEqual([['ask_b', true]]);
    expect(String(results[0]!.result)).toBe('Only one ask_human call per turn: ask one question at a time.');
  });
});

describe("a run's resources", () => {
  it('are released when the run fails', async () => {
    fake.script({ text: ['Half '], errorChunk: { error_type: 'InvokeServerUnavailableError', message: 'provider down' } });
    const { run_id } = await backend.client.createRun(runRequest({ extraLayers: [probeLayer] }));
    const events = await backend.client.untilTerminal(run_id);
    expect(events.filter(isTerminal).map((e) => e.type)).toEqual(['run_failed']);
    expect(released).toContain(run_id);
  });

  it('are released when the run is cancelled mid-stream', async () => {
    fake.script({ text: Array.from({ length: 200 }, (_, i) => `t${i} `), delayMs: 20 });
    const { run_id } = await backend.client.createRun(runRequest({ extraLayers: [probeLayer] }));
    let cancel: Promise<Response> | null = null;
    const { events } = await backend.client.sse(run_id, {
      onEvent: (e) => {
        if (e.type === 'agent_message_delta' && !cancel) cancel = backend.client.cancel(run_id, { reason: 'user_stop' });
      },
    });
    await cancel;
    expect(events.filter(isTerminal).map((e) => e.type)).toEqual(['run_cancelled']);
    expect(released).toContain(run_id);
  });
});
