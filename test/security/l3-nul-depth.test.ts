/**
 * Issue 17 L3: NUL characters and deep nesting are client mistakes (400 naming the field), never a 500.
 * PostgreSQL text/jsonb cannot hold NUL (22P05) and a body nested thousands deep overflowed the stack in
 * validation and serialisation. Every JSON edge of the api refuses both before any handler runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { api } from '../api/helpers.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
let consoleKey: string;
let appId: string;

beforeAll(async () => {
  stack = await startTestStack('sec_l3');
  key = stack.demo!.apiKey;
  consoleKey = stack.demo!.consoleKey;
  appId = stack.demo!.appId;
});
afterAll(async () => stack?.stop());

const NUL = '\u0000';
const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
};
/** JSON.stringify recurses: build a deep body as text. */
const deepText = (field: string, depth: number, rest = '') => `{${rest}"${field}":${'['.repeat(depth)}${']'.repeat(depth)}}`;

function expect400(r: { status: number; body: unknown }, field: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect((r.body as { message: string }).message.startsWith(`${field}:`), JSON.stringify(r.body)).toBe(true);
}

describe('L3: NUL and deep nesting on the public API', () => {
  it('refuses NUL in an inputs key and in an inputs value, naming the field', async () => {
    expect400(
      await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
        body: { query: 'hi', user: 'u1', response_mode: 'blocking', inputs: { name: `a${NUL}b` } },
      }),
      'inputs.name',
    );
    expect400(
      await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
        body: { query: 'hi', user: 'u1', response_mode: 'blocking', inputs: { [`k${NUL}`]: 'v' } },
      }),
      'inputs.k\\u0000',
    );
  });

  it('refuses inputs nested 2,000 deep (and 200,000 deep) with 400 naming inputs', async () => {
    for (const depth of [2_000, 200_000]) {
      const r = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
        body: deepText('inputs', depth, '"query":"hi","user":"u1",'),
        headers: { 'content-type': 'application/json' },
      });
      expect400(r, 'inputs');
    }
  });

  it('refuses NUL in ask_human form inputs before looking the form up', async () => {
    expect400(
      await api(stack.apiUrl, key, 'POST', '/v1/form/human_input/abcdefghijkl', {
        body: { inputs: { answer: `x${NUL}` }, action: 'ok', user: 'u1' },
      }),
      'inputs.answer',
    );
  });

  it('accepts nesting within the limit', async () => {
    const r = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
      body: { query: 'hi', user: 'u-l3', response_mode: 'blocking', inputs: { deep: nested(20) } },
      timeoutMs: 30_000,
    });
    expect(r.status).toBe(200);
  });
});

describe('L3: NUL and deep nesting on the console API', () => {
  const consoleApi = (method: string, path: string, body: unknown) =>
    api(
      stack.apiUrl,
      consoleKey,
      method,
      `/console/api/apps/${appId}${path}`,
      typeof body === 'string' ? { body, headers: { 'content-type': 'application/json' } } : { body },
    );

  it('refuses NUL in a debugger query and its inputs', async () => {
    expect400(await consoleApi('POST', '/agent/debug/chat-messages', { query: `a${NUL}`, inputs: {} }), 'query');
    expect400(await consoleApi('POST', '/agent/debug/chat-messages', { query: 'a', inputs: { x: [`y${NUL}`] } }), 'inputs.x[0]');
  });

  it('refuses NUL in an annotation and in the draft prompt', async () => {
    expect400(await consoleApi('POST', '/annotations', { question: `q${NUL}`, content: 'c' }), 'question');
    const draft = await consoleApi('GET', '/agent/draft', undefined);
    const config = (draft.body as { config: { prompt: { system_prompt: string } } }).config;
    config.prompt.system_prompt = `be helpful${NUL}`;
    expect400(await consoleApi('PUT', '/agent/draft', { config }), 'config.prompt.system_prompt');
  });

  it('refuses a debugger body nested 100,000 deep', async () => {
    expect400(await consoleApi('POST', '/agent/debug/chat-messages', deepText('inputs', 100_000, '"query":"hi",')), 'inputs');
  });

  it('reads no console body before the console key is known', async () => {
    const r = await api(stack.apiUrl, 'not-a-key', 'POST', `/console/api/apps/${appId}/annotations`, {
      body: '{broken',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(401);
  });
});
