/**
 * Files the agent writes to `outputs/` come back as the assistant's message files, over the real stack (HTTP →
 * api → Temporal → agent backend → demo model `/sh` → shellctl with Landlock → workspace → runAgent copies the
 * file into uploads): streamed as `message_file`, named by the tool's agent_thought, listed in the history with a
 * signed URL that downloads the content. A symlink in outputs/ is never followed; a replayed event writes no
 * second row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachToolFiles } from '../../activities/run-agent/tool-files.js';
import { createLogger } from '../../core/platform/logger.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { sha256 } from '../../core/domain/workspace-outputs.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;

const consoleFetch = (p: string, method: string, body: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  stack = await startTestStack('workspace_outputs', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  key = stack.demo!.apiKey;
  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true, timeout_ms: 20_000 };
  expect((await consoleFetch('/agent/draft', 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);
afterAll(async () => stack?.stop());

async function turn(query: string, user: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, { query, user, ...(conversationId ? { conversation_id: conversationId } : {}) });
  expect(status).toBe(200);
  expect(frames.at(-1)!.event).toBe('message_end');
  return { frames, conversationId: frames.at(-1)!.data.conversation_id as string, messageId: frames.at(-1)!.data.message_id as string };
}

const shellThought = (frames: ClientFrame[]) => frames.filter((f) => f.event === 'agent_thought' && f.data.tool === 'shell').at(-1)!;

async function history(conversationId: string, user: string) {
  const res = await fetch(`${stack.apiUrl}/v1/messages?user=${user}&conversation_id=${conversationId}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { message_files: { id: string; type: string; url: string; belongs_to: string }[] }[] }).data;
}

describe('files the agent writes to outputs/', () => {
  let conversationId: string;
  let messageId: string;

  it('come back as assistant message files: streamed, named by the thought, in the history with a URL that downloads them', async () => {
    const t = await turn('/sh echo hi > outputs/report.txt', 'out-a');
    conversationId = t.conversationId;
    messageId = t.messageId;
    const streamed = t.frames.filter((f) => f.event === 'message_file');
    expect(streamed).toHaveLength(1);
    expect(streamed[0]!.data).toMatchObject({ type: 'document', belongs_to: 'assistant', conversation_id: conversationId });
    const fileId = streamed[0]!.data.id as string;
    expect(shellThought(t.frames).data.message_files).toEqual([fileId]);

    const [msg] = await history(conversationId, 'out-a');
    expect(msg!.message_files).toEqual([expect.objectContaining({ id: fileId, type: 'document', belongs_to: 'assistant' })]);
    const download = await fetch(msg!.message_files[0]!.url);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toContain('text/plain');
    expect(await download.text()).toBe('hi\n');

    const rows = await stack.db.messageFile.findMany({ where: { message_id: messageId }, include: { upload_file: true } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ belongs_to: 'assistant', transfer_method: 'tool_file', upload_file: { name: 'report.txt', size: 3 } });
  });

  it('a symlink in outputs/ pointing outside the workspace is not attached (a plain file next to it is)', async () => {
    const t = await turn('/sh ln -s /etc/passwd outputs/passwd.txt && echo fine > outputs/fine.txt', 'out-a', conversationId);
    const names = await stack.db.messageFile.findMany({ where: { message_id: t.messageId }, include: { upload_file: true } });
    expect(names.map((r) => r.upload_file!.name)).toEqual(['fine.txt']);
    expect(t.frames.filter((f) => f.event === 'message_file')).toHaveLength(1);
    const uploads = await stack.db.uploadFile.findMany({ where: { name: 'passwd.txt' } });
    expect(uploads).toEqual([]);
  });

  it('a replayed tool result (a retried attempt) writes the same rows again, never a second one; changed content is not attached', async () => {
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const scope = {
      deps: { db: stack.db, config: stack.config } as never,
      msg,
      bindingId: conv.agent_workspace_binding_id,
      log: createLogger('test', 'error'),
    };
    const ev = {
      event_kind: 'function_tool_result' as const,
      tool_call_id: 'call-replayed',
      tool_name: 'shell',
      files: [{ url: 'workspace:outputs/report.txt', sha256: sha256(Buffer.from('hi\n')) }],
    };
    const ids: string[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      const attached = await attachToolFiles(scope, ev, '999');
      ids.push(...attached!.event.files!.map((f) => f.url));
      await stack.db.$transaction((tx) => attached!.write(tx));
    }
    expect(ids[0]).toBe(ids[1]);
    expect(await stack.db.messageFile.count({ where: { id: ids[0] } })).toBe(1);
    expect(await stack.db.messageFile.count({ where: { message_id: messageId } })).toBe(2);

    const changed = await attachToolFiles(scope, { ...ev, files: [{ ...ev.files[0]!, sha256: sha256(Buffer.from('other')) }] }, '1000');
    expect(changed!.event.files).toEqual([]);
  });
});
