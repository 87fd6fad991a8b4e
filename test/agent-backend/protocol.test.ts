/**
 * Run protocol over real HTTP against the real backend, embedded PostgreSQL and the scripted inner LLM:
 * auth, request validation, idempotent create, event paging, SSE replay, and a plain text run.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RunEvent } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import {
  agentAppComposition,
  INNER_KEY,
  runRequest,
  shape,
  startBackend,
  startFake,
  startPg,
  textOf,
  type TestBackend,
} from './harness.js';

let embedded: { stop: () => Promise<void> };
let dbUrl: string;
let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  const db = await startPg('protocol', 55432);
  embedded = db.pg;
  dbUrl = db.url;
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url });
}, 120_000);

afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
  await embedded?.stop();
});

beforeEach(() => fake.reset());

describe('auth and validation', () => {
  it('answers 401 JSON without the backend token', async () => {
    const res = await fetch(`${backend.url}/runs`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'unauthorized', status: 401 });
    const wrong = await fetch(`${backend.url}/runs/x`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
  });

  it('rejects an unknown request field with 400 naming the field', async () => {
    const res = await backend.client.request('POST', '/runs', { ...runRequest(), api_key: 'sk-secret' });
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.code).toBe('invalid_request');
    expect(body.message).toContain("'api_key'");
  });

  it('rejects model credentials in the llm layer config', async () => {
    const req = runRequest();
    const llm = req.composition.layers.find((l) => l.type === 'llm')!;
    (llm.config as Record<string, unknown>).credentials = { api_key: 'sk' };
    const res = await backend.client.request('POST', '/runs', req);
    expect(res.status).toBe(400);
    expect((await res.json()).message).toMatch(/layer 'llm' config.*'credentials'/);
  });

  it('rejects an unknown module type with 400', async () => {
    const req = runRequest({ extraLayers: [{ name: 'evil', type: 'os_system', config: {} }] });
    const res = await backend.client.request('POST', '/runs', req);
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.code).toBe('unknown_module');
    expect(body.message).toContain("unknown module type 'os_system'");
  });

  it('rejects modules that are not available in this deployment', async () => {
    const res = await backend.client.request('POST', '/runs', runRequest({ extraLayers: [{ name: 'shell', type: 'shell', config: {} }] }));
    expect(res.status).toBe(400);
    // This backend has no SHELLCTL_AUTH_TOKEN: runtime/shell cannot run here (test/workspace covers them).
    expect((await res.json()).message).toContain(
      "layer 'shell': the runtime and shell modules need a deployment auth token for shellctl: set SHELLCTL_AUTH_TOKEN",
    );
  });

  it('rejects references to layers that do not exist', async () => {
    const req = runRequest();
    const llm = req.composition.layers.find((l) => l.type === 'llm')!;
    (llm.config as Record<string, unknown>).execution_context = 'missing_ctx';
    let res = await backend.client.request('POST', '/runs', req);
    expect(res.status).toBe(400);
    expect((await res.json()).message).toContain("execution_context refers to 'missing_ctx'");

    const req2 = runRequest();
    req2.composition.layers.find((l) => l.type === 'llm')!.deps = ['nowhere'];
    res = await backend.client.request('POST', '/runs', req2);
    expect(res.status).toBe(400);
    expect((await res.json()).message).toContain("dependency 'nowhere'");
  });

  it('rejects a session snapshot whose layer names differ from the composition', async () => {
    const composition = agentAppComposition();
    const names = composition.layers.map((l) => l.name as string);
    const snapshot = {
      schema_version: 1,
      layers: [...names.slice(0, -1), 'core_tools'].map((name) => ({ name, lifecycle_state: 'suspended', runtime_state: {} })),
    };
    const res = await backend.client.request('POST', '/runs', { composition, session_snapshot: snapshot });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.code).toBe('session_snapshot_mismatch');
    expect(body.message).toContain('do not match the composition layers');
    expect(fake.calls).toHaveLength(0);
  });

  it('answers 404 JSON for an unknown run', async () => {
    for (const p of ['/runs/nope', '/runs/nope/events', '/runs/nope/events/sse']) {
      const res = await backend.client.request('GET', p);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 'run_not_found' });
    }
    const res = await backend.client.cancel('nope');
    expect(res.status).toBe(404);
  });
});

describe('runs', () => {
  it('streams a text run: run_started, text part, coalesced deltas, run_succeeded with usage', async () => {
    fake.script({
      text: ['Hel', 'lo ', 'wor', 'ld'],
      usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, total_price: '0.0001' },
    });
    const { run_id, status } = await backend.client.createRun(runRequest({ query: 'Say hello' }));
    expect(status).toBe('running');
    const events = await backend.client.untilTerminal(run_id);

    const sh = shape(events);
    expect(sh[0]).toBe('run_started');
    expect(sh[1]).toBe('part_start:text');
    expect(sh.at(-3)).toBe('part_end:text');
    expect(sh.at(-2)).toBe('model_response');
    expect(sh.at(-1)).toBe('run_succeeded');
    expect(sh.slice(2, -3).every((s) => s === 'agent_message_delta')).toBe(true);
    const modelResponse = events.at(-2)!;
    expect(modelResponse.type === 'pydantic_ai_event' && modelResponse.data).toMatchObject({
      call_index: 0,
      usage: { prompt_tokens: 12, completion_tokens: 4, total_price: '0.0001' },
    });
    expect(textOf(events)).toBe('Hello world');
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => String(i + 1)));

    const terminal = events.at(-1)!;
    if (terminal.type !== 'run_succeeded') throw new Error('expected success');
    expect(terminal.data.output).toBe('Hello world');
    expect(terminal.data.usage).toMatchObject({
      prompt_tokens: 12,
      completion_tokens: 4,
      total_tokens: 16,
      total_price: '0.0001',
      model_requests: 1,
      tool_calls: 0,
    });
    expect(terminal.data.usage.latency).toBeGreaterThan(0);
    expect(terminal.data.usage.time_to_first_token).not.toBeNull();
    expect(terminal.data.session_snapshot.layers.map((l) => l.name)).toEqual(agentAppComposition().layers.map((l) => l.name));

    // The model call went to the inner endpoint with the run's identity and whitelisted settings.
    expect(fake.calls).toHaveLength(1);
    const call = fake.calls[0];
    expect(call.headers['x-inner-api-key']).toBe(INNER_KEY);
    expect(call.body.caller).toMatchObject({
      invocation_id: run_id,
      agent_run_id: run_id,
      call_index: 0,
      tenant_id: 'tenant-1',
      app_id: 'app-1',
    });
    expect(call.body.target).toMatchObject({ provider: 'openai', model: 'gpt-test', model_parameters: { temperature: 0.2 }, stream: true });
    expect(call.body.target.prompt_messages).toEqual([
      { role: 'system', content: 'You are a helpful agent.' },
      { role: 'user', content: 'Say hello' },
    ]);

    const st = await backend.client.status(run_id);
    expect(st).toMatchObject({ run_id, status: 'succeeded', error: null, error_type: null });
  });

  it('coalesces deltas up to BACKEND_DELTA_COALESCE_CHARS', async () => {
    fake.script({ text: Array.from({ length: 40 }, () => 'abcde') });
    const { run_id } = await backend.client.createRun(runRequest());
    const events = await backend.client.untilTerminal(run_id);
    const deltas = events.filter((e) => e.type === 'agent_message_delta');
    expect(textOf(events)).toBe('abcde'.repeat(40));
    // 40 tokens arrive without delay: far fewer events than tokens.
    expect(deltas.length).toBeLessThan(10);
  });

  it('appends the first delta of a part at once and coalesces only what follows (time to first token)', async () => {
    fake.script({ text: ['First', ' second', ' third', ' fourth'] });
    const { run_id } = await backend.client.createRun(runRequest());
    const events = await backend.client.untilTerminal(run_id);
    const deltas = events.filter((e) => e.type === 'agent_message_delta');
    // Without the rule the four tokens (no delay between them) would sit in one coalescing window.
    expect(deltas[0].data).toEqual({ delta: 'First' });
    expect(textOf(events)).toBe('First second third fourth');
  });

  it('returns the same run for the same idempotency key, even for concurrent creates', async () => {
    fake.script({ text: ['once'], delayMs: 50 });
    const req = runRequest({ idempotency_key: `idem-${Date.now()}` });
    const [a, b] = await Promise.all([backend.client.createRun(req), backend.client.createRun(req)]);
    expect(a.run_id).toBe(b.run_id);
    await backend.client.untilTerminal(a.run_id);
    const again = await backend.client.createRun(req);
    expect(again).toEqual({ run_id: a.run_id, status: 'succeeded' });
    expect(fake.calls).toHaveLength(1);
  });

  it('pages events with an exclusive cursor and bounded limit', async () => {
    fake.script({ text: ['a', 'b', 'c'], delayMs: 30 });
    const { run_id } = await backend.client.createRun(runRequest());
    const all = await backend.client.untilTerminal(run_id);
    expect(all.length).toBeGreaterThanOrEqual(5);

    const first = await backend.client.page(run_id, '?limit=2');
    expect(first.events.map((e) => e.id)).toEqual(['1', '2']);
    expect(first.next_cursor).toBe('2');
    const second = await backend.client.page(run_id, `?after=${first.next_cursor}&limit=2`);
    expect(second.events.map((e) => e.id)).toEqual(['3', '4']);
    const rest = await backend.client.page(run_id, '?after=4&limit=500');
    expect(rest.events.map((e) => e.id)).toEqual(all.slice(4).map((e) => e.id));
    const end = await backend.client.page(run_id, `?after=${all.at(-1)!.id}`);
    expect(end.events).toEqual([]);
    expect(end.next_cursor).toBe(all.at(-1)!.id);
    for (const e of first.events) RunEvent.parse(e);

    for (const q of ['?limit=0', '?limit=501', '?limit=abc', '?after=-1', '?after=x']) {
      const res = await backend.client.request('GET', `/runs/${run_id}/events${q}`);
      expect(res.status, q).toBe(400);
    }
  });

  it('orders events numerically past nine (ids are numbers, not strings)', async () => {
    fake.script({ text: Array.from({ length: 14 }, (_, i) => `w${i} `), delayMs: 30 });
    const { run_id } = await backend.client.createRun(runRequest());
    const live = await backend.client.untilTerminal(run_id);
    expect(live.length).toBeGreaterThan(11);
    const ids = live.map((e) => Number(e.id));
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    const page = await backend.client.page(run_id, '?after=5&limit=500');
    expect(page.events.map((e) => Number(e.id))).toEqual(ids.slice(5));
    expect((await backend.client.sse(run_id, { after: '8' })).events.map((e) => e.id)).toEqual(live.slice(8).map((e) => e.id));
  });

  it('replays SSE after a cursor, honours Last-Event-ID, and closes after the terminal event', async () => {
    fake.script({ text: ['one ', 'two ', 'three'], delayMs: 20 });
    const { run_id } = await backend.client.createRun(runRequest());
    const live = await backend.client.sse(run_id);
    const ids = live.events.map((e) => e.id);
    expect(live.frames.map((f) => f.id)).toEqual(ids);
    expect(live.frames.map((f) => f.event)).toEqual(live.events.map((e) => e.type));
    expect(live.events.at(-1)!.type).toBe('run_succeeded');

    const replay = await backend.client.sse(run_id, { after: '2' });
    expect(replay.events.map((e) => e.id)).toEqual(ids.slice(2));
    const resumed = await backend.client.sse(run_id, { after: '1', lastEventId: '3' });
    expect(resumed.events.map((e) => e.id)).toEqual(ids.slice(3));
    expect(replay.events).toEqual(live.events.slice(2));
    // Reconnecting after the terminal event: nothing to send, the stream closes at once.
    const after = await backend.client.sse(run_id, { lastEventId: ids.at(-1) });
    expect(after.events).toEqual([]);
  });

  it('fails the run with the provider error type as reason', async () => {
    fake.script({ text: ['partial'], errorChunk: { error_type: 'InvokeRateLimitError', message: 'slow down' } });
    const { run_id } = await backend.client.createRun(runRequest());
    const events = await backend.client.untilTerminal(run_id);
    const t = events.at(-1)!;
    expect(t.type).toBe('run_failed');
    if (t.type !== 'run_failed') return;
    expect(t.data.reason).toBe('InvokeRateLimitError');
    expect(t.data.error).toContain('slow down');
    expect(t.data.error_type ?? null).toBeNull();
    expect(t.data.output).toBe('partial');
    expect(t.data.usage?.model_requests).toBe(1);
    expect(t.data.session_snapshot).not.toBeNull();
    expect(await backend.client.status(run_id)).toMatchObject({ status: 'failed', error: t.data.error, error_type: null });
  });

  it('deletes ended runs and their events after the retention window', async () => {
    const { run_id } = await backend.client.createRun(runRequest());
    await backend.client.untilTerminal(run_id);
    await backend.store.deleteExpired(1);
    expect((await backend.client.request('GET', `/runs/${run_id}`)).status).toBe(200);
    const pool = new pg.Pool({ connectionString: dbUrl, max: 1 });
    try {
      await pool.query(`update agent_backend.runs set created_at = now() - interval '2 hours' where run_id = $1`, [run_id]);
      expect(await backend.store.deleteExpired(1)).toBeGreaterThanOrEqual(1);
      expect((await pool.query('select count(*)::int as n from agent_backend.events where run_id = $1', [run_id])).rows[0].n).toBe(0);
    } finally {
      await pool.end();
    }
    expect((await backend.client.request('GET', `/runs/${run_id}`)).status).toBe(404);
  });

  it('maps an HTTP error of the inner endpoint to the failure reason', async () => {
    // The gateway's credit exhaustion keeps its own code (the api tells the client it is a quota, issue 18).
    fake.script({ httpError: { status: 429, body: { code: 'agent_llm_quota_exceeded', message: 'quota exceeded' } } });
    const { run_id } = await backend.client.createRun(runRequest());
    const t = (await backend.client.untilTerminal(run_id)).at(-1)!;
    expect(t.type).toBe('run_failed');
    if (t.type === 'run_failed') {
      expect(t.data.reason).toBe('agent_llm_quota_exceeded');
      expect(t.data.error).toContain('quota exceeded');
    }
  });
});
