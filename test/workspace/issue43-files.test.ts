/**
 * Issue 43 items 1 and 3 through the real stack (HTTP → api → Temporal → agent backend → demo model → shell → shellctl):
 * debugger turns take files on both draft kinds with the service API's checks and refusals, decided by the draft the
 * turn runs on (docs/seeds/000 "Multimodal file handling"); an image for a text-only model with a workspace and shell is
 * placed in the workspace and the model told where it is (the seed's fallback), and a conversation's files follow its
 * pinned version, not the active one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { LayerSpec } from '../../core/protocol/run.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { tinyPng, upload, uploadForm } from '../api/helpers.js';

let stack: Stack;

function soul(edit: (s: AgentSoulConfig) => void = () => undefined): AgentSoulConfig {
  const s = demoSoulConfig();
  edit(s);
  return AgentSoulConfig.parse(s);
}
const withWorkspace = (s: AgentSoulConfig) => {
  s.runtime = { enabled: true };
  s.shell = { enabled: true, timeout_ms: 20_000 };
};
const textOnly = (s: AgentSoulConfig) => {
  s.model = { ...s.model, model: 'demo-text' };
};

beforeAll(async () => {
  stack = await startTestStack('issue43_files', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', SHELL_MAX_OUTPUT_BYTES: 8192, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
}, 300_000);
afterAll(async () => stack?.stop());

const consoleFetch = (appId: string, p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** A studio upload: the console account's, for its debugger turns of the app. */
async function consoleUpload(appId: string, bytes: Uint8Array, name: string, mime: string): Promise<string> {
  const res = await fetch(`${stack.apiUrl}/console/api/apps/${appId}/agent/debug/files/upload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}` },
    body: uploadForm(bytes, name, null, mime),
  });
  const body = (await res.json()) as { id: string; created_by: string };
  expect(res.status, JSON.stringify(body)).toBe(201);
  expect(body.created_by).toBe(stack.demo!.accountId);
  return body.id;
}

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function debug(appId: string, body: Record<string, unknown>) {
  const res = await consoleFetch(appId, '/agent/debug/chat-messages', 'POST', body);
  if (res.status !== 200) return { status: res.status, error: (await res.json()) as { code: string; message: string } };
  const frames = await readFrames(res);
  const end = frames.at(-1)!;
  return { status: 200, frames, end, answer: answerOf(frames), messageId: end.data.message_id as string };
}

const userPromptOf = async (messageId: string) =>
  (
    (await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } })).request as {
      composition: { layers: LayerSpec[] };
    }
  ).composition.layers.find((l) => l.name === 'agent_app_user_prompt')!.config as { text: string; files: unknown[] };

const doc = new TextEncoder().encode('numbers: 42\n');
const local = (id: string, type = 'document') => ({ type, transfer_method: 'local_file', upload_file_id: id });

describe('item 1: debugger turns take files', () => {
  it('the shared draft: an image reaches a vision model natively; a document without a workspace is the service API’s 400', async () => {
    // Published with a workspace, shared draft without one: the draft decides what a debugger turn accepts.
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Debug files', soul: soul(withWorkspace) });
    expect((await consoleFetch(app.appId, '/agent/draft', 'PUT', { config: soul() })).status).toBe(200);

    const png = await consoleUpload(app.appId, tinyPng(), 'dot.png', 'image/png');
    const seen = await debug(app.appId, { query: 'what is this?', files: [local(png, 'image')] });
    expect(seen.status).toBe(200);
    expect(seen.end!.event).toBe('message_end');
    expect(seen.answer).toContain('I see 1 image.');
    const files = await stack.db.messageFile.findMany({ where: { message_id: seen.messageId! } });
    expect(files.map((f) => [f.type, f.upload_file_id])).toEqual([['image', png]]);

    const notes = await consoleUpload(app.appId, doc, 'notes.txt', 'text/plain');
    const refused = await debug(app.appId, { query: 'read it', files: [local(notes)] });
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({ code: 'invalid_param' });
    expect(refused.error!.message).toContain('files.0 (notes.txt): documents are not accepted by this app');

    // An end user's upload is not the account's: the same 404 as another end user's upload on the service API.
    const theirs = await upload(stack.apiUrl, app.apiKey, doc, 'theirs.txt', 'someone', 'text/plain');
    const notYours = await debug(app.appId, { query: 'read it', files: [local((theirs.body as { id: string }).id)] });
    expect([notYours.status, notYours.error?.code]).toEqual([404, 'file_not_found']);
    // And the account's upload is not an end user's.
    const viaService = await chat(stack.apiUrl, app.apiKey, { query: 'read it', user: 'someone', files: [local(notes)] });
    expect([viaService.status, viaService.frames[0]!.data.code]).toEqual([404, 'file_not_found']);
  });

  it('the build draft: a document is placed in its workspace and read with the shell; a text-only image is placed too', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Debug build files', soul: soul() });
    const saved = await consoleFetch(app.appId, '/agent/build-draft', 'PUT', { config: soul((s) => (withWorkspace(s), textOnly(s))) });
    expect(saved.status, await saved.text()).toBe(200);

    const notes = await consoleUpload(app.appId, doc, 'notes.txt', 'text/plain');
    const read = await debug(app.appId, { query: '/sh cat uploads/*/notes.txt', draft: 'build', files: [local(notes)] });
    expect(read.status).toBe(200);
    expect(read.answer).toContain('numbers: 42');
    expect((await userPromptOf(read.messageId!)).text).toContain(`- uploads/${read.messageId}/notes.txt (document, text/plain)`);

    // A turn of the same account on the shared DRAFT (no workspace) refuses it: the draft decides.
    const shared = await debug(app.appId, { query: 'read it', files: [local(notes)] });
    expect(shared.status).toBe(400);

    const png = await consoleUpload(app.appId, tinyPng(), 'dot.png', 'image/png');
    const placed = await debug(app.appId, { query: '/sh ls uploads/*/', draft: 'build', files: [local(png, 'image')] });
    expect(placed.status).toBe(200);
    expect(placed.end!.event).toBe('message_end');
    expect(placed.answer).toContain('dot.png');
    const prompt = await userPromptOf(placed.messageId!);
    expect(prompt.files).toEqual([]);
    expect(prompt.text).toContain(`- uploads/${placed.messageId}/dot.png (image, image/png; your model cannot see images`);
  });
});

describe('item 3: images on a text-only model, and the pinned version', () => {
  it('a text-only model with a shell is offered images and gets them as workspace files; without a shell it is not', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, {
      name: 'Text only',
      soul: soul((s) => (withWorkspace(s), textOnly(s))),
    });
    const params = (await (
      await fetch(`${stack.apiUrl}/v1/parameters?user=u`, { headers: { authorization: `Bearer ${app.apiKey}` } })
    ).json()) as {
      file_upload: { allowed_file_types: string[]; image: { enabled: boolean } };
    };
    expect(params.file_upload.allowed_file_types).toEqual(['image', 'document']);
    expect(params.file_upload.image.enabled).toBe(true);

    const up = await upload(stack.apiUrl, app.apiKey, tinyPng(), 'cat.png', 'u', 'image/png');
    const t = await chat(stack.apiUrl, app.apiKey, {
      query: '/sh wc -c uploads/*/cat.png',
      user: 'u',
      files: [local((up.body as { id: string }).id, 'image')],
    });
    expect(t.status).toBe(200);
    const end = t.frames.at(-1)!;
    expect(end.event).toBe('message_end');
    const messageId = end.data.message_id as string;
    expect(answerOf(t.frames)).toContain(`uploads/${messageId}/cat.png`);
    const prompt = await userPromptOf(messageId);
    expect(prompt.files).toEqual([]); // demo-text would refuse a native image (400)
    expect(prompt.text).toContain(`- uploads/${messageId}/cat.png (image, image/png; your model cannot see images`);

    const plain = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Text only, no shell', soul: soul(textOnly) });
    const up2 = await upload(stack.apiUrl, plain.apiKey, tinyPng(), 'cat.png', 'u', 'image/png');
    const refused = await chat(stack.apiUrl, plain.apiKey, {
      query: 'look',
      user: 'u',
      files: [local((up2.body as { id: string }).id, 'image')],
    });
    expect(refused.status).toBe(400);
    expect(String(refused.frames[0]!.data.message)).toContain('files.0 (cat.png): images are not accepted by this app');
  });

  it('a conversation’s files follow its pinned version, not the version published since', async () => {
    const app = await createAgentApp(stack.db, stack.demo!.tenantId, { name: 'Pinned files', soul: soul() });
    const first = await chat(stack.apiUrl, app.apiKey, { query: 'hello', user: 'p' });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    // The active version now has a workspace (documents offered); the conversation's pinned one has none.
    expect((await consoleFetch(app.appId, '/agent/draft', 'PUT', { config: soul(withWorkspace) })).status).toBe(200);
    expect((await consoleFetch(app.appId, '/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);

    const up = await upload(stack.apiUrl, app.apiKey, doc, 'notes.txt', 'p', 'text/plain');
    const id = (up.body as { id: string }).id;
    const pinned = await chat(stack.apiUrl, app.apiKey, {
      query: 'read it',
      user: 'p',
      conversation_id: conversationId,
      files: [local(id)],
    });
    expect(pinned.status).toBe(400);
    expect(String(pinned.frames[0]!.data.message)).toContain('files.0 (notes.txt): documents are not accepted by this app');

    const fresh = await chat(stack.apiUrl, app.apiKey, { query: '/sh cat uploads/*/notes.txt', user: 'p', files: [local(id)] });
    expect(fresh.status).toBe(200);
    expect(answerOf(fresh.frames)).toContain('numbers: 42');
  });
});
