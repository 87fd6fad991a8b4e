/**
 * The S3 workspace store (agent-backend/workspace/store.ts) against a real S3 server (SeaweedFS `weed mini`,
 * stack/s3-server.ts): a round trip between two local directories that share nothing but the bucket; an incremental
 * save that uploads only the changed file's blob (PUTs counted at the client); a restore of an unchanged copy that
 * moves nothing; a save that dies before its `latest` pointer leaves the previous version whole.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { S3Server } from '../../stack/s3-server.js';
import { S3WorkspaceStore } from '../../agent-backend/workspace/store.js';
import { readMarker } from '../../core/domain/workspace-marker.js';

let server: S3Server;
let tmp: string;
let client: S3Client;
/** Every command the store sends, in order: its name and key. */
const sent: { command: string; key: string }[] = [];
/** When set, the command for which it returns true fails as a crash would (nothing of it reaches the server). */
let crashOn: ((command: string, key: string) => boolean) | null = null;

beforeAll(async () => {
  tmp = path.join(inject('testDataDir'), `s3-store-${crypto.randomUUID()}`);
  fs.mkdirSync(tmp, { recursive: true });
  server = await S3Server.start({
    dataDir: path.join(tmp, 's3'),
    bucket: 'ws-test',
    accessKeyId: 'test-access',
    secretAccessKey: 'test-secret-key',
  });
  client = new S3Client({
    endpoint: server.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test-access', secretAccessKey: 'test-secret-key' },
  });
  const send = client.send.bind(client) as (c: unknown) => Promise<unknown>;
  (client as unknown as { send: (c: unknown) => Promise<unknown> }).send = async (c: unknown) => {
    const cmd = c as { constructor: { name: string }; input: { Key?: string } };
    const entry = { command: cmd.constructor.name, key: cmd.input.Key ?? '' };
    if (crashOn?.(entry.command, entry.key)) throw new Error(`crash before ${entry.command} ${entry.key}`);
    sent.push(entry);
    return send(c);
  };
}, 600_000);
afterAll(async () => {
  client?.destroy();
  await server?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const store = () => new S3WorkspaceStore({ client, bucket: 'ws-test' });
/** A backend's WORKSPACES_DIR of its own and the workspace's directory in it. */
function host(name: string, workspaceId: string) {
  const root = path.join(tmp, name);
  fs.mkdirSync(root, { recursive: true });
  return path.join(root, workspaceId);
}
const puts = () => sent.filter((s) => s.command === 'PutObjectCommand');
const blobPuts = () => puts().filter((s) => s.key.includes('/blobs/'));
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const ent of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${ent.name}` : ent.name;
      if (r === '.tmp') continue;
      if (ent.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(path.join(dir, r))}`;
      else if (ent.isDirectory()) {
        out[`${r}/`] = '';
        walk(r);
      } else out[r] = fs.readFileSync(path.join(dir, r), 'utf8');
    }
  };
  walk('');
  return out;
}

describe('S3 workspace store on SeaweedFS', () => {
  it('a workspace saved on one host is restored on another, files, directories, modes and links, with its marker', async () => {
    const id = { workspaceId: crypto.randomUUID(), generation: 1 };
    const a = host('rt-a', id.workspaceId);
    fs.mkdirSync(path.join(a, 'src/deep'), { recursive: true });
    fs.mkdirSync(path.join(a, 'empty'));
    fs.writeFileSync(path.join(a, 'notes.txt'), 'hello from A\n');
    fs.writeFileSync(path.join(a, 'src/deep/run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    fs.writeFileSync(path.join(a, 'same-1'), 'twin');
    fs.writeFileSync(path.join(a, 'same-2'), 'twin');
    fs.symlinkSync('notes.txt', path.join(a, 'link'));
    fs.mkdirSync(path.join(a, '.tmp'));
    fs.writeFileSync(path.join(a, '.tmp/scratch'), 'not saved');

    const saved = await store().save(a, id);
    expect(saved).toMatchObject({ files: 4, uploadedBlobs: 3 }); // two files of one content: one blob

    const b = host('rt-b', id.workspaceId);
    const restored = await store().restore(b, id);
    expect(restored).toMatchObject({ version: saved.version, rebuilt: true, downloadedBlobs: 3, reusedFiles: 0 });
    expect(tree(b)).toEqual(tree(a)); // tree() leaves .tmp out
    expect(fs.existsSync(path.join(b, '.tmp/scratch'))).toBe(false);
    expect(fs.statSync(path.join(b, 'src/deep/run.sh')).mode & 0o777).toBe(0o755);
    // The bucket vouched for it: the restored directory is the binding's own, not a lost one.
    expect(readMarker(b)).toMatchObject({ workspaceId: id.workspaceId, generation: 1 });
  });

  it('a second save after one change among 200 files uploads that one blob; a restore of an unchanged copy moves nothing', async () => {
    const id = { workspaceId: crypto.randomUUID(), generation: 1 };
    const a = host('inc-a', id.workspaceId);
    fs.mkdirSync(path.join(a, 'data'), { recursive: true });
    for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(a, 'data', `f${i}.bin`), crypto.randomBytes(4096));
    const first = await store().save(a, id);
    expect(first.uploadedBlobs).toBe(200);

    fs.appendFileSync(path.join(a, 'data/f17.bin'), 'changed');
    sent.length = 0;
    const second = await store().save(a, id);
    expect(blobPuts()).toHaveLength(1);
    expect(second).toMatchObject({ files: 200, uploadedBlobs: 1, uploadedBytes: 4096 + 7 });
    expect(
      puts().map((p) =>
        p.key
          .split('/')
          .at(-1)!
          .replace(/^\d{13}-.*\.json$/, 'manifest'),
      ),
    ).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/), 'manifest', 'latest']);

    // Another host restores it; the first host, already at that version, moves nothing.
    const b = host('inc-b', id.workspaceId);
    expect(await store().restore(b, id)).toMatchObject({ rebuilt: true, downloadedBlobs: 200 });
    sent.length = 0;
    expect(await store().restore(a, id)).toMatchObject({ version: second.version, rebuilt: false, downloadedBlobs: 0 });
    expect(sent.map((s) => s.command)).toEqual(['GetObjectCommand']); // the pointer only

    // B changes one file and saves; A catches up by downloading that one blob and reusing its 199 others.
    fs.writeFileSync(path.join(b, 'data/f3.bin'), 'from b');
    fs.rmSync(path.join(b, 'data/f4.bin'));
    await store().save(b, id);
    sent.length = 0;
    const caughtUp = await store().restore(a, id);
    expect(caughtUp).toMatchObject({ rebuilt: true, downloadedBlobs: 1, downloadedBytes: 6, reusedFiles: 198 });
    expect(fs.readFileSync(path.join(a, 'data/f3.bin'), 'utf8')).toBe('from b');
    expect(fs.existsSync(path.join(a, 'data/f4.bin'))).toBe(false);
    expect(tree(a)).toEqual(tree(b));
  });

  it('a save that dies after some blobs and before its pointer leaves the previous version whole', async () => {
    const id = { workspaceId: crypto.randomUUID(), generation: 1 };
    const a = host('crash-a', id.workspaceId);
    fs.mkdirSync(a);
    for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(a, `v1-${i}.txt`), `version 1, file ${i}`);
    const v1 = await store().save(a, id);
    const before = tree(a);

    for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(a, `v1-${i}.txt`), `version 2, file ${i}`);
    fs.writeFileSync(path.join(a, 'new.txt'), 'only in version 2');
    let blobs = 0;
    // The process dies at its sixth blob: five of version 2's blobs are in the bucket, no manifest, no pointer.
    crashOn = (command, key) => command === 'PutObjectCommand' && key.includes('/blobs/') && ++blobs > 5;
    await expect(store().save(a, id)).rejects.toThrow(/crash before/);
    crashOn = null;
    const objects = await client.send(new ListObjectsV2Command({ Bucket: 'ws-test', Prefix: `workspaces/${id.workspaceId}/blobs/` }));
    expect(objects.KeyCount).toBe(15);

    const b = host('crash-b', id.workspaceId);
    expect(await store().restore(b, id)).toMatchObject({ version: v1.version, rebuilt: true });
    expect(tree(b)).toEqual(before);
  });

  it('a pointer of another generation is not restored, and a manifest naming a path outside the workspace is refused', async () => {
    const id = { workspaceId: crypto.randomUUID(), generation: 2 };
    const a = host('gen-a', id.workspaceId);
    fs.mkdirSync(a);
    fs.writeFileSync(path.join(a, 'x'), 'x');
    await store().save(a, { ...id, generation: 1 });
    const b = host('gen-b', id.workspaceId);
    expect(await store().restore(b, id)).toMatchObject({ version: null, rebuilt: false });
    expect(fs.existsSync(b)).toBe(false);

    const version = `${Date.now()}-${crypto.randomUUID()}`;
    const prefix = `workspaces/${id.workspaceId}`;
    const evil = { format: 1, workspace_id: id.workspaceId, generation: 2, version, parent: null, saved_at: new Date().toISOString() };
    const put = (key: string, body: unknown) =>
      client.send(new PutObjectCommand({ Bucket: 'ws-test', Key: `${prefix}/${key}`, Body: JSON.stringify(body) }));
    await put(`manifests/${version}.json`, {
      ...evil,
      entries: [{ kind: 'file', path: '../escape', mode: 0o644, size: 1, sha256: 'a'.repeat(64) }],
    });
    await put('latest', { format: 1, workspace_id: id.workspaceId, generation: 2, version });
    await expect(store().restore(b, id)).rejects.toThrow(/plain components/);
    expect(fs.existsSync(path.join(tmp, 'escape'))).toBe(false);
    expect(fs.readdirSync(path.dirname(b)).filter((n) => n.startsWith('.partial-'))).toEqual([]);
  });
  it('a link to a host file is saved as a link, never its target; a manifest writing through a link is refused', async () => {
    // The escapes this layer stops: a save run as the backend reading a host file a tenant's symlink names, and a
    // restore writing outside the workspace through a link an earlier entry made.
    const outside = path.join(tmp, 'host-only');
    fs.mkdirSync(outside, { recursive: true });
    const secret = `host secret ${crypto.randomUUID()}`;
    fs.writeFileSync(path.join(outside, 'secret.txt'), secret);
    const id = { workspaceId: crypto.randomUUID(), generation: 1 };
    const a = host('link-a', id.workspaceId);
    fs.mkdirSync(a);
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(a, 'leak'));
    fs.symlinkSync(outside, path.join(a, 'dir-leak'));
    const from = sent.length;
    const saved = await store().save(a, id);
    expect(saved).toMatchObject({ files: 0, uploadedBlobs: 0 });
    const secretHash = crypto.createHash('sha256').update(secret).digest('hex');
    expect(sent.slice(from).filter((s) => s.key.includes(secretHash))).toEqual([]);
    const b = host('link-b', id.workspaceId);
    await store().restore(b, id);
    expect(fs.readlinkSync(path.join(b, 'leak'))).toBe(path.join(outside, 'secret.txt'));
    expect(fs.lstatSync(path.join(b, 'dir-leak')).isSymbolicLink()).toBe(true);

    const body = 'written through the link';
    const hash = crypto.createHash('sha256').update(body).digest('hex');
    const version = `${Date.now()}-${crypto.randomUUID()}`;
    const prefix = `workspaces/${id.workspaceId}`;
    const put = (key: string, content: string) =>
      client.send(new PutObjectCommand({ Bucket: 'ws-test', Key: `${prefix}/${key}`, Body: content }));
    await put(`blobs/${hash}`, body);
    const head = { format: 1, workspace_id: id.workspaceId, generation: 1, version, parent: null, saved_at: new Date().toISOString() };
    await put(
      `manifests/${version}.json`,
      JSON.stringify({
        ...head,
        entries: [
          { kind: 'symlink', path: 'out', target: outside },
          { kind: 'file', path: 'out/pwn', mode: 0o644, size: body.length, sha256: hash },
        ],
      }),
    );
    await put('latest', JSON.stringify({ format: 1, workspace_id: id.workspaceId, generation: 1, version }));
    const c = host('link-c', id.workspaceId);
    await expect(store().restore(c, id)).rejects.toThrow(/ENOENT|ELOOP|ENOTDIR/);
    expect(fs.existsSync(path.join(outside, 'pwn'))).toBe(false);
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
  });
});
