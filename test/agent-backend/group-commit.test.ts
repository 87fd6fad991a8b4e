/**
 * Group commit of the backend's event appends (docs/decisions/0014): several runs' appends in one statement on real
 * PostgreSQL keep every rule of a single append — the expected sequence number, the first terminal wins, a retried
 * append whose answer was lost finds its own event instead of writing it twice — and the GroupAppender sends an
 * append alone while the writer is idle and gathers the ones that arrive while a statement is in flight.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupAppender } from '../../agent-backend/events.js';
import { PgRunStore, type OwnedAppend, type StoredEvent } from '../../agent-backend/store.js';
import { createLogger } from '../../core/platform/logger.js';
import { startPg } from './harness.js';

let store: PgRunStore;
beforeAll(async () => {
  store = new PgRunStore((await startPg('group_commit')).url, createLogger('group-commit-test', 'silent'));
  await store.init();
});
afterAll(async () => {
  await store?.close();
});

const newRun = async (runId: string) =>
  (await store.createRun({ runId, idempotencyKey: null, purpose: 'agent_app', request: {}, ownerId: 'me' })).run;
const deltas = async (runId: string) => (await store.listEvents(runId, 0, 100)).map((e) => [e.id, e.type, e.data]);

describe('PgRunStore.appendOwnedEvents', () => {
  it("appends several runs' events in one statement under each run's own rules", async () => {
    for (const id of ['g-a', 'g-b', 'g-c', 'g-d']) await newRun(id);
    await store.appendEvent('g-c', 'agent_message_delta', { delta: 'c1' }, undefined, { expectedSeq: 1 });
    await store.appendEvent('g-d', 'run_succeeded', { output: 'd' }, { status: 'succeeded' }, { expectedSeq: 1 });
    const batch: OwnedAppend[] = [
      { runId: 'g-a', type: 'agent_message_delta', data: { delta: 'a1' }, expectedSeq: 1 },
      // Its first attempt committed (the answer was lost): found in place, not written again.
      { runId: 'g-c', type: 'agent_message_delta', data: { delta: 'c1' }, expectedSeq: 1 },
      // The run ended: nothing is appended after its terminal.
      { runId: 'g-d', type: 'agent_message_delta', data: { delta: 'late' }, expectedSeq: 2 },
      { runId: 'g-b', type: 'run_failed', data: { error: 'x' }, terminal: { status: 'failed', error: 'x' }, expectedSeq: 1 },
    ];
    const out = await store.appendOwnedEvents(batch);
    expect(out.map((s) => s?.id ?? null)).toEqual(['1', '1', null, '1']);
    expect(await deltas('g-a')).toEqual([['1', 'agent_message_delta', { delta: 'a1' }]]);
    expect(await deltas('g-c')).toEqual([['1', 'agent_message_delta', { delta: 'c1' }]]);
    expect(await deltas('g-d')).toEqual([['1', 'run_succeeded', { output: 'd' }]]);
    expect(await store.getRun('g-b')).toMatchObject({ status: 'failed', error: 'x', last_seq: 1 });
    expect((await store.getRun('g-a'))?.status).toBe('running');
    // A position taken by a different event is refused; the next one is appended after it.
    const next = await store.appendOwnedEvents([
      { runId: 'g-a', type: 'agent_message_delta', data: { delta: 'other' }, expectedSeq: 1 },
      { runId: 'g-c', type: 'agent_message_delta', data: { delta: 'c2' }, expectedSeq: 2 },
    ]);
    expect(next.map((s) => s?.id ?? null)).toEqual([null, '2']);
    expect(await deltas('g-a')).toHaveLength(1);
    await expect(
      store.appendOwnedEvents([
        { runId: 'g-c', type: 't', data: {}, expectedSeq: 3 },
        { runId: 'g-c', type: 't', data: {}, expectedSeq: 4 },
      ]),
    ).rejects.toThrow('one entry per run');
  });
});

describe('GroupAppender', () => {
  /** A store whose statements complete when the test says so. */
  function gatedStore() {
    const statements: Array<{ runs: string[]; release: () => void }> = [];
    const stored = (runId: string, type: string, data: unknown, seq: number): StoredEvent => ({
      id: String(seq),
      run_id: runId,
      type,
      data,
      created_at: new Date(0).toISOString(),
    });
    const gate = <T>(runs: string[], value: T) => new Promise<T>((resolve) => statements.push({ runs, release: () => resolve(value) }));
    return {
      statements,
      store: {
        appendEvent: (runId: string, type: string, data: unknown, _t?: unknown, opts?: { expectedSeq?: number }) =>
          gate([runId], stored(runId, type, data, opts?.expectedSeq ?? 0)),
        appendOwnedEvents: (entries: OwnedAppend[]) =>
          gate(
            entries.map((e) => e.runId),
            entries.map((e) => stored(e.runId, e.type, e.data, e.expectedSeq)),
          ),
      },
    };
  }
  const tick = () => new Promise((r) => setImmediate(r));

  it('sends an append alone when idle and gathers the appends that arrive while a statement is in flight', async () => {
    const { store: fake, statements } = gatedStore();
    const g = new GroupAppender(fake);
    const first = g.appendEvent('r1', 'agent_message_delta', { delta: 'a' }, undefined, { expectedSeq: 1 });
    await tick();
    expect(statements.map((s) => s.runs)).toEqual([['r1']]);
    const waiting = ['r2', 'r3', 'r2', 'r4'].map((r, i) =>
      g.appendEvent(r, 'agent_message_delta', { delta: `${i}` }, undefined, { expectedSeq: 2 }),
    );
    await tick();
    expect(statements).toHaveLength(1);
    statements[0]!.release();
    expect((await first)?.id).toBe('1');
    await tick();
    // One statement for the three runs that waited; r2's second append waits for the next (one per run).
    expect(statements.map((s) => s.runs)).toEqual([['r1'], ['r2', 'r3', 'r4']]);
    statements[1]!.release();
    await tick();
    expect(statements.map((s) => s.runs)[2]).toEqual(['r2']);
    statements[2]!.release();
    expect((await Promise.all(waiting)).map((s) => s?.run_id)).toEqual(['r2', 'r3', 'r2', 'r4']);
    expect(g.stats).toEqual({ statements: 3, appends: 5 });
  });
});
