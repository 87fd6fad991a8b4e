/**
 * Issue 44 item 1 step 5: with WORKSPACE_STORE=s3 the api and the worker never need a workspace's disk. Their
 * WORKSPACES_DIR is a regular file (nothing can be created under it); two agent backends each have a directory of their
 * own, over one bucket (SeaweedFS, stack/s3-server.ts). A file uploaded on turn 1 (backend A) goes to the bucket and is
 * read by the agent on turn 2 (backend B); a file the tool writes to outputs/ downloads through the api; a fork is a new
 * manifest over the same contents; deleting the conversation removes the workspace's pointer from the bucket.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { WorkspaceBucket } from '../../core/domain/workspace-bucket.js';
import { loadConfig } from '../../core/platform/config.js';
import { createLogger } from '../../core/platform/logger.js';
import { createAgentBackend, type RunningBackend } from '../../agent-backend/server.js';
import { PgRunStore } from '../../agent-backend/store.js';
import { freePort } from '../../stack/ports.js';
import { S3Server } from '../../stack/s3-server.js';
import { configToEnv, type Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { upload } from '../api/helpers.js';

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
let bucket: WorkspaceBucket;
const backends: { running: RunningBackend; store: PgRunStore; dir: string }[] = [];
const root = path.join(inject('testDataDir'), 's3-no-api-disk');
/** The api's and the worker's WORKSPACES_DIR: a regular file, so any use of it as a directory fails. */
const apiDir = path.join(root, 'not-a-directory');

async function startBackend(name: string) {
  const dataDir = path.join(root, name);
  const config = loadConfig(
    { ...configToEnv(stack.config), ...s3.env() },
    { DATA_DIR: dataDir, WORKSPACES_DIR: path.join(dataDir, 'workspaces'), AGENT_BACKEND_PORT: 0, API_INTERNAL_URL: stack.apiUrl },
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
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(apiDir, 'the api and the worker never use WORKSPACES_DIR in s3 mode\n');
  s3 = await S3Server.start({
    dataDir: path.join(root, 's3'),
    bucket: 'workspaces',
    accessKeyId: 'test-access',
    secretAccessKey: `test-secret-${crypto.randomBytes(8).toString('hex')}`,
  });
  sw = await Switch.start();
  stack = await startTestStack('s3-no-api-disk', {
    env: {
      ...s3.env(),
      SHELLCTL_AUTH_TOKEN: 'test-shellctl-token',
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      AGENT_BACKEND_URL: `http://127.0.0.1:${sw.port}`,
      WORKSPACES_DIR: apiDir,
    },
  });
  bucket = new WorkspaceBucket(
    new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: s3.opts.accessKeyId, secretAccessKey: s3.opts.secretAccessKey },
    }),
    'workspaces',
  );
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
  bucket?.client.destroy();
});

const user = 's3-no-disk';
const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(query: string, conversationId?: string, files?: unknown[]) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
    query,
    user,
    ...(conversationId ? { conversation_id: conversationId } : {}),
    ...(files ? { files } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  expect(end.event, JSON.stringify(end.data)).toBe('message_end');
  return { frames, answer: answerOf(frames), conversationId: end.data.conversation_id as string, messageId: end.data.message_id as string };
}

async function workspaceOf(conversationId: string) {
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
  return { workspaceId: binding.workspace_id.toLowerCase(), generation: binding.generation };
}

describe('WORKSPACE_STORE=s3: the api and the worker never need the workspace disk', () => {
  it('upload on A, read on B, tool file downloaded, fork, retirement', async () => {
    expect(fs.statSync(apiDir).isFile()).toBe(true);
    const a = await startBackend('backend-a');
    sw.to(Number(new URL(a.running.url).port));
    const up = await upload(stack.apiUrl, stack.demo!.apiKey, Buffer.from('uploaded-on-turn-1\n'), 'notes.txt', user, 'text/plain');
    expect(up.status).toBe(201);
    const uploadId = (up.body as { id: string }).id;
    const t1 = await turn('/sh ls uploads/*/', undefined, [{ type: 'document', transfer_method: 'local_file', upload_file_id: uploadId }]);
    expect(t1.answer).toContain('notes.txt');

    await a.running.close();
    const b = await startBackend('backend-b');
    sw.to(Number(new URL(b.running.url).port));
    const t2 = await turn('/sh cat uploads/*/notes.txt && cp uploads/*/notes.txt outputs/report.txt', t1.conversationId);
    expect(t2.answer).toContain('uploaded-on-turn-1');
    // The tool's output file, served by the api from the bucket (the worker read no disk).
    const streamed = t2.frames.filter((f) => f.event === 'message_file');
    expect(streamed).toHaveLength(1);
    const res = await fetch(`${stack.apiUrl}/v1/messages?user=${user}&conversation_id=${t1.conversationId}`, {
      headers: { authorization: `Bearer ${stack.demo!.apiKey}` },
    });
    const history = ((await res.json()) as { data: { id: string; message_files: { url: string; belongs_to: string }[] }[] }).data;
    const file = history.find((m) => m.id === t2.messageId)!.message_files.find((f) => f.belongs_to === 'assistant')!;
    const download = await fetch(file.url);
    expect(download.status).toBe(200);
    expect(await download.text()).toBe('uploaded-on-turn-1\n');

    // Fork: a new workspace in the bucket with the same contents; its next turn (on B) sees the file.
    const src = await workspaceOf(t1.conversationId);
    const forkRes = await fetch(`${stack.apiUrl}/v1/conversations/${t1.conversationId}/fork`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user, message_id: t2.messageId }),
    });
    const fork = (await forkRes.json()) as { id: string };
    expect(forkRes.status, JSON.stringify(fork)).toBe(201);
    const dst = await workspaceOf(fork.id);
    expect(dst.workspaceId).not.toBe(src.workspaceId);
    const forkLatest = await bucket.latest(dst);
    expect(forkLatest).not.toBeNull();
    const srcFiles = (await bucket.manifest(src, (await bucket.latest(src))!.version)).entries.filter((e) => e.kind === 'file');
    const dstFiles = (await bucket.manifest(dst, forkLatest!.version)).entries.filter((e) => e.kind === 'file');
    expect(dstFiles).toEqual(srcFiles);
    const t3 = await turn('/sh cat outputs/report.txt', fork.id);
    expect(t3.answer).toContain('uploaded-on-turn-1');

    // Retirement: deleting the conversation removes its workspace's pointer (and objects) from the bucket.
    const del = await fetch(`${stack.apiUrl}/v1/conversations/${t1.conversationId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user }),
    });
    expect([200, 204]).toContain(del.status);
    expect(await bucket.hasObject(bucket.key(src.workspaceId, 'latest'))).toBe(false);
    expect(await bucket.latest(dst)).not.toBeNull();
    // And nothing was ever created under the api's WORKSPACES_DIR.
    expect(fs.statSync(apiDir).isFile()).toBe(true);
  });
});
