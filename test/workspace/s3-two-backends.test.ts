/**
 * Issue 44 item 1 through the real stack (HTTP → api → Temporal → worker → agent backend → demo model → shell →
 * shellctl), with WORKSPACE_STORE=s3 on a real S3 server (SeaweedFS, stack/s3-server.ts): two agent backends, each with
 * a WORKSPACES_DIR of its own (no shared directory), over one bucket. Turn 1 of a conversation runs on backend A and
 * writes a file with the shell tool; A is stopped; turn 2 of the same conversation lands on backend B and reads it.
 * Without the store, B has no copy and no marker of the workspace: the turn fails binding_lost.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { loadConfig, type Env } from '../../core/platform/config.js';
import { createLogger } from '../../core/platform/logger.js';
import { createAgentBackend, type RunningBackend } from '../../agent-backend/server.js';
import { PgRunStore } from '../../agent-backend/store.js';
import { freePort } from '../../stack/ports.js';
import { S3Server } from '../../stack/s3-server.js';
import { S3Client } from '@aws-sdk/client-s3';
import { S3WorkspaceStore } from '../../agent-backend/workspace/store.js';
import { configToEnv, type Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

/** What the api and the worker call as "the agent backend": new connections go to the current target. */
class Switch {
  target = 0;
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    readonly server: net.Server,
    readonly port: number,
  ) {}
  static async start(): Promise<Switch> {
    const port = await freePort();
    const server = net.createServer();
    const s = new Switch(server, port);
    server.on('connection', (client) => {
      const upstream = net.connect({ port: s.target, host: '127.0.0.1' });
      for (const sock of [client, upstream]) {
        s.sockets.add(sock);
        sock.on('error', () => undefined);
        sock.once('close', () => s.sockets.delete(sock));
      }
      client.pipe(upstream).pipe(client);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    return s;
  }
  /** Points new connections at `port` and cuts the kept-alive ones (they reached the old target). */
  to(port: number): void {
    this.target = port;
    for (const sock of this.sockets) sock.destroy();
  }
  close(): Promise<void> {
    for (const sock of this.sockets) sock.destroy();
    return new Promise((r) => this.server.close(() => r()));
  }
}

let s3: S3Server;
let sw: Switch;
let stack: Stack;
const backends: { running: RunningBackend; store: PgRunStore; dir: string }[] = [];
const root = path.join(inject('testDataDir'), 's3-two-backends');

async function startBackend(name: string, env: Partial<Env> = {}) {
  const dataDir = path.join(root, name);
  const config = loadConfig(
    { ...configToEnv(stack.config), ...s3.env() },
    { DATA_DIR: dataDir, WORKSPACES_DIR: path.join(dataDir, 'workspaces'), AGENT_BACKEND_PORT: 0, API_INTERNAL_URL: stack.apiUrl, ...env },
  );
  const logger = createLogger(`test-s3-${name}`, config.LOG_LEVEL);
  const store = new PgRunStore(config.DATABASE_URL!, logger);
  await store.init();
  const running = await createAgentBackend({ config, logger, store }).start(0, '127.0.0.1');
  const b = { running, store, dir: config.workspacesDir };
  backends.push(b);
  return b;
}

beforeAll(async () => {
  s3 = await S3Server.start({
    dataDir: path.join(root, 's3'),
    bucket: 'workspaces',
    accessKeyId: 'test-access',
    secretAccessKey: `test-secret-${crypto.randomBytes(8).toString('hex')}`,
  });
  sw = await Switch.start();
  stack = await startTestStack('s3-two-backends', {
    env: {
      SHELLCTL_AUTH_TOKEN: 'test-shellctl-token',
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      AGENT_BACKEND_URL: `http://127.0.0.1:${sw.port}`,
      // The api's and the worker's own WORKSPACES_DIR: neither backend uses it.
      WORKSPACES_DIR: path.join(root, 'api-workspaces'),
    },
  });
  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true, timeout_ms: 20_000 };
  const consoleFetch = (p: string, body: unknown, method: string) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await consoleFetch('/agent/draft', { config: AgentSoulConfig.parse(soul) }, 'PUT')).status).toBe(200);
  expect((await consoleFetch('/agent/publish', { from: 'draft' }, 'POST')).status).toBe(201);
}, 600_000);

afterAll(async () => {
  for (const b of backends) {
    await b.running.close().catch(() => undefined);
    await b.store.close().catch(() => undefined);
  }
  await stack?.stop();
  await sw?.close();
  await s3?.stop();
});

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(query: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
    query,
    user: 's3-user',
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  return { answer: answerOf(frames), end, conversationId: end.data.conversation_id as string };
}

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest('hex');

/** The sha256 the bucket's latest version of the conversation's workspace records for `file` (undefined: none). */
async function savedFile(conversationId: string, file: string): Promise<string | undefined> {
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
  const ws = await stack.db.agentWorkspace.findUniqueOrThrow({ where: { id: binding.workspace_id } });
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: s3.opts.accessKeyId, secretAccessKey: s3.opts.secretAccessKey },
  });
  try {
    const bucket = new S3WorkspaceStore({ client, bucket: 'workspaces' });
    const id = { workspaceId: ws.id, generation: ws.generation };
    const latest = await bucket.latest(id);
    if (!latest) return undefined;
    const entry = (await bucket.manifest(id, latest.version)).entries.find((e) => e.path === file);
    return entry?.kind === 'file' ? entry.sha256 : undefined;
  } finally {
    client.destroy();
  }
}

describe('workspaces on object storage (WORKSPACE_STORE=s3)', () => {
  it('turn 2 on another backend, with no shared directory, reads the file turn 1 wrote with the shell', async () => {
    const a = await startBackend('backend-a');
    sw.to(Number(new URL(a.running.url).port));
    const t1 = await turn('/sh echo written-on-a > note.txt && cat note.txt');
    expect(t1.end.event).toBe('message_end');
    expect(t1.answer).toContain('written-on-a');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: t1.conversationId } });
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const workspaceId = binding.workspace_id.toLowerCase();
    expect(fs.readFileSync(path.join(a.dir, workspaceId, 'note.txt'), 'utf8')).toBe('written-on-a\n');

    // Backend A goes away; the next turn lands on B, whose WORKSPACES_DIR has never seen this workspace.
    await a.running.close();
    const b = await startBackend('backend-b');
    expect(b.dir).not.toBe(a.dir);
    expect(fs.existsSync(path.join(b.dir, workspaceId))).toBe(false);
    sw.to(Number(new URL(b.running.url).port));

    const t2 = await turn('/sh cat note.txt && echo more-on-b >> note.txt', t1.conversationId);
    expect(t2.end.event).toBe('message_end');
    expect(t2.answer).toContain('written-on-a');
    expect(fs.readFileSync(path.join(b.dir, workspaceId, 'note.txt'), 'utf8')).toBe('written-on-a\nmore-on-b\n');
    // Neither backend wrote into the api's directory: the bucket carried the workspace.
    expect(fs.existsSync(path.join(root, 'api-workspaces', workspaceId))).toBe(false);
  });

  it('a run that fails has saved what its shell wrote before the failure', async () => {
    // One tool call per run on this backend: the chain's second call fails the run (agent_run_limit_exceeded).
    const d = await startBackend('backend-d', { RUN_MAX_TOOL_CALLS: 1 });
    sw.to(Number(new URL(d.running.url).port));
    const steps = [
      { tool: 'shell', args: { command: 'echo before-the-failure > failed.txt' } },
      { tool: 'shell', args: { command: 'echo never' } },
    ];
    const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: `/chain ${JSON.stringify(steps)}`, user: 's3-fail' });
    expect(status).toBe(200);
    const end = frames.at(-1)!;
    expect(end.event).toBe('error');
    expect(await savedFile(end.data.conversation_id as string, 'failed.txt')).toBe(sha256('before-the-failure\n'));
  });

  it('a run stopped by the user has saved what its shell wrote before the stop', async () => {
    const e = await startBackend('backend-e');
    sw.to(Number(new URL(e.running.url).port));
    const steps = [
      { tool: 'shell', args: { command: 'echo before-the-stop > stopped.txt' } },
      { tool: 'shell', args: { command: 'sleep 60' } },
    ];
    const res = await postChat(stack.apiUrl, stack.demo!.apiKey, { query: `/chain ${JSON.stringify(steps)}`, user: 's3-stop' });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    // The first command's observation is in: stopped.txt is written; the stop lands during (or before) the sleep.
    const head = await reader.read(
      (f) => f.event === 'agent_thought' && typeof f.data.observation === 'string' && f.data.observation !== '',
    );
    const taskId = head[0]!.data.task_id as string;
    const stop = await fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 's3-stop' }),
    });
    expect(stop.status).toBe(200);
    await reader.read();
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe('stopped');
    expect(await savedFile(msg.conversation_id, 'stopped.txt')).toBe(sha256('before-the-stop\n'));
  });

  it('a run that pauses for ask_human has saved what its shell wrote before the question', async () => {
    const c = await startBackend('backend-c');
    sw.to(Number(new URL(c.running.url).port));
    const ask = {
      question: 'Go on?',
      fields: [{ type: 'paragraph', name: 'answer', label: 'Answer', required: true }],
      actions: [{ id: 'submit', label: 'Submit', style: 'primary' }],
    };
    const steps = [
      { tool: 'shell', args: { command: 'echo before-the-question > paused.txt' } },
      { tool: 'ask_human', args: ask },
    ];
    const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: `/chain ${JSON.stringify(steps)}`, user: 's3-ask' });
    expect(status).toBe(200);
    const paused = frames.find((f) => f.event === 'human_input_required');
    expect(paused).toBeDefined();
    expect(await savedFile(paused!.data.conversation_id as string, 'paused.txt')).toBe(sha256('before-the-question\n'));
  });
});
