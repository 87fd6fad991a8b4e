/**
 * Issue 17 L1: a provider's URL, its credentials and its raw error body never reach end users, nor the
 * places end users' data is kept. The reviewer set base_url=http://user:pass@… and got the password back
 * in the error, also stored in messages.error, message_events and the backend's run events. End users now
 * see a stable message per failure kind; operators see the details in the logs, with secrets removed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactSecrets } from '../../core/domain/llm/redact.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const PASSWORD = 's3cretPassw0rd';
const API_KEY = 'sk-live-0123456789abcdefXYZ';
let stack: Stack;
let provider: http.Server;
const logLines: string[] = [];

beforeAll(async () => {
  // A provider that refuses every call and echoes what it got, the way real providers' error bodies do.
  provider = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            message: `Incorrect API key provided: ${API_KEY}. Authorization: ${req.headers.authorization}`,
            type: 'invalid_request_error',
          },
        }),
      );
    });
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const port = (provider.address() as AddressInfo).port;
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(String(chunk));
      cb();
    },
  });
  stack = await startTestStack('sec_l1', {
    env: {
      OPENAI_COMPATIBLE_BASE_URL: `http://leaky:${PASSWORD}@127.0.0.1:${port}/v1`,
      OPENAI_COMPATIBLE_API_KEY: API_KEY,
      OPENAI_COMPATIBLE_MODEL: 'm1',
    },
    logger: pino({ level: 'debug' }, sink),
  });
});
afterAll(async () => {
  await stack?.stop();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

const leaks = (text: string) => [PASSWORD, API_KEY, 'leaky:'].filter((s) => text.includes(s));

describe('L1: provider failures as end users and stored data see them', () => {
  it('the error frame, messages.error, message_events, the backend run events and the logs hold no provider credential', async () => {
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'hello', user: 'l1-user' });
    const error = frames.find((f) => f.event === 'error');
    expect(error, JSON.stringify(frames)).toBeDefined();
    expect(leaks(JSON.stringify(frames))).toEqual([]);

    const messageId = (frames.find((f) => typeof f.data.message_id === 'string')?.data.message_id ?? error!.data.message_id) as string;
    const message = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect(message.status).toBe('failed');
    expect(leaks(message.error ?? '')).toEqual([]);
    const events = await stack.db.messageEvent.findMany({ where: { message_id: messageId } });
    expect(leaks(JSON.stringify(events, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)))).toEqual([]);
    const backendEvents = await stack.db.$queryRawUnsafe<{ data: unknown }[]>(`select data::text as data from agent_backend.events`);
    expect(backendEvents.length).toBeGreaterThan(0);
    expect(leaks(JSON.stringify(backendEvents))).toEqual([]);
    expect(leaks(logLines.join(''))).toEqual([]);
  });
});

describe('L1: redactSecrets', () => {
  it('removes URL credentials, secret parameters, bearer tokens and keys, keeping the rest readable', () => {
    const out = redactSecrets(
      `Request cannot be constructed from a URL that includes credentials: http://user:${PASSWORD}@llm.internal:8080/v1/chat?api_key=abc123&model=x — Authorization: Bearer ${API_KEY} {"api_key": "zzz999"}`,
    );
    expect(leaks(out)).toEqual([]);
    expect(out).not.toContain('abc123');
    expect(out).not.toContain('zzz999');
    expect(out).toContain('llm.internal:8080/v1/chat');
    expect(out).toContain('model=x');
  });
});
