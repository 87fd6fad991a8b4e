/**
 * Issue 17 M2: the agent backend reads no body before it knows who sends it, and parses what it reads
 * with a small size and a nesting-depth limit. The reviewer's unauthenticated `POST /runs` with 24 MB nested
 * 12 million arrays deep held the process for 8.8 s before its 401; the stub routes also parsed first.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintStubToken } from '../../agent-backend/stub-token.js';
import { startBackend, startPg, TOKEN, type TestBackend } from '../agent-backend/harness.js';
import { socketRequest } from '../support/stub-socket.js';

let backend: TestBackend;

beforeAll(async () => {
  const { url } = await startPg('sec_m2');
  backend = await startBackend({ databaseUrl: url, apiUrl: 'http://127.0.0.1:9', env: { AGENT_BACKEND_MAX_BODY_BYTES: 1024 * 1024 } });
});
afterAll(async () => backend?.stop());

/**
 * Sends only the headers of a request announcing `contentLength` bytes and waits for the answer: a server
 * that wants the body first never answers (the request times out), one that authenticates first does.
 */
function headersOnly(path: string, headers: Record<string, string>, contentLength: number): Promise<{ status: number; body: string }> {
  const url = new URL(backend.url + path);
  // The stub listens on its own unix socket (issue 27), the run protocol on TCP.
  const where = path.startsWith('/agent-stub') ? { socketPath: backend.stubSocket } : { host: url.hostname, port: url.port };
  return new Promise((resolve, reject) => {
    const req = http.request({
      ...where,
      path: url.pathname,
      method: path.startsWith('/agent-stub') ? 'PUT' : 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(contentLength), ...headers },
    });
    req.setTimeout(5_000, () => req.destroy(new Error('no answer before the body was sent')));
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, body });
      });
    });
    req.on('error', reject);
    req.flushHeaders();
    req.write('['); // the first byte of a deeply nested body; the rest never comes
  });
}

const post = async (
  path: string,
  body: string,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<{ status: number; json(): unknown }> =>
  path.startsWith('/agent-stub')
    ? socketRequest(backend.stubSocket, path, { method, headers: { 'content-type': 'application/json', ...headers }, body })
    : fetch(backend.url + path, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        body,
        signal: AbortSignal.timeout(10_000),
      });

describe('M2: the agent backend authenticates before it reads a body', () => {
  it('answers an unauthenticated 24 MB POST /runs with 401 before the body arrives', async () => {
    const r = await headersOnly('/runs', {}, 24 * 1024 * 1024);
    expect(r.status).toBe(401);
  });

  it('answers a stub call with a forged token with 401 before the body arrives', async () => {
    const r = await headersOnly('/agent-stub/config/prompt', { authorization: 'Bearer dast_run.forged' }, 24 * 1024 * 1024);
    expect(r.status).toBe(401);
  });

  it('does not parse an unauthenticated body at all: invalid JSON still gets 401, not 400', async () => {
    expect((await post('/runs', '{not json')).status).toBe(401);
    expect((await post('/runs', '{not json', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await post('/agent-stub/config/prompt', '{not json', { authorization: 'Bearer nope' }, 'PUT')).status).toBe(401);
  });

  it('refuses an authenticated body nested deeper than JSON_MAX_DEPTH with 400 naming the field, without parsing it', async () => {
    const deep = `{"composition":${'['.repeat(500_000)}${']'.repeat(500_000)}}`;
    const res = await post('/runs', deep, { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/^composition: nested deeper than 64 levels/);
  });

  it('refuses an authenticated body above AGENT_BACKEND_MAX_BODY_BYTES with 413', async () => {
    const res = await post('/runs', JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) }), { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(413);
  });

  it('refuses a deeply nested body from a valid stub token with 400, and a large one with 413', async () => {
    const token = mintStubToken(TOKEN, '00000000-0000-4000-8000-000000000000');
    const deep = await post(
      '/agent-stub/config/prompt',
      `{"prompt":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
      { authorization: `Bearer ${token}` },
      'PUT',
    );
    expect(deep.status).toBe(400);
    const big = await post(
      '/agent-stub/config/prompt',
      JSON.stringify({ prompt: 'x'.repeat(3 * 1024 * 1024) }),
      { authorization: `Bearer ${token}` },
      'PUT',
    );
    expect(big.status).toBe(413);
  });

  it('still accepts a well-formed authenticated request', async () => {
    const res = await post('/runs', '{}', { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(400); // validation of the run request, after parsing
    expect(((await res.json()) as { code: string }).code).not.toBe('unauthorized');
  });
});
