/**
 * Dify's own clients, unmodified, against our api: the published `dify-client` SDK (chat streaming and
 * blocking, conversations, messages, rename, delete, feedback, file upload, parameters) and
 * `dify-ai-provider` driven by the AI SDK (`ai@6` streamText/generateText). The provider's stream event
 * schemas are not exported, so the provider itself parsing our stream is the compatibility check.
 */
import { generateText, streamText } from 'ai';
import { createDifyProvider } from 'dify-ai-provider';
import { ChatClient } from 'dify-client';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSse } from '../../core/platform/sse.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';
import { tinyPng } from './helpers.js';

let stack: Stack;
let key: string;

// dify-ai-provider implements the AI SDK's v2 model spec; ai@6 runs it in compatibility mode and says so on every call.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

beforeAll(async () => {
  stack = await startTestStack('api_dify_sdk');
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

interface Frame {
  event: string;
  data: Record<string, unknown>;
}

async function framesOf(stream: Readable): Promise<Frame[]> {
  const out: Frame[] = [];
  for await (const f of parseSse(stream as AsyncIterable<Uint8Array>)) {
    const data = JSON.parse(f.data) as Record<string, unknown>;
    if (f.event !== 'ping') out.push({ event: String(data.event), data });
  }
  return out;
}

/** axios rejects non-2xx; the SDK's callers read `error.response`. */
async function failure(p: Promise<unknown>): Promise<{ status: number; data: Record<string, unknown> }> {
  const err = (await p.then(
    () => null,
    (e: unknown) => e,
  )) as { response?: { status: number; data: Record<string, unknown> } } | null;
  expect(err?.response, 'the request should have failed').toBeDefined();
  return err!.response!;
}

describe('dify-client (the published Node SDK)', () => {
  let client: ChatClient;
  const user = 'sdk-user';
  let conversationId: string;
  let firstMessageId: string;
  let uploadId: string;

  beforeAll(() => {
    client = new ChatClient(key, `${stack.apiUrl}/v1`);
  });

  it('reads the app parameters', async () => {
    const res = await client.getApplicationParameters(user);
    expect(res.status).toBe(200);
    expect(res.data.opening_statement).toBe(demoSoulConfig().features.opening_statement);
    expect(res.data.file_upload).toMatchObject({ enabled: true, image: { enabled: true } });
    // The demo agent has a vision model and no workspace: images reach it, documents would not (0: not accepted).
    expect(res.data.system_parameters).toMatchObject({ image_file_size_limit: 10, file_size_limit: 0 });
  });

  it('uploads a file', async () => {
    const form = new FormData();
    form.append('file', new Blob([tinyPng() as Uint8Array<ArrayBuffer>], { type: 'image/png' }), 'sdk.png');
    form.append('user', user);
    const res = await client.fileUpload(form);
    expect(res.status).toBe(201);
    expect(res.data).toMatchObject({ name: 'sdk.png', extension: 'png', mime_type: 'image/png' });
    uploadId = res.data.id;
  });

  it('streams a chat message with the uploaded file (files: null elsewhere is accepted too)', async () => {
    const res = await client.createChatMessage({}, 'My name is Ada. What is in the picture?', user, true, null, [
      { type: 'image', transfer_method: 'local_file', upload_file_id: uploadId },
    ] as never);
    expect(res.status).toBe(200);
    expect(String(res.headers['content-type'])).toContain('text/event-stream');
    const frames = await framesOf(res.data as Readable);
    expect(frames.map((f) => f.event)).toContain('agent_message');
    expect(frames.at(-1)!.event).toBe('message_end');
    const end = frames.at(-1)!.data as { conversation_id: string; message_id: string; metadata: { usage: { total_tokens: number } } };
    expect(end.metadata.usage.total_tokens).toBeGreaterThan(0);
    conversationId = end.conversation_id;
    firstMessageId = end.message_id;
    expect(await stack.db.messageFile.count({ where: { message_id: firstMessageId, upload_file_id: uploadId } })).toBe(1);
  });

  it('sends a blocking message into the same conversation', async () => {
    const res = await client.createChatMessage({}, 'What is my name?', user, false, conversationId);
    expect(res.status).toBe(200);
    expect(res.data).toMatchObject({ event: 'message', conversation_id: conversationId, mode: 'agent' });
    expect(res.data.answer).toContain('Ada');
  });

  it('lists conversations and messages (with message_files and agent_thoughts)', async () => {
    const convs = await client.getConversations(user);
    expect(convs.data.data.map((c: { id: string }) => c.id)).toEqual([conversationId]);
    expect(convs.data.has_more).toBe(false);
    const msgs = await client.getConversationMessages(user, conversationId);
    expect(msgs.data.data.map((m: { query: string }) => m.query)).toEqual(['My name is Ada. What is in the picture?', 'What is my name?']);
    expect(msgs.data.data[0].message_files).toHaveLength(1);
    expect(msgs.data.data[0].agent_thoughts).toBeInstanceOf(Array);
    const page = await client.getConversationMessages(user, conversationId, null, 1);
    expect(page.data).toMatchObject({ limit: 1, has_more: true });
  });

  it('gives and reads feedback', async () => {
    const res = await client.messageFeedback(firstMessageId, 'like' as never, user);
    expect(res.data).toEqual({ result: 'success' });
    const msgs = await client.getConversationMessages(user, conversationId);
    expect(msgs.data.data[0].feedback).toEqual({ rating: 'like' });
  });

  it('renames a conversation, and names it from its first query with auto_generate', async () => {
    const renamed = await client.renameConversation(conversationId, 'Talking about Ada', user);
    expect(renamed.data).toMatchObject({ id: conversationId, name: 'Talking about Ada' });
    const auto = await (
      client as unknown as {
        renameConversation: (id: string, name: string, user: string, auto: boolean) => Promise<{ data: { name: string } }>;
      }
    ).renameConversation(conversationId, '', user, true);
    expect(auto.data.name).toBe('My name is Ada. What is in the picture?');
  });

  it('deletes a conversation: 204, gone from the list, its messages 404', async () => {
    const res = await client.deleteConversation(conversationId, user);
    expect(res.status).toBe(204);
    expect((await client.getConversations(user)).data.data).toEqual([]);
    expect((await failure(client.getConversationMessages(user, conversationId))).status).toBe(404);
    expect(await stack.db.conversation.findUnique({ where: { id: conversationId } })).toMatchObject({ deleted_at: expect.any(Date) });
  });

  it('surfaces our errors in Dify’s error shape', async () => {
    const bad = new ChatClient('app-not-a-key', `${stack.apiUrl}/v1`);
    expect(await failure(bad.getConversations(user))).toMatchObject({ status: 401, data: { code: 'unauthorized', status: 401 } });
    expect(await failure(client.createChatMessage({}, '', user, false))).toMatchObject({
      status: 400,
      data: { code: 'invalid_param', status: 400 },
    });
  });
});

describe('dify-ai-provider with the AI SDK (ai@6)', () => {
  const dify = () => createDifyProvider({ baseURL: `${stack.apiUrl}/v1` });
  const model = (responseMode: 'streaming' | 'blocking' = 'streaming') => dify()('agent-app', { apiKey: key, logger: false, responseMode });
  const user = 'ai-sdk-user';

  it('streams a turn through streamText: finish, usage and the conversation id in provider metadata', async () => {
    const errors: unknown[] = [];
    const result = streamText({
      model: model(),
      prompt: 'My name is Grace.',
      headers: { 'user-id': user },
      onError: ({ error }) => void errors.push(error),
    });
    const text = await result.text;
    expect(errors).toEqual([]);
    expect(await result.finishReason).toBe('stop');
    expect((await result.usage).totalTokens).toBeGreaterThan(0);
    const meta = (await result.providerMetadata) as { difyWorkflowData?: { conversationId?: string; messageId?: string } } | undefined;
    const messageId = meta?.difyWorkflowData?.messageId;
    expect(meta?.difyWorkflowData?.conversationId).toMatch(/^[0-9a-f-]{36}$/);
    const row = await stack.db.message.findUniqueOrThrow({ where: { id: messageId! } });
    expect(row.end_user_id).not.toBeNull();
    expect(text).toContain(row.answer);
  });

  // docs/PROTOCOL.md §1 sends `message` with the complete final answer after the `agent_message` deltas (as Dify's
  // agent app runner does); dify-ai-provider treats `message` as one more delta, so its text is the answer
  // twice. Flip to `it` once the protocol or the provider reconcile this.
  it.fails('streamText text equals the answer exactly (known gap: the final `message` event is appended to the deltas)', async () => {
    const result = streamText({ model: model(), prompt: 'Say something short.', headers: { 'user-id': user } });
    const text = await result.text;
    const meta = (await result.providerMetadata) as { difyWorkflowData: { messageId: string } };
    const row = await stack.db.message.findUniqueOrThrow({ where: { id: meta.difyWorkflowData.messageId } });
    expect(text).toBe(row.answer);
  });

  it('answers generateText through the blocking mode exactly', async () => {
    const result = await generateText({ model: model('blocking'), prompt: 'Hello in blocking mode.', headers: { 'user-id': user } });
    const meta = result.providerMetadata as { difyWorkflowData: { messageId: string; conversationId: string } };
    const row = await stack.db.message.findUniqueOrThrow({ where: { id: meta.difyWorkflowData.messageId } });
    expect(result.text).toBe(row.answer.trim());
    expect(result.usage.totalTokens).toBeGreaterThan(0);
  });

  it('uploads a file part through /v1/files/upload and sends it as a local_file', async () => {
    const result = streamText({
      model: model(),
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'file', data: tinyPng(), mediaType: 'image/png', filename: 'p.png' },
          ],
        },
      ],
      headers: { 'user-id': user },
    });
    await result.text;
    const meta = (await result.providerMetadata) as { difyWorkflowData: { messageId: string } };
    const files = await stack.db.messageFile.findMany({
      where: { message_id: meta.difyWorkflowData.messageId },
      include: { upload_file: true },
    });
    expect(files.map((f) => [f.transfer_method, f.type, f.upload_file?.name])).toEqual([['local_file', 'image', 'p.png']]);
  });
});
