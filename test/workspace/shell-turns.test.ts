/**
 * The agent's workspace through real turns (issue 13): HTTP → api → Temporal → agent backend → demo model
 * → `shell` tool → shellctl (real Landlock) → the binding's workspace directory. The demo model's `/sh`
 * trigger calls the tool and answers with the exit code and the output, so the answer is the observation.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { upload } from '../api/helpers.js';
import { workspaceProcesses } from '../support/processes.js';

let stack: Stack;
let key: string;
const REPO = path.resolve(import.meta.dirname, '../..');

const consoleFetch = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

function workspaceSoul(edit: (s: AgentSoulConfig) => void = () => undefined): AgentSoulConfig {
  const s = demoSoulConfig();
  s.runtime = { enabled: true };
  s.shell = { enabled: true, timeout_ms: 20_000 };
  edit(s);
  return AgentSoulConfig.parse(s);
}

beforeAll(async () => {
  stack = await startTestStack('workspace_shell', {
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', SHELL_MAX_OUTPUT_BYTES: 2048, DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  key = stack.demo!.apiKey;
  // Publish a version of the demo agent with runtime + shell enabled.
  expect((await consoleFetch('/agent/draft', 'PUT', { config: workspaceSoul() })).status).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);
afterAll(async () => stack?.stop());

const answerOf = (frames: ClientFrame[]) => frames.find((f) => f.event === 'message')?.data.answer as string;
const conversationOf = (frames: ClientFrame[]) => frames.at(-1)!.data.conversation_id as string;

async function turn(query: string, user: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, key, { query, user, ...(conversationId ? { conversation_id: conversationId } : {}) });
  expect(status).toBe(200);
  return { frames, answer: answerOf(frames) ?? '', conversationId: conversationOf(frames), end: frames.at(-1)! };
}

async function workspaceOf(conversationId: string) {
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({
    where: { id: conv.agent_workspace_binding_id! },
    include: { workspace: true },
  });
  return { binding, dir: path.join(stack.config.workspacesDir, binding.workspace_id) };
}

describe('enabling the workspace in the soul', () => {
  it('a shell without the runtime is refused when the config is saved', async () => {
    const res = await consoleFetch('/agent/draft', 'PUT', { config: { ...workspaceSoul(), runtime: { enabled: false } } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('the shell runs inside the runtime: enable runtime too');
  });
});

describe('the agent workspace through real turns', () => {
  let firstConversation: string;
  let firstDir: string;

  it('runs ls and cat, writes a file and reads it back on the next turn of the same conversation', async () => {
    const t1 = await turn('/sh echo "hello from turn one" > note.txt && ls && cat note.txt', 'wsa');
    expect(t1.answer).toContain('The command exited with code 0.');
    expect(t1.answer).toContain('note.txt');
    expect(t1.answer).toContain('hello from turn one');
    // Streamed as a tool like any other: the tool call and its observation are agent thoughts.
    const thoughts = t1.frames.filter((f) => f.event === 'agent_thought');
    expect(thoughts.some((f) => f.data.tool === 'shell')).toBe(true);
    firstConversation = t1.conversationId;
    const ws = await workspaceOf(firstConversation);
    firstDir = ws.dir;
    expect(fs.readFileSync(path.join(firstDir, 'note.txt'), 'utf8')).toBe('hello from turn one\n');
    expect(ws.binding.workspace.status).toBe('active');

    const t2 = await turn('/sh cat note.txt; pwd', 'wsa', firstConversation);
    expect(t2.answer).toContain('hello from turn one');
    expect(t2.answer).toContain(firstDir);
  });

  it('another conversation gets its own workspace and cannot read the first one', async () => {
    const t = await turn(`/sh ls -A; cat note.txt; cat ${firstDir}/note.txt`, 'wsb');
    const ws = await workspaceOf(t.conversationId);
    expect(ws.dir).not.toBe(firstDir);
    expect(t.answer).toContain('cat: note.txt: No such file or directory');
    // The sandbox's root holds its own workspace only (issue 27): the other one is not there at all.
    expect(t.answer).toContain(`cat: ${firstDir}/note.txt: No such file or directory`);
    expect(t.answer).not.toContain('hello from turn one');
  });

  it('nothing outside the workspace is there: DATA_DIR, the shellctl token, /etc/shadow, the repo, /root', async () => {
    const token = path.join(stack.config.dataDir, 'sandbox', 'shellctl.token');
    expect(fs.existsSync(token)).toBe(true);
    const t = await turn(
      `/sh ls ${stack.config.dataDir}/sandbox; cat ${token}; cat /etc/shadow; cat ${REPO}/package.json; ls /root; env`,
      'wsa',
      firstConversation,
    );
    // A fresh root (issue 27): system dirs, a filtered /etc, the workspace at its own path; nothing else exists.
    expect(t.answer).toContain(`ls: cannot access '${stack.config.dataDir}/sandbox': No such file or directory`);
    expect(t.answer).toContain(`cat: ${token}: No such file or directory`);
    expect(t.answer).toContain('cat: /etc/shadow: No such file or directory');
    expect(t.answer).toContain(`cat: ${REPO}/package.json: No such file or directory`);
    expect(t.answer).toContain("ls: cannot access '/root': No such file or directory");
    expect(t.answer).not.toContain('test-shellctl-token');
    // A scrubbed environment: no backend or api secrets, no shellctl token.
    expect(t.answer).not.toContain(stack.config.AGENT_BACKEND_TOKEN);
    expect(t.answer).not.toContain(stack.config.INNER_API_KEY);
    expect(t.answer).not.toContain('DATABASE_URL');
    expect(t.answer).toContain(`HOME=${firstDir}`);
  });

  it('a command over its time limit is killed and reported', async () => {
    const t = await turn('/tool shell {"command": "echo started; sleep 30", "timeout_ms": 700}', 'wsa', firstConversation);
    expect(t.answer).toContain('The command did not complete (timeout): the command exceeded its time limit of 700 ms and was killed');
    expect(t.answer).toContain('started');
  });

  it('output beyond the cap is truncated with a marker', async () => {
    const t = await turn("/sh head -c 10000 /dev/zero | tr '\\0' a", 'wsa', firstConversation);
    expect(t.answer).toContain('The command exited with code 0.');
    expect(t.answer).toContain('[output truncated: 7952 more bytes not shown]');
    expect(t.answer).toContain('a'.repeat(2048));
    expect(t.answer).not.toContain('a'.repeat(2049));
  });

  it('stop during a long command kills it (no process left) and still saves the snapshot and usage', async () => {
    const { dir } = await workspaceOf(firstConversation);
    fs.rmSync(path.join(dir, 'pid'), { force: true });
    const res = await postChat(stack.apiUrl, key, {
      query: '/sh sleep 60 & echo $! > pid; wait',
      user: 'wsa',
      conversation_id: firstConversation,
    });
    const reader = new FrameReader(res);
    const head = await reader.read((f) => f.event === 'agent_thought' && f.data.tool === 'shell');
    const taskId = head[0]!.data.task_id as string;
    let pid = 0;
    for (let i = 0; i < 500 && !pid; i++) {
      const text = fs.existsSync(path.join(dir, 'pid')) ? fs.readFileSync(path.join(dir, 'pid'), 'utf8').trim() : '';
      if (text) pid = Number(text);
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(pid).toBeGreaterThan(0);
    // The pid is the command's PID namespace's; on the host the tree is found by its workspace.
    expect(workspaceProcesses(dir).length).toBeGreaterThan(0);
    const stop = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'wsa' }),
    });
    expect(stop.status).toBe(200);
    const frames = [...head, ...(await reader.read())];
    expect(frames.at(-1)!.event).toBe('message_end');
    expect(workspaceProcesses(dir)).toEqual([]);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe('stopped');
    expect(msg.usage).not.toBeNull();
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: taskId } });
    expect(run.terminal_type).toBe('run_cancelled');
    const { binding } = await workspaceOf(firstConversation);
    expect(JSON.stringify(binding.session_snapshot)).toContain('sleep 60 & echo $! > pid; wait');
  });

  it('deleting the conversation retires its workspace: directory gone, binding and workspace retired', async () => {
    const { binding, dir } = await workspaceOf(firstConversation);
    expect(fs.existsSync(dir)).toBe(true);
    const res = await fetch(`${stack.apiUrl}/v1/conversations/${firstConversation}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'wsa' }),
    });
    expect(res.status).toBe(204);
    expect(fs.existsSync(dir)).toBe(false);
    const after = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: binding.id }, include: { workspace: true } });
    expect(after.retired_at).not.toBeNull();
    expect(after.workspace.status).toBe('retired');
    expect(after.workspace.retired_at).not.toBeNull();
  });

  it('a binding whose workspace changed generation is retired and the turn fails with a generation mismatch', async () => {
    const t1 = await turn('/sh touch keep.txt', 'wsc');
    const { binding, dir } = await workspaceOf(t1.conversationId);
    expect(fs.existsSync(path.join(dir, 'keep.txt'))).toBe(true);
    await stack.db.agentWorkspace.update({ where: { id: binding.workspace_id }, data: { generation: { increment: 1 } } });
    const t2 = await turn('/sh ls', 'wsc', t1.conversationId);
    expect(t2.end.event).toBe('error');
    expect(t2.end.data).toMatchObject({ code: 'agent_binding_generation_mismatch', status: 409 });
    expect(fs.existsSync(dir)).toBe(false);
    const after = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: binding.id }, include: { workspace: true } });
    expect(after.retired_at).not.toBeNull();
    expect(after.workspace.status).toBe('retired');
  });

  it('files sent with the turn are placed into the workspace and the model gets their paths', async () => {
    const up = await upload(stack.apiUrl, key, new TextEncoder().encode('quarterly numbers: 42\n'), 'report.txt', 'wsd', 'text/plain');
    expect(up.status).toBe(201);
    const id = (up.body as { id: string }).id;
    const { status, frames } = await chat(stack.apiUrl, key, {
      query: '/sh cat uploads/*/report.txt',
      user: 'wsd',
      files: [{ type: 'document', transfer_method: 'local_file', upload_file_id: id }],
    });
    expect(status).toBe(200);
    expect(answerOf(frames)).toContain('quarterly numbers: 42');
    const messageId = frames.at(-1)!.data.message_id as string;
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    const prompt = (run.request as { composition: { layers: { name: string; config: { text?: string } }[] } }).composition.layers.find(
      (l) => l.name === 'agent_app_user_prompt',
    )!;
    expect(prompt.config.text).toBe(
      `/sh cat uploads/*/report.txt\n\nAttached files (in your workspace; open them with the shell):\n- uploads/${messageId}/report.txt (document, text/plain)`,
    );
  });

  it('the dify-agent CLI in the shell pulls and pushes the build draft prompt; a later debugger turn uses it', async () => {
    expect(
      (await consoleFetch('/agent/build-draft', 'PUT', { config: workspaceSoul((s) => (s.prompt.system_prompt = 'Old prompt.')) })).status,
    ).toBe(200);
    const debug = async (query: string) => {
      const res = await consoleFetch('/agent/debug/chat-messages', 'POST', { query, draft: 'build' });
      expect(res.status).toBe(200);
      const frames = await readFrames(res);
      return { frames, answer: answerOf(frames) ?? '' };
    };
    const t1 = await debug(
      "/sh dify-agent config prompt pull && cat .dify_conf/prompt.md && printf 'Talk like a pirate.' > .dify_conf/prompt.md && dify-agent config prompt push",
    );
    expect(t1.answer).toContain('The command exited with code 0.');
    expect(t1.answer).toContain('.dify_conf/prompt.md');
    expect(t1.answer).toContain('Old prompt.');
    expect(t1.answer).toContain('{"prompt": "Talk like a pirate."}');
    const draft = await stack.db.agentConfigDraft.findFirstOrThrow({
      where: { agent_id: stack.demo!.agentId, draft_type: 'BUILD_DRAFT', account_id: stack.demo!.accountId },
    });
    expect(AgentSoulConfig.parse(draft.config).prompt.system_prompt).toBe('Talk like a pirate.');

    const t2 = await debug('Hello again');
    const messageId = t2.frames.find((f) => f.event === 'message')!.data.id as string;
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    const layers = (run.request as { composition: { layers: { name: string; config: { system_prompt?: string } }[] } }).composition.layers;
    expect(layers.find((l) => l.name === 'agent_soul_prompt')!.config.system_prompt).toBe('Talk like a pirate.');
  });
});
