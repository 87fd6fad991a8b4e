/**
 * Two WORKSPACE_STORE=s3 paths of the api and the worker (issue 44 item 1 step 5) through the real stack (HTTP → api →
 * Temporal → worker → agent backend → shell), over a real S3 server (SeaweedFS, stack/s3-server.ts):
 *
 * - The fork's copy budget counts the manifest's file sizes in s3 mode (the POSIX copy, core/domain/workspace-tree.ts,
 *   counts every entry in whole 4 KiB blocks): 300 files of 10 bytes fork within a 1 MiB WORKSPACE_QUOTA_BYTES that the
 *   POSIX count (over 1.2 MB) would exceed. A fork over it is refused with 413 `workspace_quota_exceeded` before any
 *   object is copied and leaves nothing behind: no conversation, no workspace row, no object in the bucket.
 * - A workspace the bucket lost (no `latest` pointer, the turn on a host without a local copy) fails the turn
 *   `binding_lost`; the worker then removes what is left of it in the bucket (its manifests and blobs), and the next
 *   turn starts a fresh workspace.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DeleteObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BINDING_LOST_MESSAGE } from '../../activities/classify-failure.js';
import { markerPath } from '../../core/domain/workspace-marker.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { WorkspaceBucket } from '../../core/domain/workspace-bucket.js';
import { S3Server } from '../../stack/s3-server.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const MiB = 1024 * 1024;
let s3: S3Server;
let stack: Stack;
let bucket: WorkspaceBucket;
const root = path.join(inject('testDataDir'), 's3-fork-lost');

beforeAll(async () => {
  fs.mkdirSync(root, { recursive: true });
  s3 = await S3Server.start({
    dataDir: path.join(root, 's3'),
    bucket: 'workspaces',
    accessKeyId: 'test-access',
    secretAccessKey: `test-secret-${crypto.randomBytes(8).toString('hex')}`,
  });
  stack = await startTestStack('s3-fork-lost', {
    env: {
      ...s3.env(),
      SHELLCTL_AUTH_TOKEN: 'test-shellctl-token',
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      WORKSPACE_QUOTA_BYTES: MiB,
      TENANT_MAX_WORKSPACE_COPY_BYTES: 0,
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
  await stack?.stop();
  await s3?.stop();
  bucket?.client.destroy();
});

const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(query: string, user: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
    query,
    user,
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  return { end, answer: answerOf(frames), conversationId: end.data.conversation_id as string, messageId: end.data.message_id as string };
}

async function bindingOf(conversationId: string) {
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  return stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
}

/** Every key in the bucket under `prefix`. */
async function keys(prefix = ''): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const r = await bucket.client.send(new ListObjectsV2Command({ Bucket: 'workspaces', Prefix: prefix, ContinuationToken: token }));
    for (const o of r.Contents ?? []) out.push(o.Key!);
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return out.sort();
}

async function fork(conversationId: string, messageId: string, user: string) {
  const res = await fetch(`${stack.apiUrl}/v1/conversations/${conversationId}/fork`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user, message_id: messageId }),
  });
  return {
    status: res.status,
    body: (await res.json()) as {
      id?: string;
      code?: string;
      message?: string;
      workspace_copy?: { bytes: number; entries: number } | null;
    },
  };
}

describe('WORKSPACE_STORE=s3: fork over the copy budget', () => {
  it('counts file sizes, not blocks: 300 small files fork within a 1 MiB budget; a 2 MiB file is refused 413 workspace_quota_exceeded with nothing kept', async () => {
    const user = 's3-fork-budget';
    // Files put in the bucket's latest version the way the api places a turn's uploads (WorkspaceBucket.addFiles),
    // past what the shell could write under WORKSPACE_QUOTA_BYTES.
    const small = await turn('/sh echo ok', user);
    expect(small.end.event, JSON.stringify(small.end.data)).toBe('message_end');
    const src = await bindingOf(small.conversationId);
    const srcId = { workspaceId: src.workspace_id.toLowerCase(), generation: src.generation };
    // 300 files of 10 bytes: 3000 bytes as sizes, over 1.2 MB as the POSIX copy counts them (a 4 KiB block each).
    const many = Array.from({ length: 300 }, (_, i) => ({ name: `f${i}`, bytes: Buffer.from(`${String(i).padStart(9, '0')}\n`) }));
    await bucket.addFiles(srcId, ['many'], many);
    const files = (await bucket.manifest(srcId, (await bucket.latest(srcId))!.version)).entries.filter((e) => e.kind === 'file');
    const sizes = files.reduce((n, e) => n + e.size, 0);
    expect(files.length * 4096).toBeGreaterThan(MiB); // what a block count would have refused
    const ok = await fork(small.conversationId, small.messageId, user);
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.workspace_copy).toMatchObject({ bytes: sizes });
    expect(sizes).toBeLessThan(MiB);
    const forked = await bindingOf(ok.body.id!);
    expect(await bucket.latest({ workspaceId: forked.workspace_id.toLowerCase(), generation: 1 })).not.toBeNull();

    const big = await turn('/sh echo ok', user);
    expect(big.end.event, JSON.stringify(big.end.data)).toBe('message_end');
    const bigSrc = await bindingOf(big.conversationId);
    await bucket.addFiles(
      { workspaceId: bigSrc.workspace_id.toLowerCase(), generation: bigSrc.generation },
      ['data'],
      [{ name: 'big.bin', bytes: crypto.randomBytes(2 * MiB) }],
    );
    const conversations = await stack.db.conversation.count();
    const workspaces = await stack.db.agentWorkspace.count();
    const before = await keys();
    const refused = await fork(big.conversationId, big.messageId, user);
    expect(refused.status, JSON.stringify(refused.body)).toBe(413);
    expect(refused.body.code).toBe('workspace_quota_exceeded');
    expect(refused.body.message).toContain('WORKSPACE_QUOTA_BYTES');
    expect(await stack.db.conversation.count()).toBe(conversations);
    expect(await stack.db.agentWorkspace.count()).toBe(workspaces);
    expect(await keys()).toEqual(before);
  }, 180_000);
});

describe('WORKSPACE_STORE=s3: a lost workspace', () => {
  it('fails the turn binding_lost, its remaining objects are removed from the bucket, and the next turn starts a fresh workspace', async () => {
    const user = 's3-lost';
    const t1 = await turn('/sh echo kept > note.txt && echo ok', user);
    expect(t1.end.event, JSON.stringify(t1.end.data)).toBe('message_end');
    const first = await bindingOf(t1.conversationId);
    const ws = first.workspace_id.toLowerCase();
    const saved = await keys(bucket.key(ws, ''));
    expect(saved).toContain(bucket.key(ws, 'latest'));
    expect(saved.filter((k) => k.includes('/blobs/')).length).toBeGreaterThan(0);
    expect(saved.filter((k) => k.includes('/manifests/')).length).toBeGreaterThan(0);

    // The bucket loses the pointer (its manifests and blobs stay), and the next turn lands on a host with no local copy.
    await bucket.client.send(new DeleteObjectCommand({ Bucket: 'workspaces', Key: bucket.key(ws, 'latest') }));
    const dir = path.join(stack.config.workspacesDir, first.workspace_id);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(markerPath(dir), { force: true });

    const t2 = await turn('/sh cat note.txt', user, t1.conversationId);
    expect(t2.end.event).toBe('error');
    expect(t2.end.data).toMatchObject({ message: BINDING_LOST_MESSAGE });
    // The removal runs in the worker after the failure is committed: wait for the turn's workflow, not for a time.
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: t2.messageId } });
    await stack.temporal.workflow
      .getHandle(msg.workflow_id)
      .result()
      .catch(() => undefined);
    expect((msg.metadata as { agent_failure: { reason: string } }).agent_failure.reason).toBe('binding_lost');
    const retired = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: first.id }, include: { workspace: true } });
    expect([retired.retired_reason, retired.workspace.status]).toEqual(['binding_lost', 'retired']);
    expect(await keys(bucket.key(ws, ''))).toEqual([]);

    const t3 = await turn('/sh ls -A; cat note.txt', user, t1.conversationId);
    expect(t3.end.event, JSON.stringify(t3.end.data)).toBe('message_end');
    expect(t3.answer).toContain('No such file');
    const next = await bindingOf(t1.conversationId);
    expect(next.workspace_id).not.toBe(first.workspace_id);
    expect(await bucket.latest({ workspaceId: next.workspace_id.toLowerCase(), generation: next.generation })).not.toBeNull();
  }, 180_000);
});
