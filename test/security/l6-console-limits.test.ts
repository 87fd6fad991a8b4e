/**
 * L6 for the console: the debugger's streams and turns and the console's request rate are capped per console key and
 * account (api/rate-limit.ts consoleMiddleware), like the service API's per app key and end user. Over a limit: 429
 * `too_many_requests` with Retry-After; a stream's slot is given back when it closes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startTestStack('l6_console_limits', { env: { STREAMS_PER_KEY: 1, TURNS_PER_USER: 1, RATE_LIMIT_KEY_PER_MINUTE: 40 } });
});
afterAll(async () => stack?.stop());

const consoleFetch = (path: string, method = 'GET', body?: unknown, signal?: AbortSignal) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });

describe('L6: console limits', () => {
  it('refuses a second debugger turn while one is in progress, and serves it once the first ended', async () => {
    const first = await consoleFetch('/agent/debug/chat-messages', 'POST', { query: '/slow 150 a b c d e f g h' });
    expect(first.status).toBe(200);
    const second = await consoleFetch('/agent/debug/chat-messages', 'POST', { query: 'hello' });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await second.json()).toMatchObject({ code: 'too_many_requests' });
    const frames = await readFrames(first);
    expect(frames.at(-1)?.event).toBe('message_end');
    // The stream closed and the turn ended: both slots are back.
    await expect
      .poll(async () => {
        const again = await consoleFetch('/agent/debug/chat-messages', 'POST', { query: 'hello again' });
        if (again.status === 200) await readFrames(again);
        else await again.body?.cancel();
        return again.status;
      })
      .toBe(200);
  });

  it('caps the console request rate per key', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 45; i++) {
      const res = await consoleFetch('/agent/draft');
      statuses.push(res.status);
      await res.body?.cancel();
    }
    expect(statuses).toContain(429);
    expect(statuses.indexOf(429)).toBeGreaterThan(0);
  });
});
