/**
 * Isolation matrix: what app A's user u1 created (a conversation with a finished turn, a turn waiting
 * on an ask_human form, an upload) is invisible to app B's key and to another user u2 of app A: every
 * route answers 404 (never 403, so ids cannot be probed) and changes nothing; a revoked key gets 401.
 * The owner gets 2xx on the same requests, so the 404s are isolation, not broken routes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAppApiKey } from '../../core/domain/api-keys.js';
import { createAgentApp } from '../../core/domain/seed.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { api, statusOf, tinyPng, upload } from './helpers.js';

let stack: Stack;
let keyA: string;
let keyB: string;
let revokedKeyA: string;
let conversationId: string;
let messageId: string;
let formToken: string;
let uploadId: string;

beforeAll(async () => {
  stack = await startTestStack('api_isolation');
  keyA = stack.demo!.apiKey;
  keyB = (await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'App B' })).apiKey;
  const revoked = generateAppApiKey();
  await stack.db.apiToken.create({
    data: {
      tenant_id: stack.demo!.tenantId,
      app_id: stack.demo!.appId,
      token_hash: revoked.hash,
      token_prefix: revoked.prefix,
      revoked_at: new Date(),
    },
  });
  revokedKeyA = revoked.key;

  const turn = await chat(stack.apiUrl, keyA, { query: 'Remember: my secret is 42.', user: 'u1' });
  expect(turn.frames.at(-1)?.event).toBe('message_end');
  ({ conversation_id: conversationId, message_id: messageId } = turn.frames.at(-1)!.data as {
    conversation_id: string;
    message_id: string;
  });

  const ask = await chat(stack.apiUrl, keyA, { query: '/ask What is your name?', user: 'u1' });
  const hir = ask.frames.find((f) => f.event === 'human_input_required');
  expect(hir, JSON.stringify(ask.frames.map((f) => f.event))).toBeDefined();
  formToken = (hir!.data.data as { form_token: string }).form_token;

  uploadId = ((await upload(stack.apiUrl, keyA, tinyPng(), 'secret.png', 'u1')).body as { id: string }).id;
});
afterAll(async () => stack?.stop());

interface Route {
  name: string;
  /** Performs the request as `key` + `user`; returns the HTTP status. */
  call: (key: string, user: string) => Promise<number>;
  /** Runs as the owner after the matrix (positive control); undefined = destructive, checked at the end. */
  ownerStatus?: number;
}

const routes = (): Route[] => [
  {
    name: 'GET /v1/messages',
    call: async (k, u) => (await api(stack.apiUrl, k, 'GET', `/v1/messages?conversation_id=${conversationId}&user=${u}`)).status,
    ownerStatus: 200,
  },
  {
    name: 'GET /v1/chat-messages/:task_id/events',
    call: (k, u) =>
      statusOf(`${stack.apiUrl}/v1/chat-messages/${messageId}/events?user=${u}`, { headers: { authorization: `Bearer ${k}` } }),
    ownerStatus: 200,
  },
  {
    name: 'POST /v1/chat-messages/:task_id/stop',
    call: async (k, u) => (await api(stack.apiUrl, k, 'POST', `/v1/chat-messages/${messageId}/stop`, { body: { user: u } })).status,
    ownerStatus: 200,
  },
  {
    name: 'POST /v1/messages/:id/feedbacks',
    call: async (k, u) =>
      (await api(stack.apiUrl, k, 'POST', `/v1/messages/${messageId}/feedbacks`, { body: { rating: 'dislike', user: u, content: 'x' } }))
        .status,
  },
  {
    name: 'POST /v1/conversations/:id/name',
    call: async (k, u) =>
      (await api(stack.apiUrl, k, 'POST', `/v1/conversations/${conversationId}/name`, { body: { name: 'hijacked', user: u } })).status,
  },
  {
    name: 'DELETE /v1/conversations/:id',
    call: async (k, u) => (await api(stack.apiUrl, k, 'DELETE', `/v1/conversations/${conversationId}`, { body: { user: u } })).status,
  },
  {
    name: 'POST /v1/chat-messages (existing conversation_id)',
    call: (k, u) =>
      statusOf(`${stack.apiUrl}/v1/chat-messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'What is my secret?', user: u, conversation_id: conversationId, response_mode: 'blocking' }),
        timeoutMs: 30_000,
      }),
  },
  {
    name: 'POST /v1/chat-messages (local_file upload id)',
    call: (k, u) =>
      statusOf(`${stack.apiUrl}/v1/chat-messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'Describe',
          user: u,
          files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: uploadId }],
        }),
      }),
  },
  {
    name: 'POST /v1/form/human_input/:token',
    call: async (k, u) =>
      (
        await api(stack.apiUrl, k, 'POST', `/v1/form/human_input/${formToken}`, {
          body: { inputs: { answer: 'Mallory' }, action: 'submit', user: u },
        })
      ).status,
  },
  {
    name: 'GET /v1/files/:id/preview',
    call: async (k, u) => (await api(stack.apiUrl, k, 'GET', `/v1/files/${uploadId}/preview?user=${u}`)).status,
    ownerStatus: 200,
  },
];

describe('isolation matrix', () => {
  const intruders = () => [
    { who: "app B's key, same user id", key: keyB, user: 'u1' },
    { who: 'app A, another user', key: keyA, user: 'u2' },
    { who: "app B's key, another user", key: keyB, user: 'u2' },
  ];

  it('answers 404 to another app or another user on every conversation, message, stream, stop, feedback, rename, delete, form and file route', async () => {
    const failures: string[] = [];
    for (const route of routes()) {
      for (const i of intruders()) {
        const status = await route.call(i.key, i.user);
        if (status !== 404) failures.push(`${route.name} as ${i.who}: ${status}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('answers 404 to another app or another user reading the form; only its user reads it', async () => {
    expect((await api(stack.apiUrl, keyB, 'GET', `/v1/form/human_input/${formToken}?user=u1`)).status).toBe(404);
    expect((await api(stack.apiUrl, keyA, 'GET', `/v1/form/human_input/${formToken}?user=u2`)).status).toBe(404);
    expect((await api(stack.apiUrl, keyA, 'GET', `/v1/form/human_input/${formToken}?user=u1`)).status).toBe(200);
  });

  it('answers 401 to a revoked key of the owning app on every route', async () => {
    const failures: string[] = [];
    for (const route of routes()) {
      const status = await route.call(revokedKeyA, 'u1');
      if (status !== 401) failures.push(`${route.name}: ${status}`);
    }
    for (const path of ['/v1/conversations?user=u1', '/v1/parameters', '/v1/info', `/v1/form/human_input/${formToken}?user=u1`]) {
      const status = (await api(stack.apiUrl, revokedKeyA, 'GET', path)).status;
      if (status !== 401) failures.push(`GET ${path}: ${status}`);
    }
    expect(failures).toEqual([]);
  });

  it('lists none of u1’s conversations to another user or app', async () => {
    for (const [key, user] of [
      [keyB, 'u1'],
      [keyA, 'u2'],
    ] as const) {
      const res = await api(stack.apiUrl, key, 'GET', `/v1/conversations?user=${user}`);
      expect(res.status).toBe(200);
      expect((res.body as { data: { id: string }[] }).data.map((c) => c.id)).not.toContain(conversationId);
    }
  });

  it('left everything as it was: name, feedback, message, form and no new messages', async () => {
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId }, include: { messages: true } });
    expect(conv.deleted_at).toBeNull();
    expect(conv.name).not.toBe('hijacked');
    expect(conv.messages.map((m) => m.id)).toEqual([messageId]);
    expect(await stack.db.messageFeedback.count()).toBe(0);
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: messageId } })).status).toBe('succeeded');
    expect((await stack.db.humanInputForm.findUniqueOrThrow({ where: { token: formToken } })).status).toBe('waiting');
    // only u1's two turns exist; no intruder got a message in
    expect(await stack.db.message.count()).toBe(2);
  });

  it('gives the owner 2xx on the same requests', async () => {
    for (const route of routes()) {
      if (route.ownerStatus !== undefined) expect(await route.call(keyA, 'u1'), route.name).toBe(route.ownerStatus);
    }
    const byName = (prefix: string) => routes().find((r) => r.name.startsWith(prefix))!;
    expect(await byName('POST /v1/messages/:id/feedbacks').call(keyA, 'u1')).toBe(200);
    expect(await byName('POST /v1/conversations/:id/name').call(keyA, 'u1')).toBe(200);
    expect(await byName('DELETE /v1/conversations/:id').call(keyA, 'u1')).toBe(204);
    expect(await stack.db.messageFeedback.count()).toBe(1);
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(conv.name).toBe('hijacked');
    expect(conv.deleted_at).not.toBeNull();
  });
});
