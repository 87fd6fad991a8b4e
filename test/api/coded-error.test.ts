/**
 * A `CodedError` (core/protocol/error-codes.ts) thrown in a route answers as an `HttpError` would: the registry's
 * status for its code, the code, the message and its extra fields — so core/domain/ can refuse without knowing HTTP.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler } from '../../api/errors.js';
import { createLogger } from '../../core/platform/logger.js';
import { CodedError, ERROR_CODES } from '../../core/protocol/error-codes.js';

let url: string;
let server: ReturnType<express.Express['listen']>;
let next: unknown;

beforeAll(async () => {
  const app = express();
  app.post('/refuse', () => {
    throw next;
  });
  app.use(errorHandler(createLogger('test-coded-error', 'silent')));
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/refuse`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('a CodedError thrown in a route', () => {
  it.each([
    ['parent_message_not_exists', 404],
    ['conversation_queue_full', 429],
    ['session_snapshot_pruned', 409],
    ['server_busy', 503],
  ] as const)('%s answers its registry status %i with its code and message', async (code, status) => {
    expect(ERROR_CODES[code].status).toEqual([status]);
    next = new CodedError(code, `refused: ${code}.`);
    const res = await fetch(url, { method: 'POST' });
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ code, message: `refused: ${code}.`, status });
  });

  it('carries its extra fields into the body', async () => {
    next = new CodedError('conversation_queue_full', '3 messages already wait.', { limit: 3, task_id: 'm-1' });
    const res = await fetch(url, { method: 'POST' });
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({
      code: 'conversation_queue_full',
      message: '3 messages already wait.',
      status: 429,
      limit: 3,
      task_id: 'm-1',
    });
  });

  it('is a 503 with Retry-After when its code is', async () => {
    next = new CodedError('server_busy', 'busy.');
    const res = await fetch(url, { method: 'POST' });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
