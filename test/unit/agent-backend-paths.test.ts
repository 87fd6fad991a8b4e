/**
 * An agent backend path no test reached (issue 18 item 9): a second ask_human call in the same model
 * step is not a second form: the first call defers, the second gets an error observation the model sees.
 * Real backend over a real PostgreSQL, scripted inner LLM (test/agent-backend/harness.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from '../agent-backend/fake-inner-llm.js';
import { aiEvents, runRequest, startBackend, startFake, startPg, type TestBackend } from '../agent-backend/harness.js';

let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  const db = await startPg('paths');
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url });
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
