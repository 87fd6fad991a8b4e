/**
 * The registered prompt module names of seed 004 besides the Agent App's (issue 43 item 5): `workflow_node_job_prompt`
 * and `prompt` (instructions), `workflow_user_prompt` and `user_prompt` (the current user content), each in a
 * composition sent over the run protocol to the real backend, with what the model was sent checked at the scripted
 * inner LLM (the only stand-in). Also: the history layer's `initial_messages` (the api's rebuilt history after
 * `binding_lost`) seeds a run without a snapshot and is ignored with one.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import { EXECUTION_CONTEXT, startBackend, startFake, startPg, textOf, type TestBackend } from './harness.js';

let embedded: { stop: () => Promise<void> };
let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  const db = await startPg('prompt_modules');
  embedded = db.pg;
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url });
}, 120_000);

afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
  await embedded?.stop();
});

beforeEach(() => fake.reset());

/** A composition of the given prompt layers around the run's model (execution context, history, llm, output). */
function composition(
  prompts: Array<{ name: string; type: string; config: Record<string, unknown> }>,
  history: Record<string, unknown> = {},
) {
  return {
    schema_version: 1 as const,
    layers: [
      ...prompts,
      { name: 'execution_context', type: 'execution_context', config: { ...EXECUTION_CONTEXT } },
      { name: 'history', type: 'history', config: history },
      { name: 'llm', type: 'llm', deps: ['execution_context'], config: { provider: 'openai', model: 'gpt-test', model_settings: {} } },
      { name: 'output', type: 'output', config: {} },
    ],
  };
}

/** Runs the composition to its end; what the model was sent, and the run's answer and final snapshot. */
async function run(body: Record<string, unknown>) {
  fake.script({ text: ['Done', '.'] });
  const { run_id } = await backend.client.createRun({ purpose: 'workflow_node', ...body });
  const events = await backend.client.untilTerminal(run_id);
  const terminal = events.at(-1)!;
  expect(terminal.type).toBe('run_succeeded');
  const sent = fake.calls.at(-1)!.body.target.prompt_messages;
  const snapshot = (
    terminal.data as { session_snapshot: { layers: Array<{ name: string; runtime_state: { messages?: PromptMessage[] } }> } }
  ).session_snapshot;
  return { sent, answer: textOf(events), snapshot };
}

describe('issue 43 item 5: the registered prompt module names', () => {
  it('workflow_node_job_prompt is the instructions and workflow_user_prompt the user message of a workflow Agent node run', async () => {
    const { sent, answer } = await run({
      composition: composition([
        { name: 'job', type: 'workflow_node_job_prompt', config: { text: 'Summarise the ticket in one line.' } },
        { name: 'input', type: 'workflow_user_prompt', config: { text: 'Ticket #7: the printer is on fire.' } },
      ]),
    });
    expect(sent).toEqual([
      { role: 'system', content: 'Summarise the ticket in one line.' },
      { role: 'user', content: 'Ticket #7: the printer is on fire.' },
    ]);
    expect(answer).toBe('Done.');
  });

  it('prompt and user_prompt are convenience names of the same two roles; instructions of several layers keep composition order', async () => {
    const { sent } = await run({
      composition: composition([
        { name: 'rules', type: 'prompt', config: { text: 'Answer in French.' } },
        { name: 'job', type: 'workflow_node_job_prompt', config: { text: 'Be brief.' } },
        { name: 'question', type: 'user_prompt', config: { text: 'What is the capital of Italy?' } },
      ]),
    });
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatchObject({ role: 'system' });
    expect(sent[0]!.content).toMatch(/^Answer in French\.\s+Be brief\.$/);
    expect(sent[1]).toEqual({ role: 'user', content: 'What is the capital of Italy?' });
  });

  it('two user prompt layers are refused before any I/O: a run has one current user message', async () => {
    const res = await backend.client.request('POST', '/runs', {
      purpose: 'workflow_node',
      composition: composition([
        { name: 'a', type: 'workflow_user_prompt', config: { text: 'one' } },
        { name: 'b', type: 'user_prompt', config: { text: 'two' } },
      ]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain('at most one user_prompt layer, found 2');
    expect(fake.calls).toHaveLength(0);
  });

  it('the history layer’s initial_messages seed a run without a snapshot, and a snapshot wins over them', async () => {
    const initial: PromptMessage[] = [
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hello Ada.' },
    ];
    const layers = [{ name: 'q', type: 'user_prompt', config: { text: 'Who am I?' } }];
    const first = await run({ composition: composition(layers, { initial_messages: initial }) });
    expect(first.sent).toEqual([...initial, { role: 'user', content: 'Who am I?' }]);

    // With the snapshot of that run, initial_messages are not added again.
    const again = await run({
      composition: composition(layers, { initial_messages: [{ role: 'user', content: 'stale' }] }),
      session_snapshot: first.snapshot,
    });
    expect(again.sent.map((m) => m.content)).toEqual(['My name is Ada.', 'Hello Ada.', 'Who am I?', 'Done.', 'Who am I?']);
  });
});
