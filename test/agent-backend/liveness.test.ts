/**
 * The run lease at its production values (issue 30): renewed every second, lapsed after 5 s, checked every second by
 * every replica. A dead owner's run fails `backend_restarted` within seconds; a slow one (a model call silent for
 * longer than the lease) is never reaped; a run whose create answer was lost starts on the next create of its key.
 * (The GC pause and the database outage are in test/faults: they need a separate process to stop.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal, type RunEvent } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import { runRequest, startBackend, startFake, startPg, textOf } from './harness.js';
import pg from 'pg';

let dbUrl: string;
let fake: FakeInnerLlm;

beforeAll(async () => {
  dbUrl = (await startPg('liveness')).url;
  fake = await startFake();
});
afterAll(async () => {
  await fake?.stop();
});

const terminalOf = (events: RunEvent[]) => events.find(isTerminal)!;

async function sql(text: string, params: unknown[] = []): Promise<void> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    await c.query(text, params);
  } finally {
    await c.end();
  }
}

describe('the run lease at its defaults', () => {
  it("fails a dead owner's run within ~6 s of its last renewal, not after 30 s", async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    try {
      fake.script({ text: ['working '], hang: true });
      const { run_id } = await a.client.createRun(runRequest());
      const controller = new AbortController();
      await a.client
        .sse(run_id, { signal: controller.signal, onEvent: (e) => e.type === 'agent_message_delta' && controller.abort() })
        .catch(() => undefined);
      // A crash: nothing more is written, the lease is no longer renewed.
      await a.stop({ abandonRuns: true });
      const died = Date.now();
      const t = terminalOf(await b.client.untilTerminal(run_id));
      const detectedMs = Date.now() - died;
      expect(t.type).toBe('run_failed');
      if (t.type === 'run_failed') expect(t.data.reason).toBe('backend_restarted');
      expect(detectedMs).toBeLessThan(8_000);
    } finally {
      await b.stop();
    }
  }, 30_000);

  it('never reaps a run whose model call is silent for longer than the lease: the owner keeps renewing it', async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    try {
      // Two 6.5 s silences (before the text, before the usage): 13 s without a single event, 2.6 leases.
      fake.script({ text: ['slow but alive'], delayMs: 6_500 });
      const { run_id } = await a.client.createRun(runRequest());
      const events = await b.client.untilTerminal(run_id);
      expect(terminalOf(events).type).toBe('run_succeeded');
      expect(textOf(events)).toBe('slow but alive');
    } finally {
      await b.stop();
      await a.stop();
    }
  }, 40_000);
});

describe('a create whose insert committed but whose answer was lost', () => {
  it('is started by the next create of its idempotency key at once (same process)', async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    try {
      // What the lost answer leaves: the row, owned by this process, that no task executes.
      const req = runRequest({ idempotency_key: 'lost-answer-1' });
      const orphan = await a.store.createRun({
        runId: 'orphan-1',
        idempotencyKey: 'lost-answer-1',
        purpose: 'agent_app',
        request: req,
        ownerId: a.instanceId,
      });
      expect(orphan.created).toBe(true);
      fake.script({ text: ['adopted'] });
      const started = Date.now();
      const again = await a.client.createRun(req);
      expect(again.run_id).toBe('orphan-1');
      const events = await a.client.untilTerminal('orphan-1');
      expect(terminalOf(events).type).toBe('run_succeeded');
      expect(textOf(events)).toBe('adopted');
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      await a.stop();
    }
  });

  it('two repeated creates at once start it once', async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    try {
      const req = runRequest({ idempotency_key: 'lost-answer-3' });
      await a.store.createRun({
        runId: 'orphan-3',
        idempotencyKey: 'lost-answer-3',
        purpose: 'agent_app',
        request: req,
        ownerId: a.instanceId,
      });
      fake.script({ text: ['once'] });
      const calls = fake.calls.length;
      const [x, y] = await Promise.all([a.client.createRun(req), a.client.createRun(req)]);
      expect([x.run_id, y.run_id]).toEqual(['orphan-3', 'orphan-3']);
      const events = await a.client.untilTerminal('orphan-3');
      expect(events.filter((e) => e.type === 'run_started')).toHaveLength(1);
      expect(textOf(events)).toBe('once');
      expect(fake.calls.length - calls).toBe(1);
    } finally {
      await a.stop();
    }
  });

  it("is taken over by another replica once its creator's lease lapsed, and never while it is fresh or started", async () => {
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url });
    try {
      const req = runRequest({ idempotency_key: 'lost-answer-2' });
      await b.store.createRun({
        runId: 'orphan-2',
        idempotencyKey: 'lost-answer-2',
        purpose: 'agent_app',
        request: req,
        ownerId: 'a-live-peer',
      });
      // Fresh lease of another owner: left alone (it may be starting it right now).
      await b.client.createRun(req);
      expect(await b.store.getRun('orphan-2')).toMatchObject({ owner_id: 'a-live-peer', last_seq: 0 });
      // Its creator died (lease lapsed): the next create starts it here.
      await sql(`update agent_backend.runs set heartbeat_at = now() - interval '6 seconds' where run_id = 'orphan-2'`);
      fake.script({ text: ['taken over'] });
      await b.client.createRun(req);
      const events = await b.client.untilTerminal('orphan-2');
      expect(terminalOf(events).type).toBe('run_succeeded');
      expect((await b.store.getRun('orphan-2'))?.owner_id).toBe(b.instanceId);
      // A run that started (it has events) is never started again by a repeated create.
      const calls = fake.calls.length;
      await b.client.createRun(req);
      expect(fake.calls.length).toBe(calls);
    } finally {
      await b.stop();
    }
  });
});
