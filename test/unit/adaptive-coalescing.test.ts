/**
 * Batching that grows with load (docs/decisions/0014): the write window of a stream is today's alone and grows with
 * the streams in flight in the process; under load it ends on a shared clock slot so many runs' writes fall due
 * together. Shown on the window itself and on its two users, the backend's RunEmitter and runAgent's RunCommitter.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RunCommitter, textCommitGroup } from '../../activities/run-agent/commit.js';
import { RunEmitter } from '../../agent-backend/events.js';
import type { PgRunStore } from '../../agent-backend/store.js';
import type { Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { LOAD_MAX_FACTOR, loadFactor, streamWindowMs, windowDelayMs } from '../../core/platform/stream-window.js';

describe('the window under load', () => {
  it('is unchanged for a stream alone and grows with the streams in flight, up to a cap', () => {
    expect(loadFactor(0)).toBe(1);
    expect(loadFactor(1)).toBe(1);
    expect(streamWindowMs(100, 0, 1)).toBe(streamWindowMs(100, 0));
    expect(streamWindowMs(100, 2000, 1)).toBe(300);
    const grown = [1, 2, 5, 9, 32, 500].map((n) => streamWindowMs(100, 0, n));
    for (let i = 1; i < grown.length; i++) expect(grown[i]).toBeGreaterThanOrEqual(grown[i - 1]!);
    expect(grown[1]).toBeGreaterThan(grown[0]!);
    expect(streamWindowMs(100, 0, 500)).toBe(100 * LOAD_MAX_FACTOR);
    expect(streamWindowMs(100, 60_000, 500)).toBe(300 * LOAD_MAX_FACTOR);
  });

  it('ends exactly one window away alone, and on the next shared slot at or after it under load', () => {
    expect(windowDelayMs(1_234, 150, 100, 1)).toBe(150);
    // Two runs whose windows started at different moments fall due at the same instant.
    const dueA = 1_234 + windowDelayMs(1_234, 150, 100, 8);
    const dueB = 1_249 + windowDelayMs(1_249, 150, 100, 8);
    expect(dueA).toBe(1_400);
    expect(dueB).toBe(dueA);
    for (const now of [0, 1, 99, 1_234, 5_050]) {
      const d = windowDelayMs(now, 150, 100, 8);
      expect(d).toBeGreaterThanOrEqual(150);
      expect(d).toBeLessThan(250);
      expect((now + d) % 100).toBe(0);
    }
  });
});

describe("the backend's coalescing (RunEmitter) under load", () => {
  afterEach(() => vi.useRealTimers());

  async function eventsFor(inFlight: number | undefined, tokens = 100, everyMs = 20): Promise<string[]> {
    vi.useFakeTimers();
    const stored: string[] = [];
    const store = {
      appendEvent: async (_run: string, type: string, data: { delta?: string }) => {
        stored.push(type === 'agent_message_delta' ? (data.delta ?? '') : type);
        return { id: String(stored.length), run_id: 'run', type, data, created_at: new Date().toISOString() };
      },
    } as unknown as PgRunStore;
    const emitter = new RunEmitter(
      store,
      'run',
      { ms: 100, chars: 4096, ...(inFlight === undefined ? {} : { inFlight: () => inFlight }) },
      { onAppended: () => undefined, onRunEndedElsewhere: () => undefined },
      createLogger('adaptive-coalescing-test', 'silent'),
    );
    for (let i = 0; i < tokens; i++) {
      emitter.delta('text', 0, `t${i} `);
      await vi.advanceTimersByTimeAsync(everyMs);
    }
    await vi.advanceTimersByTimeAsync(2_000);
    await emitter.drain();
    return stored;
  }

  it('writes a stream alone as often as without load awareness, and a stream among 32 less often, losing nothing', async () => {
    const text = Array.from({ length: 100 }, (_, i) => `t${i} `).join('');
    const plain = await eventsFor(undefined);
    const alone = await eventsFor(1);
    const loaded = await eventsFor(32);
    expect(alone).toEqual(plain);
    for (const events of [alone, loaded]) {
      expect(events.join('')).toBe(text);
      // The first text is never held, under load neither.
      expect(events[0]).toBe('t0 ');
    }
    expect(loaded.length).toBeLessThan(alone.length * 0.75);
  });
});

describe("runAgent's debounce (RunCommitter) under load", () => {
  const committer = () =>
    new RunCommitter({} as Db, { id: 'm', conversation_id: 'c', created_at: new Date(0) }, { cursor: null, answer: '' }, () => undefined);

  it('holds text for the base window alone and longer, until a shared slot, among many runs', () => {
    const alone = committer();
    alone.addDelta('1', 'a', 1_010);
    expect(alone.dueIn(50, 1_010, 1)).toBe(50);
    const busy = committer();
    busy.addDelta('1', 'a', 1_010);
    const due = busy.dueIn(50, 1_010, 32)!;
    expect(due).toBeGreaterThan(50);
    expect((1_010 + due) % 50).toBe(0);
  });
});

describe("runAgent's text group commit", () => {
  it('commits a flush alone when idle and the flushes that arrive while one is in flight as one statement', async () => {
    const statements: Array<{ messages: string[]; release: () => void }> = [];
    const db = {
      $queryRaw: (strings: TemplateStringsArray, ...values: unknown[]) => {
        const grouped = strings.join('').includes('jsonb_to_recordset');
        const messages = grouped
          ? (JSON.parse(values[0] as string) as Array<{ message_id: string }>).map((e) => e.message_id)
          : [values[1] as string];
        return new Promise((resolve) =>
          statements.push({ messages, release: () => resolve(grouped ? messages.map((m) => ({ message_id: m })) : [{ seq: 1 }]) }),
        );
      },
    } as unknown as Db;
    const group = textCommitGroup(db);
    const entry = (messageId: string) => ({
      messageId,
      expectedCursor: null,
      newCursor: '1',
      text: 't',
      event: { event: 'agent_message' as const, sourceKey: `be:1:${messageId}`, data: {} as never },
    });
    const tick = () => new Promise((r) => setImmediate(r));
    const first = group.commit(entry('m1'));
    await tick();
    const rest = ['m2', 'm3', 'm4'].map((m) => group.commit(entry(m)));
    await tick();
    expect(statements.map((s) => s.messages)).toEqual([['m1']]);
    statements[0]!.release();
    expect(await first).toBe(true);
    await tick();
    expect(statements.map((s) => s.messages)).toEqual([['m1'], ['m2', 'm3', 'm4']]);
    statements[1]!.release();
    expect(await Promise.all(rest)).toEqual([true, true, true]);
    expect(group.stats).toEqual({ statements: 2, commits: 4 });
  });
});
