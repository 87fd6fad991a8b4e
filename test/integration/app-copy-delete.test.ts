/**
 * The studio's app list on the real stack (api/console/apps.ts, issue 42): a copy of an app takes its shared draft
 * config (not its published version) and nothing of its conversations; a delete is refused while a turn of the app
 * waits for a human, and otherwise removes the app, its conversations and messages, its Temporal schedule and its
 * API keys' access. Bad bodies are 400s with a code; another tenant's app is a 404 and stays as it was.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ScheduleNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureAccount, ensureAgentApp, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { tinyPng, upload } from '../api/helpers.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let strangerKey: string;
let strangerAppId: string;

beforeAll(async () => {
  stack = await startTestStack('app_copy_delete', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
  strangerAppId = (await ensureAgentApp(stack.db, { tenantId: tenant.id, name: 'Theirs', createdBy: stranger.id }, demoSoulConfig())).appId;
}, 240_000);
afterAll(async () => stack?.stop());

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
async function api(method: string, path: string, body?: unknown, key = stack.demo!.consoleKey): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrl}/console/api${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A new app of the demo tenant with an API key of its own. */
async function newApp(name: string): Promise<{ id: string; key: string }> {
  const created = await api('POST', '/apps', { name, system_prompt: `You are ${name}.` });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const key = await api('POST', `/apps/${created.body.id}/api-keys`, { name: 'test' });
  expect(key.status).toBe(201);
  return { id: created.body.id, key: key.body.key };
}

describe('copy an app', () => {
  it('copies the shared draft config, icon, description and multitask default, not the conversations', async () => {
    const src = await newApp('Copied agent');
    expect((await api('PUT', `/apps/${src.id}/multitask-settings`, { default_strategy: 'enqueue' })).status).toBe(200);
    const draft = await api('GET', `/apps/${src.id}/agent/draft`);
    const edited = { ...draft.body.config, prompt: { ...draft.body.config.prompt, system_prompt: 'The draft’s prompt, never published.' } };
    expect((await api('PUT', `/apps/${src.id}/agent/draft`, { config: edited })).status).toBe(200);
    expect((await chat(stack.apiUrl, src.key, { query: 'hello', user: 'u1', inputs: {} })).status).toBe(200);
    expect(await stack.db.conversation.count({ where: { app_id: src.id } })).toBe(1);

    const copy = await api('POST', `/apps/${src.id}/copy`, {});
    expect(copy.status, JSON.stringify(copy.body)).toBe(201);
    expect(copy.body).toMatchObject({ name: 'Copied agent (copy)', icon: '🤖', mode: 'agent' });
    expect(copy.body.id).not.toBe(src.id);
    // Its version 1 and its shared draft are the source's draft (the source's published v1 has the first prompt).
    expect(copy.body.config.prompt.system_prompt).toBe('The draft’s prompt, never published.');
    const copyDraft = await api('GET', `/apps/${copy.body.id}/agent/draft`);
    expect(copyDraft.body.config.prompt.system_prompt).toBe('The draft’s prompt, never published.');
    const versions = await api('GET', `/apps/${copy.body.id}/agent/versions`);
    expect(versions.body.data.map((v: { version: number }) => v.version)).toEqual([1]);
    expect(await stack.db.conversation.count({ where: { app_id: copy.body.id } })).toBe(0);
    expect(await stack.db.apiToken.count({ where: { app_id: copy.body.id } })).toBe(0);
    expect((await api('GET', `/apps/${copy.body.id}/multitask-settings`)).body.default_strategy).toBe('enqueue');
    // The copy is listed; a second copy takes the next free name; a given name that is taken is a 409.
    const listed = await api('GET', '/apps?limit=100');
    expect(listed.body.data.map((a: { name: string }) => a.name)).toContain('Copied agent (copy)');
    expect((await api('POST', `/apps/${src.id}/copy`, {})).body.name).toBe('Copied agent (copy 2)');
    const named = await api('POST', `/apps/${src.id}/copy`, { name: 'Renamed copy', icon: '🦜', description: 'Mine.' });
    expect(named.body).toMatchObject({ name: 'Renamed copy', icon: '🦜', description: 'Mine.' });
    const taken = await api('POST', `/apps/${src.id}/copy`, { name: 'Renamed copy' });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('app_name_taken');
  }, 60_000);

  it('refuses a bad body with 400 invalid_param and another tenant’s app with 404', async () => {
    const { appId } = stack.demo!;
    for (const body of [{ name: '' }, { name: 'x'.repeat(101) }, { copy_conversations: true }, { icon: 7 }]) {
      const res = await api('POST', `/apps/${appId}/copy`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('invalid_param');
      expect(res.body.message).toEqual(expect.any(String));
    }
    const before = await stack.db.app.count();
    const theirs = await api('POST', `/apps/${strangerAppId}/copy`, {});
    expect(theirs.status).toBe(404);
    expect(theirs.body.code).toBe('app_not_found');
    expect((await api('POST', `/apps/${appId}/copy`, {}, strangerKey)).status).toBe(404);
    expect((await api('POST', '/apps/not-a-uuid/copy', {})).status).toBe(400);
    expect(await stack.db.app.count()).toBe(before);
  });
});

describe('delete an app', () => {
  it('refuses while a turn waits for a human, then removes the app, its conversations, schedule and keys', async () => {
    const app = await newApp('Deleted agent');
    expect((await chat(stack.apiUrl, app.key, { query: 'hello', user: 'u1', inputs: {} })).status).toBe(200);
    const schedule = await api('POST', `/apps/${app.id}/schedules`, {
      name: 'hourly',
      interval_seconds: 3600,
      query: 'hello from a schedule',
      user: 'scheduler',
      paused: true,
    });
    expect(schedule.status, JSON.stringify(schedule.body)).toBe(201);
    await stack.temporal.schedule.getHandle(schedule.body.temporal_schedule_id).describe();

    // A turn waiting for a human: the delete is refused, naming it; nothing is removed.
    const res = await postChat(stack.apiUrl, app.key, { query: '/ask Which plan?', user: 'u2' });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    const head = await reader.read((f) => f.event === 'human_input_required');
    const taskId = head[0]!.data.task_id as string;
    await expect.poll(async () => (await stack.db.message.findUniqueOrThrow({ where: { id: taskId } })).status).toBe('paused');
    const busy = await api('DELETE', `/apps/${app.id}`);
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe('app_busy');
    expect(busy.body.task_ids).toEqual([taskId]);
    expect(await stack.db.app.count({ where: { id: app.id } })).toBe(1);

    // Stopped, it can go.
    const stop = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${app.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'u2' }),
    });
    expect(stop.status).toBe(200);
    await expect
      .poll(async () => (await stack.db.message.findUniqueOrThrow({ where: { id: taskId } })).status, { timeout: 30_000 })
      .toBe('stopped');
    await reader.read();
    const gone = await api('DELETE', `/apps/${app.id}`);
    expect(gone.status, JSON.stringify(gone.body)).toBe(204);
    expect(await stack.db.app.count({ where: { id: app.id } })).toBe(0);
    expect(await stack.db.agent.count({ where: { app_id: app.id } })).toBe(0);
    expect(await stack.db.conversation.count({ where: { app_id: app.id } })).toBe(0);
    expect(await stack.db.message.count({ where: { app_id: app.id } })).toBe(0);
    expect(await stack.db.humanInputForm.count({ where: { app_id: app.id } })).toBe(0);
    expect(await stack.db.appSchedule.count({ where: { app_id: app.id } })).toBe(0);
    await expect(stack.temporal.schedule.getHandle(schedule.body.temporal_schedule_id).describe()).rejects.toBeInstanceOf(
      ScheduleNotFoundError,
    );
    // Its key no longer opens the service API; the list no longer shows it; a second delete is a 404.
    expect((await fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${app.key}` } })).status).toBe(401);
    expect((await api('GET', '/apps?limit=100')).body.data.map((a: { id: string }) => a.id)).not.toContain(app.id);
    expect((await api('DELETE', `/apps/${app.id}`)).status).toBe(404);
  }, 90_000);

  it('removes its uploads’ rows and stored files, an image a turn was sent included; another app’s stay', async () => {
    const app = await newApp('Agent with uploads');
    const other = await newApp('Agent keeping its uploads');
    const text = (s: string) => new TextEncoder().encode(s);
    const used = await upload(stack.apiUrl, app.key, tinyPng(), 'seen.png', 'u1', 'image/png');
    expect(used.status, JSON.stringify(used.body)).toBe(201);
    expect((await upload(stack.apiUrl, app.key, text('Never sent.'), 'unsent.txt', 'u1')).status).toBe(201);
    expect((await upload(stack.apiUrl, other.key, text('Another app’s.'), 'kept.txt', 'u1')).status).toBe(201);
    const turn = await chat(stack.apiUrl, app.key, {
      query: 'hello',
      user: 'u1',
      inputs: {},
      files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: (used.body as { id: string }).id }],
    });
    expect(turn.status).toBe(200);
    expect(await stack.db.messageFile.count({ where: { upload_file_id: (used.body as { id: string }).id } })).toBe(1);
    const rows = await stack.db.uploadFile.findMany({ where: { app_id: app.id } });
    expect(rows).toHaveLength(2);
    const stored = (key: string) => fs.existsSync(path.join(stack.config.dataDir, 'uploads', key));
    for (const r of rows) expect(stored(r.storage_key)).toBe(true);
    const kept = await stack.db.uploadFile.findFirstOrThrow({ where: { app_id: other.id } });

    expect((await api('DELETE', `/apps/${app.id}`)).status).toBe(204);
    expect(await stack.db.uploadFile.count({ where: { app_id: app.id } })).toBe(0);
    for (const r of rows) expect(stored(r.storage_key), r.name).toBe(false);
    expect(await stack.db.uploadFile.count({ where: { id: kept.id } })).toBe(1);
    expect(stored(kept.storage_key)).toBe(true);
  }, 60_000);

  it('answers 404 for another tenant’s app and leaves it as it was', async () => {
    const res = await api('DELETE', `/apps/${strangerAppId}`);
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('app_not_found');
    expect(await stack.db.app.count({ where: { id: strangerAppId } })).toBe(1);
    expect((await api('DELETE', `/apps/${stack.demo!.appId}`, undefined, strangerKey)).status).toBe(404);
    expect(await stack.db.app.count({ where: { id: stack.demo!.appId } })).toBe(1);
    expect((await api('DELETE', '/apps/not-a-uuid')).status).toBe(400);
  });
});
