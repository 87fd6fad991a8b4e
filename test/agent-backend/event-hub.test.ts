/**
 * The backend's in-process wake-ups (agent-backend/events.ts EventHub): a reader is woken by an event past its cursor
 * or by a wake that names no seq, never misses one that lands between two waits, and is not woken by the second
 * announcement of an event it already read (a local append and its NOTIFY both announce it).
 */
import { describe, expect, it } from 'vitest';
import { EventHub } from '../../agent-backend/events.js';

const settled = async (p: Promise<void>, ms = 30) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('EventHub', () => {
  it('wakes a reader for an event past its cursor, not for one at or before it', async () => {
    const hub = new EventHub();
    const w = hub.subscribe('run');
    const waiting = w.wait(5_000, 7);
    hub.notify('run', 6);
    hub.notify('run', 7);
    expect(await settled(waiting)).toBe(false);
    hub.notify('run', 8);
    expect(await settled(waiting)).toBe(true);
    w.close();
  });

  it('a wake without a seq (a reconnect, an older backend) always wakes', async () => {
    const hub = new EventHub();
    const w = hub.subscribe('run');
    const waiting = w.wait(5_000, 100);
    hub.notifyAll();
    expect(await settled(waiting)).toBe(true);
    const again = w.wait(5_000, 100);
    hub.notify('run');
    expect(await settled(again)).toBe(true);
    w.close();
  });

  it('keeps a wake that lands between two waits, unless the reader already read past it', async () => {
    const hub = new EventHub();
    const w = hub.subscribe('run');
    hub.notify('run', 3);
    expect(await settled(w.wait(5_000, 2))).toBe(true);
    hub.notify('run', 4);
    expect(await settled(w.wait(5_000, 4))).toBe(false);
    w.close();
  });

  it('times out without a wake, and only the run subscribed to is woken', async () => {
    const hub = new EventHub();
    const w = hub.subscribe('run');
    const waiting = w.wait(300, 0);
    hub.notify('other', 9);
    expect(await settled(waiting)).toBe(false);
    await waiting;
    w.close();
  });
});
