/**
 * Knowledge over the real stack (docs/knowledge.md, seed 004 "knowledge eager results stay in the user role"):
 * a document uploaded through the console API, knowledge enabled through the console (save-time validation runs),
 * a turn whose answer carries a fact only that document holds; the passages reach the model in the USER message
 * (asserted on what an OpenAI-compatible provider behind the inner LLM endpoint received), not in the system prompt;
 * the knowledge_search tool records a thought with the chunks; the message metadata keeps which chunks were used; the
 * answer cites them by number and carries Dify's retriever_resources (message_end, history, blocking, /v1/parameters)
 * unless the retriever_resource feature is off;
 * a resumed ask_human turn neither retrieves again nor repeats the user message; another tenant's dataset is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCredentials } from '../../core/domain/llm/credentials.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startFakeOpenAi, type FakeOpenAi } from '../llm/fake-openai.js';
import { chat, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { tinyPdf } from '../support/tiny-pdf.js';

const FACT = 'The launch code of project Zephyr is 7-ALPHA-42.';
let stack: Stack;
let fake: FakeOpenAi;
let datasetId: string;
let consoleKey: string;

const serviceGet = (path: string) => fetch(`${stack.apiUrl}/v1${path}`, { headers: { authorization: `Bearer ${stack.demo!.apiKey}` } });

const consoleFetch = (path: string, init: RequestInit = {}) =>
  fetch(`${stack.apiUrl}/console/api${path}`, {
    ...init,
    headers: { authorization: `Bearer ${consoleKey}`, ...(typeof init.body === 'string' ? { 'content-type': 'application/json' } : {}) },
  });

/**
 * An upload's document once indexed: the upload answers 201 when indexing ends within KNOWLEDGE_INDEX_WAIT_MS, else
 * 202 with the document still indexing (issue 28) — then its indexing-status is polled until it ends.
 */
async function indexed(res: Response): Promise<{ status: number; doc: Record<string, unknown> }> {
  const doc = (await res.json()) as Record<string, unknown>;
  if (res.status !== 202) return { status: res.status, doc };
  for (let i = 0; i < 300; i++) {
    const s = (await (await consoleFetch(`/datasets/${doc.dataset_id}/documents/${doc.id}/indexing-status`)).json()) as {
      data: { indexing_status: string }[];
    };
    if (s.data[0]!.indexing_status === 'completed' || s.data[0]!.indexing_status === 'error') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const done = (await (await consoleFetch(`/datasets/${doc.dataset_id}/documents/${doc.id}`)).json()) as Record<string, unknown>;
  return { status: done.indexing_status === 'completed' ? 201 : 400, doc: done };
}

/** Saves the app's shared draft through the console (validated) and publishes it. */
async function publish(appId: string, config: unknown): Promise<Response> {
  const saved = await consoleFetch(`/apps/${appId}/agent/draft`, { method: 'PUT', body: JSON.stringify({ config }) });
  if (saved.status !== 200) return saved;
  return consoleFetch(`/apps/${appId}/agent/publish`, { method: 'POST', body: '{}' });
}

function knowledgeSoul(model: { provider: string; model: string }, extra: Record<string, unknown> = {}) {
  return {
    prompt: { system_prompt: 'You are the Zephyr assistant.' },
    model,
    knowledge: { enabled: true, dataset_ids: [datasetId], top_k: 3, score_threshold: 0.05, search_tool: true },
    ...extra,
  };
}

beforeAll(async () => {
  fake = await startFakeOpenAi();
  stack = await startTestStack('knowledge_turn');
  consoleKey = stack.demo!.consoleKey;
  const created = await consoleFetch('/datasets', {
    method: 'POST',
    body: JSON.stringify({ name: 'Zephyr handbook', embedding: { provider: 'demo', model: 'demo-embedding' } }),
  });
  expect(created.status).toBe(201);
  datasetId = ((await created.json()) as { id: string }).id;
  const form = new FormData();
  form.append('file', new Blob([`# Zephyr\n\n${FACT}\n\nThe glider is kept in hangar 3.`], { type: 'text/markdown' }), 'zephyr.md');
  const uploaded = await indexed(await consoleFetch(`/datasets/${datasetId}/documents`, { method: 'POST', body: form }));
  expect(uploaded.status).toBe(201);
  await saveCredentials(stack.db, stack.config.ENCRYPTION_KEY, stack.demo!.tenantId, 'openai_compatible', { base_url: `${fake.url}/v1` });
});
afterAll(async () => {
  await stack?.stop();
  await fake?.close();
});

describe('knowledge datasets (console API)', () => {
  it('lists datasets and documents, indexes the same content once, reads PDF and refuses what it cannot read', async () => {
    const list = (await (await consoleFetch('/datasets')).json()) as { data: { id: string; document_count: number }[] };
    expect(list.data.find((d) => d.id === datasetId)).toMatchObject({ document_count: 1 });
    const again = await consoleFetch(`/datasets/${datasetId}/documents`, {
      method: 'POST',
      body: JSON.stringify({ name: 'zephyr.md', text: `# Zephyr\n\n${FACT}\n\nThe glider is kept in hangar 3.` }),
    });
    expect(again.status).toBe(200);
    const pdf = new FormData();
    pdf.append('file', new Blob([new Uint8Array(tinyPdf(['Hangar 9 holds the spare wings.']))], { type: 'application/pdf' }), 'wings.pdf');
    const p = await indexed(await consoleFetch(`/datasets/${datasetId}/documents`, { method: 'POST', body: pdf }));
    expect(p.status).toBe(201);
    const pdfDoc = p.doc as { id: string; chunk_count: number; mime_type: string };
    expect(pdfDoc).toMatchObject({ chunk_count: 1, mime_type: 'application/pdf' });
    const hit = (await (
      await consoleFetch(`/datasets/${datasetId}/retrieve`, { method: 'POST', body: JSON.stringify({ query: 'spare wings' }) })
    ).json()) as { chunks: { document_name: string }[] };
    expect(hit.chunks[0]?.document_name).toBe('wings.pdf');
    expect((await consoleFetch(`/datasets/${datasetId}/documents/${pdfDoc.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await stack.db.documentSegment.count({ where: { document_id: pdfDoc.id } })).toBe(0);

    const image = new FormData();
    image.append('file', new Blob([Buffer.from([0x89, 0x50, 0x4e, 0x47])], { type: 'image/png' }), 'x.png');
    const refused = await consoleFetch(`/datasets/${datasetId}/documents`, { method: 'POST', body: image });
    expect(refused.status).toBe(415);
    expect(await refused.json()).toMatchObject({ code: 'unsupported_document_type', status: 415 });
    const badLanguage = await consoleFetch('/datasets', { method: 'POST', body: JSON.stringify({ name: 'x', language: 'klingon' }) });
    expect(badLanguage.status).toBe(400);
    const noKey = await fetch(`${stack.apiUrl}/console/api/datasets`);
    expect(noKey.status).toBe(401);
  });
});

describe('a knowledge turn', () => {
  it('answers with a fact only the uploaded document holds, and the message keeps which chunks were used', async () => {
    expect((await publish(stack.demo!.appId, knowledgeSoul({ provider: 'demo', model: 'demo-chat' }))).status).toBe(201);
    const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: '/kb What is the launch code of project Zephyr?',
      user: 'kb-user',
    });
    expect(status).toBe(200);
    const end = frames.find((f) => f.event === 'message');
    expect(end?.data.answer).toContain('7-ALPHA-42');
    // The answer cites the passage by its number; the source is the citation's (below), not a raw label in the text.
    expect(end?.data.answer).toMatch(/7-ALPHA-42.* \[1\]/);
    expect(end?.data.answer).not.toMatch(/dataset "|· chunk |· score /);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: end!.data.message_id as string } });
    const used = (msg.metadata as { retriever_resources?: { source: string; document_name: string; segment_id: string }[] })
      .retriever_resources;
    expect(used?.[0]).toMatchObject({ source: 'eager', document_name: 'zephyr.md', dataset_id: datasetId });
    expect(await stack.db.documentSegment.findUnique({ where: { id: used![0]!.segment_id } })).not.toBeNull();
  });

  it("cites the chunks it was given in Dify's retriever_resources: message_end, GET /v1/messages, blocking mode, /v1/parameters", async () => {
    expect((await publish(stack.demo!.appId, knowledgeSoul({ provider: 'demo', model: 'demo-chat' }))).status).toBe(201);
    const params = (await (await serviceGet('/parameters?user=kb-cite')).json()) as { retriever_resource: unknown };
    expect(params.retriever_resource).toEqual({ enabled: true });
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: '/kb What is the launch code of project Zephyr?',
      user: 'kb-cite',
    });
    const end = frames.find((f) => f.event === 'message_end')!;
    const cited = (end.data.metadata as { retriever_resources: Record<string, unknown>[] }).retriever_resources;
    expect(cited.length).toBeGreaterThan(0);
    // Dify's fields, in Dify's shape (web/app/components/develop/template/template_chat.en.mdx), numbered from 1.
    for (const r of cited)
      expect(Object.keys(r).sort()).toEqual(
        ['content', 'dataset_id', 'dataset_name', 'document_id', 'document_name', 'position', 'score', 'segment_id'].sort(),
      );
    expect(cited.map((r) => r.position)).toEqual(cited.map((_, i) => i + 1));
    expect(cited[0]).toMatchObject({ dataset_id: datasetId, dataset_name: 'Zephyr handbook', document_name: 'zephyr.md' });
    expect(cited[0]!.content).toContain(FACT);
    expect(typeof cited[0]!.score).toBe('number');
    const segment = await stack.db.documentSegment.findUniqueOrThrow({ where: { id: cited[0]!.segment_id as string } });
    expect(segment.document_id).toBe(cited[0]!.document_id);
    // The history carries the same list (Dify's message field), and so does a blocking answer's metadata.
    const conversationId = end.data.conversation_id as string;
    const history = (await (await serviceGet(`/messages?conversation_id=${conversationId}&user=kb-cite`)).json()) as {
      data: { retriever_resources: unknown }[];
    };
    expect(history.data[0]!.retriever_resources).toEqual(cited);
    const blocking = (await (
      await postChat(stack.apiUrl, stack.demo!.apiKey, {
        query: '/kb Where is the glider kept?',
        user: 'kb-cite',
        conversation_id: conversationId,
        response_mode: 'blocking',
      })
    ).json()) as { metadata: { retriever_resources: { document_name: string; content: string }[] } };
    expect(blocking.metadata.retriever_resources.some((r) => r.content.includes('hangar 3'))).toBe(true);
  });

  it('gives no citations when the retriever_resource feature is off', async () => {
    const soul = knowledgeSoul({ provider: 'demo', model: 'demo-chat' }, { features: { retriever_resource: { enabled: false } } });
    expect((await publish(stack.demo!.appId, soul)).status).toBe(201);
    const params = (await (await serviceGet('/parameters?user=kb-nocite')).json()) as { retriever_resource: unknown };
    expect(params.retriever_resource).toEqual({ enabled: false });
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: '/kb What is the launch code of project Zephyr?',
      user: 'kb-nocite',
    });
    const end = frames.find((f) => f.event === 'message_end')!;
    expect(frames.find((f) => f.event === 'message')!.data.answer).toContain('7-ALPHA-42');
    expect(end.data.metadata).not.toHaveProperty('retriever_resources');
    const history = (await (await serviceGet(`/messages?conversation_id=${end.data.conversation_id as string}&user=kb-nocite`)).json()) as {
      data: { retriever_resources: unknown }[];
    };
    expect(history.data[0]!.retriever_resources).toEqual([]);
    // The chunks used are still recorded for the message (the studio's view of it), only not cited.
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: end.data.message_id as string } });
    expect((msg.metadata as { retriever_resources?: unknown[] }).retriever_resources?.length).toBeGreaterThan(0);
    expect((await publish(stack.demo!.appId, knowledgeSoul({ provider: 'demo', model: 'demo-chat' }))).status).toBe(201);
  });

  it('puts the retrieved passages into the user message of the model request, not the system prompt', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Knowledge on a real-model path',
      soul: AgentSoulConfig.parse({ model: { provider: 'openai_compatible', model: 'fake-ok' } }),
    });
    expect((await publish(app.appId, knowledgeSoul({ provider: 'openai_compatible', model: 'fake-ok' }))).status).toBe(201);
    const before = fake.requests.length;
    const { status } = await chat(stack.apiUrl, app.apiKey, { query: 'What is the launch code of project Zephyr?', user: 'kb-user' });
    expect(status).toBe(200);
    const sent = fake.requests.slice(before).map((r) => r.body as { messages: { role: string; content: unknown }[] });
    expect(sent.length).toBeGreaterThan(0);
    const messages = sent[0]!.messages;
    const system = messages.filter((m) => m.role === 'system').map((m) => JSON.stringify(m.content));
    const users = messages.filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
    expect(system.join('')).toContain('Zephyr assistant');
    expect(system.join('')).not.toContain('7-ALPHA-42');
    expect(users).toHaveLength(1);
    expect(users[0]).toContain('What is the launch code of project Zephyr?');
    expect(users[0]).toContain('7-ALPHA-42');
    expect(users[0]).toContain(`dataset \\"Zephyr handbook\\" · document \\"zephyr.md\\"`);
  });

  it('knowledge_search records a thought whose observation carries the chunks', async () => {
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
      query: '/tool knowledge_search {"query": "hangar glider"}',
      user: 'kb-search',
    });
    const messageId = frames.find((f) => f.event === 'message')!.data.message_id as string;
    const thought = await stack.db.messageAgentThought.findFirstOrThrow({ where: { message_id: messageId, tool: 'knowledge_search' } });
    expect(thought.observation).toContain('hangar 3');
    expect(thought.observation).toMatch(/chunk_id/);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const sources = ((msg.metadata as { retriever_resources: { source: string }[] }).retriever_resources ?? []).map((r) => r.source);
    expect(sources).toContain('knowledge_search');
  });

  it('a resumed ask_human turn does not retrieve again nor repeat the user message', async () => {
    const soul = knowledgeSoul({ provider: 'demo', model: 'demo-chat' }, { ask_human: { enabled: true } });
    expect((await publish(stack.demo!.appId, soul)).status).toBe(201);
    const ask = await chat(stack.apiUrl, stack.demo!.apiKey, { query: '/ask Which hangar?', user: 'kb-ask' });
    const hir = ask.frames.find((f) => f.event === 'human_input_required')!;
    expect(hir).toBeDefined();
    const token = (hir.data.data as { form_token: string }).form_token;
    const submitted = await fetch(`${stack.apiUrl}/v1/form/human_input/${token}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: { answer: 'Hangar 3' }, action: 'submit', user: 'kb-ask' }),
    });
    expect(submitted.status).toBe(200);
    const taskId = ((await submitted.json()) as { task_id: string }).task_id;
    const continuation = await waitFor(async () => {
      const m = await stack.db.message.findUnique({ where: { id: taskId } });
      return m && ['succeeded', 'failed'].includes(m.status) ? m : null;
    });
    expect(continuation.status).toBe('succeeded');
    expect((continuation.metadata as { retriever_resources?: unknown }).retriever_resources).toBeUndefined();
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: continuation.conversation_id } });
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const history = JSON.stringify(binding.session_snapshot);
    expect(history.split('/ask Which hangar?').length - 1).toBe(1);
    expect(history).toContain('knowledge_context');
  });

  it('refuses a dataset of another tenant when the config is saved (400 naming the field)', async () => {
    const other = await stack.db.tenant.create({ data: { name: 'Other tenant' } });
    const foreign = await stack.db.dataset.create({ data: { tenant_id: other.id, name: 'Foreign' } });
    const res = await consoleFetch(`/apps/${stack.demo!.appId}/agent/draft`, {
      method: 'PUT',
      body: JSON.stringify({
        config: { ...knowledgeSoul({ provider: 'demo', model: 'demo-chat' }), knowledge: { enabled: true, dataset_ids: [foreign.id] } },
      }),
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('knowledge.dataset_ids[0]');
    // Nor can the console see it.
    expect((await consoleFetch(`/datasets/${foreign.id}`)).status).toBe(404);
  });
});

async function waitFor<T>(probe: () => Promise<T | null>, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}
