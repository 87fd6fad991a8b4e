/**
 * The agent loop end to end: tool steps, thinking, session snapshots and history continuity,
 * ask_human deferral and resume, cancellation, run limits and restart recovery.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTerminal, type RunEvent } from '../../core/protocol/run.js';
import { sleep, type FakeInnerLlm } from './fake-inner-llm.js';
import { aiEvents, runRequest, shape, startBackend, startFake, startPg, textOf, type TestBackend } from './harness.js';

let pg: { stop: () => Promise<void> };
let dbUrl: string;
let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  const db = await startPg('loop', 55433);
  pg = db.pg;
  dbUrl = db.url;
  fake = await startFake();
  backend = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
}, 120_000);

afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
  await pg?.stop();
});

beforeEach(() => fake.reset());

function terminalOf(events: RunEvent[]) {
  const terminals = events.filter(isTerminal);
  expect(terminals).toHaveLength(1);
  expect(events.at(-1)).toBe(terminals[0]);
  return terminals[0];
}

function succeeded(events: RunEvent[]) {
  const t = terminalOf(events);
  if (t.type !== 'run_succeeded') throw new Error(`expected run_succeeded, got ${t.type}: ${JSON.stringify(t.data)}`);
  return t.data;
}

describe('tool steps', () => {
  it('runs two tool calls then answers, with the exact event sequence', async () => {
    fake.script(
      {
        toolCalls: [
          { id: 'call_1', name: 'calculator', args: { expression: '6 * (3 + 4)' } },
          { id: 'call_2', name: 'scratchpad_set', args: { key: 'answer', value: '42' } },
        ],
      },
      { text: ['The answer ', 'is 42.'] },
    );
    const { run_id } = await backend.client.createRun(runRequest({ coreTools: ['calculator', 'scratchpad_set', 'scratchpad_get'] }));
    const events = await backend.client.untilTerminal(run_id);
    expect(shape(events)).toEqual([
      'run_started',
      'part_start:tool-call:calculator',
      'part_start:tool-call:scratchpad_set',
      // Each model request's usage follows its parts, before its tool calls run (issue 18).
      'model_response',
      'function_tool_call:calculator',
      'function_tool_result:calculator',
      'function_tool_call:scratchpad_set',
      'function_tool_result:scratchpad_set',
      'part_start:text',
      ...events.filter((e) => e.type === 'agent_message_delta').map(() => 'agent_message_delta'),
      'part_end:text',
      'model_response',
      'run_succeeded',
    ]);
    const calls = aiEvents(events, 'model_response');
    expect(calls.map((c) => c.call_index)).toEqual([0, 1]);
    for (const c of calls) expect(c.usage?.latency).toBeGreaterThanOrEqual(0);
    const calc = events.find(
      (e) => e.type === 'pydantic_ai_event' && e.data.event_kind === 'function_tool_result' && e.data.tool_name === 'calculator',
    );
    expect(calc?.data).toMatchObject({ index: 0, tool_call_id: 'call_1', result: { result: 42 }, is_error: false });
    const call = events.find(
      (e) => e.type === 'pydantic_ai_event' && e.data.event_kind === 'function_tool_call' && e.data.tool_name === 'scratchpad_set',
    );
    expect(call?.data).toMatchObject({ index: 1, tool_call_id: 'call_2', args: { key: 'answer', value: '42' } });

    // Part indexes are unique across the run: the answer of the second response is part 2.
    expect(aiEvents(events, 'part_start').map((e) => e.index)).toEqual([0, 1, 2]);
    const data = succeeded(events);
    expect(data.output).toBe('The answer is 42.');
    expect(data.usage).toMatchObject({
      model_requests: 2,
      tool_calls: 2,
      prompt_tokens: 20,
      completion_tokens: 10,
      total_price: '0.00006',
    });
    const tools = data.session_snapshot.layers.find((l) => l.name === 'core_tools');
    expect(tools?.runtime_state).toEqual({ scratchpad: { answer: '42' } });

    // The second model call saw the tool calls and their results, and was billed as call 1.
    expect(fake.calls).toHaveLength(2);
    expect(fake.calls[1].body.caller.call_index).toBe(1);
    expect(fake.calls[0].body.target.tools?.map((t) => t.name)).toEqual(['calculator', 'scratchpad_set', 'scratchpad_get']);
    const msgs = fake.calls[1].body.target.prompt_messages;
    expect(msgs.slice(-3)).toEqual([
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"6 * (3 + 4)"}' } },
          { id: 'call_2', type: 'function', function: { name: 'scratchpad_set', arguments: '{"key":"answer","value":"42"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', name: 'calculator', content: '{"expression":"6 * (3 + 4)","result":42}' },
      { role: 'tool', tool_call_id: 'call_2', name: 'scratchpad_set', content: '{"saved":"answer"}' },
    ]);
  });

  it('turns tool errors into observations the model sees', async () => {
    fake.script(
      {
        toolCalls: [
          { id: 'c1', name: 'calculator', args: { expression: '1 / 0' } },
          { id: 'c2', name: 'no_such_tool', args: {} },
          { id: 'c3', name: 'acme__web_search', args: { q: 'x' } },
          { id: 'c4', name: 'calculator', args: '{not json' },
        ],
      },
      { text: ['Sorry.'] },
    );
    const req = runRequest({
      coreTools: ['calculator'],
      pluginTools: [
        {
          provider: 'acme',
          name: 'web_search',
          description: 'Search',
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        },
      ],
    });
    const events = await backend.client.untilTerminal((await backend.client.createRun(req)).run_id);
    succeeded(events);
    const results = aiEvents(events, 'function_tool_result');
    expect(results.map((r) => [r.tool_call_id, r.is_error])).toEqual([
      ['c1', true],
      ['c2', true],
      ['c3', true],
      ['c4', true],
    ]);
    expect(String(results[0].result)).toContain('division by zero');
    expect(String(results[1].result)).toContain("Unknown tool 'no_such_tool'");
    expect(String(results[2].result)).toContain('tool not available: acme/web_search');
    expect(String(results[3].result)).toContain('not valid JSON');
  });

  it('publishes thinking as thinking part events and answer text as agent_message_delta', async () => {
    fake.script({ reasoning: ['Let me ', 'think.'], text: ['Done.'] });
    const events = await backend.client.untilTerminal((await backend.client.createRun(runRequest())).run_id);
    const sh = shape(events);
    expect(sh[0]).toBe('run_started');
    expect(sh[1]).toBe('part_start:thinking');
    expect(sh).toContain('part_delta:thinking');
    expect(sh).toContain('part_end:thinking');
    const thinking = events
      .filter((e) => e.type === 'pydantic_ai_event' && e.data.event_kind === 'part_delta')
      .map((e) => (e.type === 'pydantic_ai_event' ? e.data.delta?.content_delta : ''))
      .join('');
    expect(thinking).toBe('Let me think.');
    expect(textOf(events)).toBe('Done.');
  });
});

describe('session snapshots', () => {
  it('continues the conversation and tool state in a second run with the snapshot', async () => {
    fake.script(
      { toolCalls: [{ id: 'n1', name: 'scratchpad_set', args: { key: 'name', value: 'Ada' } }] },
      { text: ['Nice to meet you, Ada.'] },
      { toolCalls: [{ id: 'n2', name: 'scratchpad_get', args: { key: 'name' } }] },
      { text: ['Your name is Ada.'] },
    );
    const opts = { coreTools: ['scratchpad_set', 'scratchpad_get'] };
    const first = succeeded(
      await backend.client.untilTerminal((await backend.client.createRun(runRequest({ ...opts, query: 'I am Ada.' }))).run_id),
    );
    const history = first.session_snapshot.layers.find((l) => l.name === 'history')!;
    expect((history.runtime_state.messages as unknown[]).length).toBe(4);

    const second = await backend.client.untilTerminal(
      (await backend.client.createRun(runRequest({ ...opts, query: 'What is my name?', session_snapshot: first.session_snapshot }))).run_id,
    );
    const got = events2tool(second, 'scratchpad_get');
    expect(got).toMatchObject({ result: { key: 'name', value: 'Ada' }, is_error: false });
    expect(succeeded(second).output).toBe('Your name is Ada.');

    const sent = fake.calls[2].body.target.prompt_messages;
    expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    expect(sent[1]).toEqual({ role: 'user', content: 'I am Ada.' });
    expect(sent[4]).toEqual({ role: 'assistant', content: 'Nice to meet you, Ada.' });
    expect(sent[5]).toEqual({ role: 'user', content: 'What is my name?' });
  });

  it('keeps only max_messages of history without orphaned tool results', async () => {
    fake.script({ text: ['one'] }, { text: ['two'] });
    const a = succeeded(
      await backend.client.untilTerminal(
        (await backend.client.createRun(runRequest({ history: { max_messages: 3 }, query: 'q1' }))).run_id,
      ),
    );
    const b = succeeded(
      await backend.client.untilTerminal(
        (await backend.client.createRun(runRequest({ history: { max_messages: 3 }, query: 'q2', session_snapshot: a.session_snapshot })))
          .run_id,
      ),
    );
    const msgs = b.session_snapshot.layers.find((l) => l.name === 'history')!.runtime_state.messages as Array<{
      role: string;
      content: string;
    }>;
    expect(msgs.map((m) => m.content)).toEqual(['one', 'q2', 'two']);
  });
});

function events2tool(events: RunEvent[], tool: string) {
  return aiEvents(events, 'function_tool_result').find((e) => e.tool_name === tool);
}

describe('ask_human', () => {
  const question = {
    title: 'Deploy?',
    question: 'Shall I deploy to production?',
    fields: [{ type: 'paragraph', name: 'note', label: 'Note' }],
    actions: [
      { id: 'approve', label: 'Approve', style: 'primary' },
      { id: 'reject', label: 'Reject', style: 'destructive' },
    ],
  };

  it('defers the call, retries after invalid args, and resumes with the human answer', async () => {
    fake.script(
      { toolCalls: [{ id: 'bad', name: 'ask_human', args: { question: '', fields: [{ type: 'paragraph', name: '1x', label: 'x' }] } }] },
      { text: ['I need your approval.'], toolCalls: [{ id: 'ask_1', name: 'ask_human', args: question }] },
    );
    const first = await backend.client.untilTerminal(
      (await backend.client.createRun(runRequest({ askHuman: true, query: 'Deploy it' }))).run_id,
    );
    const invalid = events2tool(first, 'ask_human');
    expect(invalid?.is_error).toBe(true);
    expect(String(invalid?.result)).toContain('Invalid arguments');
    const data = succeeded(first);
    expect(data.deferred_tool_call).toMatchObject({
      tool_call_id: 'ask_1',
      tool_name: 'ask_human',
      args: { ...question, urgency: 'normal', fields: [{ type: 'paragraph', name: 'note', label: 'Note', required: false }] },
      metadata: { layer: 'ask_human' },
    });
    expect(data.output).toBe('I need your approval.');
    expect(data.usage.tool_calls).toBe(2);

    fake.script({ text: ['Deploying now.'] });
    const answer = {
      status: 'submitted',
      action: { id: 'approve', label: 'Approve' },
      values: { note: 'go' },
      rendered_content: 'Approved: go',
    };
    const resumed = await backend.client.untilTerminal(
      (
        await backend.client.createRun(
          runRequest({
            askHuman: true,
            query: 'Deploy it',
            session_snapshot: data.session_snapshot,
            deferred_tool_results: { calls: { ask_1: answer } },
          }),
        )
      ).run_id,
    );
    expect(shape(resumed).slice(0, 2)).toEqual(['run_started', 'function_tool_result:ask_human']);
    expect(succeeded(resumed).output).toBe('Deploying now.');
    const sent = fake.calls[2].body.target.prompt_messages;
    // The re-sent query is not added again; the answer follows the deferred call.
    expect(sent.filter((m) => m.role === 'user')).toHaveLength(1);
    expect(sent.at(-1)).toEqual({ role: 'tool', tool_call_id: 'ask_1', name: 'ask_human', content: JSON.stringify(answer) });
  });

  it('closes a dangling deferred call as unavailable when the conversation moves on', async () => {
    fake.script({ toolCalls: [{ id: 'ask_2', name: 'ask_human', args: { question: 'Which color?' } }] });
    const first = succeeded(await backend.client.untilTerminal((await backend.client.createRun(runRequest({ askHuman: true }))).run_id));
    expect(first.deferred_tool_call?.tool_call_id).toBe('ask_2');

    fake.script({ text: ['Fine.'] });
    await backend.client.untilTerminal(
      (await backend.client.createRun(runRequest({ askHuman: true, query: 'Never mind', session_snapshot: first.session_snapshot })))
        .run_id,
    );
    const sent = fake.calls[1].body.target.prompt_messages;
    expect(sent.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: 'ask_2', name: 'ask_human', content: '{"status":"unavailable"}' },
      { role: 'user', content: 'Never mind' },
    ]);
  });

  it('adds the new query of a turn that abandons a pending form (deferred result unavailable)', async () => {
    fake.script({ toolCalls: [{ id: 'ask_3', name: 'ask_human', args: { question: 'Size?' } }] }, { text: ['OK, new topic.'] });
    const first = succeeded(
      await backend.client.untilTerminal((await backend.client.createRun(runRequest({ askHuman: true, query: 'Order a shirt' }))).run_id),
    );
    await backend.client.untilTerminal(
      (
        await backend.client.createRun(
          runRequest({
            askHuman: true,
            query: 'Something else',
            session_snapshot: first.session_snapshot,
            deferred_tool_results: { calls: { ask_3: { status: 'unavailable' } } },
          }),
        )
      ).run_id,
    );
    const sent = fake.calls[1].body.target.prompt_messages;
    expect(sent.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['Order a shirt', 'Something else']);
    expect(sent.at(-2)).toEqual({ role: 'tool', tool_call_id: 'ask_3', name: 'ask_human', content: '{"status":"unavailable"}' });
  });
});

describe('cancellation', () => {
  it('cancels mid-stream: run_cancelled with snapshot and usage, inner request aborted', async () => {
    fake.script({ text: Array.from({ length: 200 }, (_, i) => `t${i} `), delayMs: 20 });
    const { run_id } = await backend.client.createRun(runRequest());
    let cancel: Promise<Response> | null = null;
    const { events } = await backend.client.sse(run_id, {
      onEvent: (e) => {
        if (e.type === 'agent_message_delta' && !cancel)
          cancel = backend.client.cancel(run_id, { reason: 'user_stop', message: 'stopped by user' });
      },
    });
    const res = await cancel!;
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ run_id, status: 'running' });

    const t = terminalOf(events);
    expect(t.type).toBe('run_cancelled');
    if (t.type !== 'run_cancelled') return;
    expect(t.data).toMatchObject({ reason: 'user_stop', message: 'stopped by user' });
    expect(t.data.usage?.model_requests).toBe(1);
    expect(t.data.output).toBe(textOf(events));
    expect(t.data.output?.length).toBeGreaterThan(0);
    const history = t.data.session_snapshot?.layers.find((l) => l.name === 'history');
    expect(history?.runtime_state.messages).toEqual([
      { role: 'user', content: 'Hello?' },
      { role: 'assistant', content: t.data.output },
    ]);
    expect(await fake.calls[0].ended).toEqual({ aborted: true });

    const again = await backend.client.cancel(run_id);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ run_id, status: 'cancelled' });
    expect(await backend.client.status(run_id)).toMatchObject({ status: 'cancelled', error: null });
  });

  it('answers 409 when cancelling a run that already succeeded', async () => {
    const { run_id } = await backend.client.createRun(runRequest());
    await backend.client.untilTerminal(run_id);
    const res = await backend.client.cancel(run_id);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'run_already_ended' });
  });

  it('has exactly one terminal event when cancel races success', async () => {
    for (let i = 0; i < 6; i++) {
      fake.script({ text: ['quick'], delayMs: i * 3 });
      const { run_id } = await backend.client.createRun(runRequest());
      await sleep(i * 4);
      const res = await backend.client.cancel(run_id);
      const events = await backend.client.untilTerminal(run_id);
      const t = terminalOf(events);
      const st = await backend.client.status(run_id);
      if (res.status === 409) expect(t.type).toBe('run_succeeded');
      else expect([200, 202]).toContain(res.status);
      expect(st.status).toBe(t.type === 'run_succeeded' ? 'succeeded' : 'cancelled');
      const all = await backend.client.page(run_id, '?limit=500');
      expect(all.events.filter(isTerminal)).toHaveLength(1);
    }
  });
});

describe('limits', () => {
  it('fails with agent_run_limit_exceeded when the model request budget is spent', async () => {
    fake.fallback = { toolCalls: [{ id: 'loop', name: 'calculator', args: { expression: '1+1' } }] };
    try {
      const req = runRequest({ coreTools: ['calculator'], metadata: { limits: { max_model_requests: 2 } } });
      const events = await backend.client.untilTerminal((await backend.client.createRun(req)).run_id);
      const t = terminalOf(events);
      expect(t.type).toBe('run_failed');
      if (t.type !== 'run_failed') return;
      expect(t.data.error_type).toBe('agent_run_limit_exceeded');
      expect(t.data.error).toContain('2 model requests');
      expect(t.data.usage).toMatchObject({ model_requests: 2, tool_calls: 2 });
      expect(t.data.session_snapshot).not.toBeNull();
      expect(fake.calls).toHaveLength(2);
    } finally {
      fake.fallback = { text: ['ok'] };
    }
  });

  it('fails with agent_run_limit_exceeded when the tool call budget is spent', async () => {
    fake.script({
      text: ['Working on it'],
      toolCalls: [
        { id: 'a', name: 'calculator', args: { expression: '1' } },
        { id: 'b', name: 'calculator', args: { expression: '2' } },
      ],
    });
    const req = runRequest({ coreTools: ['calculator'], metadata: { limits: { max_tool_calls: 1 } } });
    const { run_id } = await backend.client.createRun(req);
    const t = terminalOf(await backend.client.untilTerminal(run_id));
    expect(t.type).toBe('run_failed');
    if (t.type !== 'run_failed') return;
    expect(t.data).toMatchObject({ error_type: 'agent_run_limit_exceeded', output: 'Working on it' });
    expect(t.data.session_snapshot).not.toBeNull();
    expect(await backend.client.status(run_id)).toMatchObject({ status: 'failed', error_type: 'agent_run_limit_exceeded' });
  });

  it('fails with reason run_timeout (no error_type) after the wall-clock limit', async () => {
    fake.script({ text: ['slow'], hang: true });
    const { run_id } = await backend.client.createRun(runRequest({ metadata: { limits: { max_wall_clock_ms: 300 } } }));
    const t = terminalOf(await backend.client.untilTerminal(run_id));
    expect(t.type).toBe('run_failed');
    if (t.type !== 'run_failed') return;
    expect(t.data.reason).toBe('run_timeout');
    expect(t.data.error_type ?? null).toBeNull();
    expect(t.data.output).toBe('slow');
    expect(await fake.calls[0].ended).toEqual({ aborted: true });
  });
});

describe('replicas', () => {
  it('serves live events and cancels through another replica over the same database', async () => {
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url, options: { pollMs: 10_000 } });
    try {
      fake.script({ text: Array.from({ length: 200 }, (_, i) => `w${i} `), delayMs: 20 });
      const { run_id } = await backend.client.createRun(runRequest());
      let cancel: Promise<Response> | null = null;
      // pollMs is 10 s on replica b: only NOTIFY can deliver these events in time.
      const { events } = await b.client.sse(run_id, {
        onEvent: (e) => {
          if (e.type === 'agent_message_delta' && !cancel) cancel = b.client.cancel(run_id, { reason: 'user_stop' });
        },
      });
      expect((await cancel!)?.status).toBe(202);
      const t = terminalOf(events);
      expect(t.type).toBe('run_cancelled');
      expect(await fake.calls[0].ended).toEqual({ aborted: true });
    } finally {
      await b.stop();
    }
  });
});

describe('restart', () => {
  it('does not reap a long run whose owner keeps heartbeating', async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url, options: { heartbeatMs: 100 } });
    const b = await startBackend({
      databaseUrl: dbUrl,
      apiUrl: fake.url,
      options: { staleAfterMs: 400, reapIntervalMs: 100, heartbeatMs: 100 },
    });
    try {
      fake.script({ text: Array.from({ length: 20 }, (_, i) => `s${i} `), delayMs: 50 });
      const { run_id } = await a.client.createRun(runRequest());
      const t = terminalOf(await b.client.untilTerminal(run_id));
      expect(t.type).toBe('run_succeeded');
    } finally {
      await b.stop();
      await a.stop();
    }
  });

  it('fails a run whose backend process died with reason backend_restarted', async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url, options: { heartbeatMs: 100 } });
    fake.script({ text: ['working'], hang: true });
    const { run_id } = await a.client.createRun(runRequest());
    const controller = new AbortController();
    await a.client
      .sse(run_id, { signal: controller.signal, onEvent: (e) => e.type === 'agent_message_delta' && controller.abort() })
      .catch(() => undefined);
    await a.stop({ abandonRuns: true });
    expect((await backend.client.status(run_id)).status).toBe('running');

    const b = await startBackend({
      databaseUrl: dbUrl,
      apiUrl: fake.url,
      options: { staleAfterMs: 400, reapIntervalMs: 100, heartbeatMs: 100 },
    });
    try {
      const events = await b.client.untilTerminal(run_id);
      const t = terminalOf(events);
      expect(t.type).toBe('run_failed');
      if (t.type === 'run_failed') expect(t.data.reason).toBe('backend_restarted');
      expect(await b.client.status(run_id)).toMatchObject({ status: 'failed' });
    } finally {
      await b.stop();
    }
  });
});
