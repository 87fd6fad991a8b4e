/**
 * L6 (slowloris): a client that trickles its request headers is answered 408 and disconnected once
 * HTTP_HEADERS_TIMEOUT_MS passes (core/platform/http-server.ts), instead of holding the socket for Node's defaults (60 s,
 * checked every 30 s). A client that sends its request normally is unaffected.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startTestStack('l6_slow_clients', { env: { HTTP_HEADERS_TIMEOUT_MS: 1000 } });
});
afterAll(async () => stack?.stop());

/** Opens a socket, sends a request line and then one header line every `everyMs`, never ending the headers. */
function trickle(everyMs: number): Promise<{ closedAfterMs: number; received: string }> {
  const url = new URL(stack.apiUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let received = '';
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write('GET /v1/info HTTP/1.1\r\nHost: localhost\r\n');
    });
    let n = 0;
    const timer = setInterval(() => {
      if (!socket.destroyed) socket.write(`X-Slow-${n++}: ${'a'.repeat(8)}\r\n`);
    }, everyMs);
    socket.on('data', (d) => (received += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ closedAfterMs: Date.now() - started, received });
    });
    // The bound of the test, far below Node's own defaults: a socket still open then is the attack succeeding.
    setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      reject(new Error('the server still held the trickling socket after 15 s'));
    }, 15_000).unref();
  });
}

describe('L6: slow clients', () => {
  it('answers 408 and closes a socket that never finishes its headers', async () => {
    const r = await trickle(200);
    expect(r.received).toMatch(/^HTTP\/1\.1 408/);
    expect(r.closedAfterMs).toBeGreaterThanOrEqual(900);
  });

  it('serves a request sent at a normal pace', async () => {
    const res = await fetch(`${stack.apiUrl}/healthz`);
    expect(res.status).toBe(200);
    await res.text();
  });
});
