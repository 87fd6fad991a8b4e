/**
 * Issue 17 L6: per-key and per-end-user caps. The reviewer held 300 event streams open for one key and one
 * user (each polling the database) and met no rate limit at all. Limits live in PostgreSQL
 * (rate-limiter-flexible), so they hold across api replicas; over a limit the answer is 429 + Retry-After.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { api } from '../api/helpers.js';
import { FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
const open: AbortController[] = [];

beforeAll(async () => {
  stack = await startTestStack('sec_l6', {
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 150,
      STREAMS_PER_USER: 3,
      TURNS_PER_USER: 1,
      RATE_LIMIT_USER_PER_MINUTE: 20,
      RATE_LIMIT_KEY_PER_MINUTE: 60,
    },
  });
  key = stack.demo!.apiKey;
});
afterAll(async () => {
  for (const c of open) c.abort();
  await stack?.stop();
});

/** A turn whose stream stays open (the demo model is slow here): its message id and its controller. */
async function slowTurn(user: string): Promise<{ messageId: string; ctrl: AbortController }> {
  const ctrl = new AbortController();
  open.push(ctrl);
  const res = await postChat(stack.apiUrl, key, { query: 'tell me a long story', user }, { signal: ctrl.signal });
  expect(res.status).toBe(200);
  const first = await new FrameReader(res).read((f) => typeof f.data.message_id === 'string');
  return { messageId: first.at(-1)!.data.message_id as string, ctrl };
}

function attach(messageId: string, user: string, ctrl: AbortController): Promise<Response> {
  return fetch(`${stack.apiUrl}/v1/chat-messages/${messageId}/events?user=${user}`, {
    headers: { authorization: `Bearer ${key}` },
    signal: ctrl.signal,
  });
}

describe('L6: limits per key and per end user', () => {
  it('caps the event streams one user holds open, with 429 and Retry-After, and frees a slot when a stream closes', async () => {
    const { messageId } = await slowTurn('streamer');
    const c1 = new AbortController();
    const c2 = new AbortController();
    open.push(c1, c2);
    expect((await attach(messageId, 'streamer', c1)).status).toBe(200);
    expect((await attach(messageId, 'streamer', c2)).status).toBe(200);
    const refused = await attach(messageId, 'streamer', new AbortController());
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as { code: string }).code).toBe('too_many_requests');

    c1.abort();
    let status = 429;
    for (let i = 0; i < 50 && status === 429; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const c = new AbortController();
      open.push(c);
      status = (await attach(messageId, 'streamer', c)).status;
    }
    expect(status).toBe(200);
  });

  it('caps the turns one user has in progress', async () => {
    await slowTurn('busy');
    const second = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
      body: { query: 'another', user: 'busy', response_mode: 'streaming' },
    });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).not.toBeNull();
  });

  it('caps the request rate of one user, then of the key', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 22; i++) statuses.push((await api(stack.apiUrl, key, 'GET', '/v1/conversations?user=chatty')).status);
    expect(statuses.slice(0, 20).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(20)).toEqual([429, 429]);

    let last = 200;
    for (let i = 0; i < 80 && last !== 429; i++) last = (await api(stack.apiUrl, key, 'GET', '/v1/info')).status;
    expect(last).toBe(429);
  });
});
