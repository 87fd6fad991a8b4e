/**
 * The Dify service API routes beyond chat: conversation list pagination and sorting, rename (incl.
 * auto_generate), soft delete (cancelling a turn in flight), feedback replace/remove, parameters and info.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ParametersResponse } from '../../api/schemas.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { createAgentApp } from '../../core/domain/seed.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { api } from './helpers.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('api_service');
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

async function newConversation(user: string, query: string): Promise<{ conversationId: string; messageId: string }> {
  const { frames } = await chat(stack.apiUrl, key, { query, user });
  const end = frames.at(-1)!;
  expect(end.event).toBe('message_end');
  return { conversationId: end.data.conversation_id as string, messageId: end.data.message_id as string };
}

type Page = { limit: number; has_more: boolean; data: { id: string; name: string; created_at: number; updated_at: number }[] };

describe('GET /v1/conversations', () => {
  const ids: string[] = [];
  beforeAll(async () => {
    for (const q of ['first topic', 'second topic', 'third topic']) ids.push((await newConversation('lister', q)).conversationId);
    // equal timestamps must neither skip nor repeat a conversation across pages
    const same = new Date('2026-01-01T00:00:00Z');
    await stack.db.conversation.updateMany({ where: { id: { in: ids } }, data: { created_at: same, updated_at: same } });
  });

  async function allPages(query: string): Promise<string[]> {
    const seen: string[] = [];
    let lastId = '';
    for (let i = 0; i < 5; i++) {
      const page = (
        await api(stack.apiUrl, key, 'GET', `/v1/conversations?user=lister&limit=1${query}${lastId ? `&last_id=${lastId}` : ''}`)
      ).body as Page;
      seen.push(...page.data.map((c) => c.id));
      if (!page.has_more) break;
      lastId = page.data.at(-1)!.id;
    }
    return seen;
  }

  it('pages newest-updated first with last_id and has_more, without gaps or repeats on equal timestamps', async () => {
    expect(await allPages('')).toEqual([...ids].sort().reverse());
    // a renamed conversation was updated last, so it comes first
    await api(stack.apiUrl, key, 'POST', `/v1/conversations/${ids[0]}/name`, { body: { name: 'touched', user: 'lister' } });
    const order = await allPages('');
    expect(order[0]).toBe(ids[0]);
    expect(order.slice(1)).toEqual(ids.slice(1).sort().reverse());
  });

  it('sorts by created_at either way, breaking ties by id, across pages', async () => {
    const all = (await api(stack.apiUrl, key, 'GET', '/v1/conversations?user=lister&sort_by=created_at')).body as Page;
    const sorted = [...ids].sort();
    expect(all.data.map((c) => c.id)).toEqual(sorted);
    const first = (await api(stack.apiUrl, key, 'GET', '/v1/conversations?user=lister&sort_by=-created_at&limit=2')).body as Page;
    const rest = (
      await api(stack.apiUrl, key, 'GET', `/v1/conversations?user=lister&sort_by=-created_at&limit=2&last_id=${first.data.at(-1)!.id}`)
    ).body as Page;
    expect([...first.data, ...rest.data].map((c) => c.id)).toEqual([...sorted].reverse());
    expect([first.has_more, rest.has_more]).toEqual([true, false]);
  });

  it('refuses a bad sort_by or an unknown last_id clearly', async () => {
    const bad = await api(stack.apiUrl, key, 'GET', '/v1/conversations?user=lister&sort_by=name');
    expect(bad).toMatchObject({ status: 400, body: { code: 'invalid_param' } });
    expect((bad.body as { message: string }).message).toContain('sort_by');
    const unknown = await api(stack.apiUrl, key, 'GET', `/v1/conversations?user=lister&last_id=${crypto.randomUUID()}`);
    expect(unknown).toMatchObject({ status: 404, body: { code: 'last_conversation_not_exists' } });
  });
});

describe('POST /v1/conversations/{id}/name', () => {
  it('renames, names from the first query with auto_generate, and requires a name otherwise', async () => {
    const { conversationId } = await newConversation(
      'renamer',
      'Plan   a trip\nto   Lisbon in spring please, with a detailed day-by-day itinerary',
    );
    await chat(stack.apiUrl, key, { query: 'And Porto?', user: 'renamer', conversation_id: conversationId });
    const named = await api(stack.apiUrl, key, 'POST', `/v1/conversations/${conversationId}/name`, {
      body: { name: '  Trip  ', user: 'renamer' },
    });
    expect(named).toMatchObject({ status: 200, body: { id: conversationId, name: 'Trip', introduction: '', status: 'normal' } });
    const auto = await api(stack.apiUrl, key, 'POST', `/v1/conversations/${conversationId}/name`, {
      body: { auto_generate: true, user: 'renamer' },
    });
    expect((auto.body as { name: string }).name).toBe('Plan a trip to Lisbon in spring please,…');
    const missing = await api(stack.apiUrl, key, 'POST', `/v1/conversations/${conversationId}/name`, {
      body: { name: '', user: 'renamer' },
    });
    expect(missing).toMatchObject({ status: 400, body: { code: 'invalid_param' } });
    expect((missing.body as { message: string }).message).toContain('name');
    expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).name).toBe(
      'Plan a trip to Lisbon in spring please,…',
    );
  });
});

describe('DELETE /v1/conversations/{id}', () => {
  it('soft-deletes: 204, the row stays with deleted_at, and every route then answers 404', async () => {
    const { conversationId, messageId } = await newConversation('deleter', 'delete me');
    const del = await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${conversationId}`, { body: { user: 'deleter' } });
    expect(del.status).toBe(204);
    const row = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    expect(row.deleted_at).toBeInstanceOf(Date);
    expect(await stack.db.message.count({ where: { conversation_id: conversationId } })).toBe(1);
    expect((await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${conversationId}`, { body: { user: 'deleter' } })).status).toBe(404);
    expect((await api(stack.apiUrl, key, 'GET', `/v1/messages?conversation_id=${conversationId}&user=deleter`)).status).toBe(404);
    expect(
      (await api(stack.apiUrl, key, 'POST', `/v1/messages/${messageId}/feedbacks`, { body: { rating: 'like', user: 'deleter' } })).status,
    ).toBe(404);
    const next = await chat(stack.apiUrl, key, { query: 'again', user: 'deleter', conversation_id: conversationId });
    expect(next.status).toBe(404);
  });

  it('accepts user in the query string too', async () => {
    const { conversationId } = await newConversation('deleter2', 'delete me by query');
    expect((await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${conversationId}?user=deleter2`)).status).toBe(204);
  });

  it('cancels a turn still waiting for a human when its conversation is deleted', async () => {
    const { frames } = await chat(stack.apiUrl, key, { query: '/ask Should I wait?', user: 'deleter3' });
    expect(frames.map((f) => f.event)).toContain('human_input_required');
    const end = frames.at(-1)!.data as { conversation_id: string; message_id: string };
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: end.message_id } });
    expect(
      (await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${end.conversation_id}`, { body: { user: 'deleter3' } })).status,
    ).toBe(204);
    const handle = stack.temporal.workflow.getHandle(msg.workflow_id);
    let status = '';
    for (let i = 0; i < 50 && status !== 'CANCELLED'; i++) {
      status = (await handle.describe()).status.name;
      if (status !== 'CANCELLED') await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe('CANCELLED');
  });
});

describe('POST /v1/messages/{id}/feedbacks', () => {
  it('stores one rating per user and message, replaces it, and removes it with rating null', async () => {
    const { conversationId, messageId } = await newConversation('rater', 'rate me');
    const post = (body: Record<string, unknown>) =>
      api(stack.apiUrl, key, 'POST', `/v1/messages/${messageId}/feedbacks`, { body: { user: 'rater', ...body } });
    const rating = async () =>
      (
        (await api(stack.apiUrl, key, 'GET', `/v1/messages?conversation_id=${conversationId}&user=rater`)).body as {
          data: { feedback: unknown }[];
        }
      ).data[0]!.feedback;

    expect(await post({ rating: 'like', content: 'great' })).toMatchObject({ status: 200, body: { result: 'success' } });
    expect(await rating()).toEqual({ rating: 'like' });
    await post({ rating: 'dislike' });
    expect(await rating()).toEqual({ rating: 'dislike' });
    expect(await stack.db.messageFeedback.findMany({ where: { message_id: messageId } })).toEqual([
      expect.objectContaining({ rating: 'dislike', content: null, conversation_id: conversationId }),
    ]);
    expect((await post({ rating: null })).status).toBe(200);
    expect(await rating()).toBeNull();
    expect((await post({ rating: null })).status).toBe(200); // removing twice is fine
    const bad = await post({ rating: 'love' });
    expect(bad).toMatchObject({ status: 400, body: { code: 'invalid_param' } });
    expect((bad.body as { message: string }).message).toContain('rating');
  });
});

describe('GET /v1/parameters and /v1/info', () => {
  it('reports the active soul config features and our file limits in Dify’s shape', async () => {
    // Documents reach the agent through its workspace (runtime + shell): they are offered.
    const soul = AgentSoulConfig.parse({
      model: { provider: 'demo', model: 'demo-chat' },
      runtime: { enabled: true },
      shell: { enabled: true },
      features: {
        opening_statement: 'Welcome!',
        suggested_questions: ['What can you do?'],
        file_upload: { enabled: true, image_enabled: false, max_files: 2 },
      },
    });
    const other = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Docs only', soul });
    const res = await api(stack.apiUrl, other.apiKey, 'GET', '/v1/parameters?user=x');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      opening_statement: 'Welcome!',
      suggested_questions: ['What can you do?'],
      user_input_form: [],
      file_upload: { enabled: true, allowed_file_types: ['document'], number_limits: 2, image: { enabled: false } },
      system_parameters: { file_size_limit: 15, image_file_size_limit: 0 },
    });
    expect((res.body as { file_upload: { allowed_file_extensions: string[] } }).file_upload.allowed_file_extensions).toEqual([
      '.pdf',
      '.txt',
      '.md',
      '.csv',
      '.json',
      '.docx',
    ]);
    expect(await api(stack.apiUrl, other.apiKey, 'GET', '/v1/info')).toMatchObject({
      status: 200,
      body: { name: 'Docs only', description: '', tags: [], mode: 'agent' },
    });
  });

  it('advertises only what really works: images for a vision model, documents with a workspace, no citations', async () => {
    const params = async (name: string, soul: unknown) => {
      const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name, soul: AgentSoulConfig.parse(soul) });
      const res = await api(stack.apiUrl, app.apiKey, 'GET', '/v1/parameters?user=x');
      expect(res.status).toBe(200);
      return ParametersResponse.parse(res.body);
    };
    const upload = { enabled: true, image_enabled: true, max_files: 3 };
    // A vision model without a workspace: images go to the model natively; a document would only be a link it cannot open.
    const vision = await params('Vision', { model: { provider: 'demo', model: 'demo-chat' }, features: { file_upload: upload } });
    expect(vision.file_upload).toMatchObject({ enabled: true, allowed_file_types: ['image'], number_limits: 3, image: { enabled: true } });
    expect(vision.file_upload.allowed_file_extensions).toEqual(['.png', '.jpg', '.jpeg', '.webp', '.gif']);
    expect(vision.system_parameters).toMatchObject({ file_size_limit: 0, image_file_size_limit: 10 });
    // A text-only model without a workspace: nothing reaches it, so no upload is offered at all.
    const text = await params('Text only', { model: { provider: 'demo', model: 'demo-text' }, features: { file_upload: upload } });
    expect(text.file_upload).toMatchObject({
      enabled: false,
      allowed_file_types: [],
      allowed_file_extensions: [],
      allowed_file_upload_methods: [],
      number_limits: 0,
      image: { enabled: false, transfer_methods: [] },
    });
    expect(text.system_parameters).toMatchObject({ file_size_limit: 0, image_file_size_limit: 0, workflow_file_upload_limit: 0 });
    // The same text-only model with a workspace: documents, and images as workspace files the shell works with
    // (seed 000's fallback, issue 43 item 3).
    const ws = await params('Text with workspace', {
      model: { provider: 'demo', model: 'demo-text' },
      runtime: { enabled: true },
      shell: { enabled: true },
      features: { file_upload: upload },
    });
    expect(ws.file_upload).toMatchObject({ enabled: true, allowed_file_types: ['image', 'document'], image: { enabled: true } });
    // A runtime without the shell cannot open a document either.
    const noShell = await params('Runtime only', {
      model: { provider: 'demo', model: 'demo-text' },
      runtime: { enabled: true },
      features: { file_upload: upload },
    });
    expect(noShell.file_upload.enabled).toBe(false);
    // Uploads switched off in the soul stay off whatever the model can do.
    const off = await params('Uploads off', {
      model: { provider: 'demo', model: 'demo-chat' },
      runtime: { enabled: true },
      shell: { enabled: true },
      features: { file_upload: { ...upload, enabled: false } },
    });
    expect(off.file_upload.enabled).toBe(false);
    // Citations: Agent Apps return none (docs/seeds/001); keyword moderation without keywords never hits.
    expect(vision.retriever_resource).toEqual({ enabled: false });
    expect(vision.sensitive_word_avoidance).toEqual({ enabled: false });
    const moderated = await params('Moderated', {
      model: { provider: 'demo', model: 'demo-chat' },
      features: { moderation: { enabled: true, keywords: ['secret'] } },
    });
    expect(moderated.sensitive_word_avoidance).toEqual({ enabled: true });
  });

  it('enforces the file_upload feature on chat files: image disabled, too many files', async () => {
    const soul = AgentSoulConfig.parse({
      model: { provider: 'demo', model: 'demo-chat' },
      features: { file_upload: { enabled: true, image_enabled: false, max_files: 1 } },
    });
    const other = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Strict files', soul });
    const image = await chat(stack.apiUrl, other.apiKey, {
      query: 'x',
      user: 'u',
      files: [{ type: 'image', transfer_method: 'remote_url', url: 'https://93.184.216.34/a.png' }],
    });
    expect(image.status).toBe(400);
    const file = { type: 'document', transfer_method: 'remote_url', url: 'https://93.184.216.34/a.pdf' };
    const tooMany = await chat(stack.apiUrl, other.apiKey, { query: 'x', user: 'u', files: [file, file] });
    expect(tooMany.status).toBe(400);
    expect(String(tooMany.frames[0]!.data.message)).toContain('at most 1');
  });

  it('refuses a blank query with 400 naming the field, and creates nothing', async () => {
    const before = await stack.db.message.count();
    const r = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
      body: { inputs: {}, query: '  \n\t ', user: 'blank', response_mode: 'streaming' },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_param', message: 'query: must not be blank', status: 400 });
    expect(await stack.db.message.count()).toBe(before);
  });
});
