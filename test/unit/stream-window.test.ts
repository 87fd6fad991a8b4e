/**
 * The write window of a stream (core/platform/stream-window.ts) and its two users: the backend's delta coalescing and
 * runAgent's debounce. The window starts at the base, grows by the base per second of the stream, and stops at 3×.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RunCommitter } from '../../activities/run-agent/commit.js';
import { RunEmitter } from '../../agent-backend/events.js';
import type { PgRunStore } from '../../agent-backend/store.js';
import { createLogger } from '../../core/platform/logger.js';
import type { Db } from '../../core/platform/db.js';
import { streamWindowMs } from '../../core/platform/stream-window.js';

describe('streamWindowMs', () => {
  it('is the base for a young stream, grows with its age and is capped at three times the base', () => {
    expect(streamWindowMs(100, 0)).toBe(100);
    expect(streamWindowMs(100, -5)).toBe(100);
    expect(streamWindowMs(100, 500)).toBe(150);
    expect(streamWindowMs(100, 1000)).toBe(200);
    expect(streamWindowMs(100, 2000)).toBe(300);
    expect(streamWindowMs(100, 60_000)).toBe(300);
    expect(streamWindowMs(50, 1000)).toBe(100);
  });
});

describe("runAgent's debounce window", () => {
  const committer = () =>
    new RunCommitter({} as Db, { id: 'm', conversation_id: 'c', created_at: new Date(0) }, { cursor: null, answer: '' }, () => undefined);

  it('holds text for the base window at the start of the answer and longer once the answer has run for a while', () => {
    const c = committer();
    expect(c.dueIn(50, 0)).toBeNull();
    c.addDelta('1', 'a', 1_000);
    expect(c.dueIn(50, 1_000)).toBe(50);
    // Two seconds later (the first text committed meanwhile, as flush() would): the window is 3 × 50.
    (c as unknown as { clearPending(): void }).clearPending();
    c.addDelta('9', 'b', 3_000);
    expect(c.dueIn(50, 3_000)).toBe(150);
    expect(c.dueIn(50, 3_100)).toBe(50);
  });
});

describe("the backend's delta coalescing (RunEmitter)", () => {
  afterEach(() => vi.useRealTimers());

  async function eventsFor(tokens: number, everyMs: number): Promise<string[]> {
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
      { ms: 100, chars: 4096 },
      { onAppended: () => undefined, onRunEndedElsewhere: () => undefined },
      createLogger('stream-window-test', 'silent'),
    );
    for (let i = 0; i < tokens; i++) {
      emitter.delta('text', 0, `t${i} `);
      await vi.advanceTimersByTimeAsync(everyMs);
    }
    await vi.advanceTimersByTimeAsync(1_000);
    await emitter.drain();
    return stored;
  }

  it('writes a young stream every 100 ms and an old one every 300 ms, losing nothing', async () => {
    // 60 tokens 50 ms apart: 3 s of stream. Fixed 100 ms windows take ~30 events; the growing window ~15.
    const events = await eventsFor(60, 50);
    expect(events.join('')).toBe(Array.from({ length: 60 }, (_, i) => `t${i} `).join(''));
    expect(events[0]).toBe('t0 ');
    expect(events.length).toBeLessThan(20);
    expect(events.length).toBeGreaterThan(10);
    // The first second is written at (about) the base window: two tokens per event.
    expect(events.slice(1, 4).every((e) => e.split(' ').length - 1 <= 3)).toBe(true);
  });
});
