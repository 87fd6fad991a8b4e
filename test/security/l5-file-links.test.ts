/**
 * Issue 17 L5: signed file links expire, die with the conversations that used the file, and are not what
 * the model provider gets: an image that is one of our uploads goes to the provider as inline bytes (the
 * link points at the api's internal address, which a provider cannot and must not reach).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inlineOwnImages } from '../../api/inner/llm.js';
import { signedFileUrl } from '../../core/domain/uploads.js';
import type { Stack } from '../../stack/start-stack.js';
import { api, tinyPng, upload } from '../api/helpers.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('sec_l5');
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

/** A turn with an uploaded PNG: the upload id, the conversation and the link history hands out. */
async function turnWithImage(user: string) {
  const up = await upload(stack.apiUrl, key, tinyPng(), 'photo.png', user);
  const uploadId = (up.body as { id: string }).id;
  const { frames } = await chat(stack.apiUrl, key, {
    query: 'what is this?',
    user,
    files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: uploadId }],
  });
  const conversationId = frames.at(-1)!.data.conversation_id as string;
  const history = await api(stack.apiUrl, key, 'GET', `/v1/messages?conversation_id=${conversationId}&user=${user}`);
  const link = (history.body as { data: { message_files: { url: string }[] }[] }).data[0]!.message_files[0]!.url;
  return { uploadId, conversationId, link };
}

describe('L5: signed file links', () => {
  it('carry an expiry: a link past it, or with its expiry moved, is refused', async () => {
    const { uploadId, link } = await turnWithImage('l5-a');
    expect((await fetch(link)).status).toBe(200);
    const origin = new URL(link).origin;
    expect((await fetch(signedFileUrl(stack.config, origin, uploadId, { ttlS: -10 }))).status).toBe(403);
    const stretched = new URL(link);
    stretched.searchParams.set('expires', String(Number(stretched.searchParams.get('expires')) + 86_400));
    expect((await fetch(stretched)).status).toBe(403);
    const bare = new URL(link);
    bare.searchParams.delete('expires');
    expect((await fetch(bare)).status).toBe(403);
  });

  it('stop working when the conversation that used the file is deleted', async () => {
    const { conversationId, link } = await turnWithImage('l5-b');
    expect((await fetch(link)).status).toBe(200);
    const del = await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${conversationId}`, { body: { user: 'l5-b' } });
    expect(del.status).toBeLessThan(300);
    expect((await fetch(link)).status).toBe(404);
  });

  it('reach the model provider as inline bytes, not as a link to the api', async () => {
    const { link } = await turnWithImage('l5-c');
    const messages = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, data: 'look' },
          { type: 'image' as const, url: link },
          { type: 'image' as const, url: 'https://cdn.example.test/elsewhere.png' },
        ],
      },
    ];
    await inlineOwnImages(stack.db, stack.config, messages);
    const [, own, foreign] = messages[0]!.content as { url?: string; base64_data?: string; mime_type?: string }[];
    expect(own!.url).toBeUndefined();
    expect(own!.mime_type).toBe('image/png');
    expect(Buffer.from(own!.base64_data!, 'base64')).toEqual(Buffer.from(tinyPng()));
    expect(foreign!.url).toBe('https://cdn.example.test/elsewhere.png');
  });
});
