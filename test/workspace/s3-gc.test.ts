/**
 * The sweeper's GC of the workspace bucket (WORKSPACE_STORE=s3; core/domain/workspace-bucket.ts gc, run by
 * worker/sweeper.ts each pass) against a real S3 server (SeaweedFS, stack/s3-server.ts), configured as the worker is
 * (bucketSweep over loadConfig: S3_GC_GRACE_MS, S3_KEEP_VERSIONS). Saves are the agent backend's own
 * (S3WorkspaceStore.save). Instead of waiting out the grace period, the pass is run at a later `now`: what was written
 * before a cut is past the grace, what was written after it is not.
 *
 * After N+1 saves only S3_KEEP_VERSIONS manifests remain (the latest among them); blobs a kept manifest references and
 * blobs younger than the grace survive, an unreferenced blob past it is deleted; a workspace whose retirement stopped
 * after its pointer loses its whole prefix; a save half done (its blobs uploaded, no manifest yet) when the pass runs
 * completes, and what `latest` then points at restores whole.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { sha256Hex, type WorkspaceBucket } from '../../core/domain/workspace-bucket.js';
import { S3WorkspaceStore } from '../../agent-backend/workspace/store.js';
import { S3Server } from '../../stack/s3-server.js';
import { bucketSweep } from '../../worker/sweeper.js';

const GRACE_MS = 60_000;
const KEEP = 3;

let server: S3Server;
let tmp: string;
let gc: NonNullable<ReturnType<typeof bucketSweep>>;
let storeClient: S3Client;
/** When set, the command for which it returns true fails as a crash would (nothing of it reaches the server). */
let crashOn: ((command: string, key: string) => boolean) | null = null;

beforeAll(async () => {
  tmp = path.join(inject('testDataDir'), `s3-gc-${crypto.randomUUID()}`);
  fs.mkdirSync(tmp, { recursive: true });
  server = await S3Server.start({
    dataDir: path.join(tmp, 's3'),
    bucket: 'ws-gc',
    accessKeyId: 'test-access',
    secretAccessKey: `test-secret-${crypto.randomBytes(8).toString('hex')}`,
  });
  const config = loadConfig({
    ...server.env(),
    DATA_DIR: path.join(tmp, 'data'),
    S3_GC_GRACE_MS: String(GRACE_MS),
    S3_KEEP_VERSIONS: String(KEEP),
  });
  gc = bucketSweep(config)!;
  expect(gc).toMatchObject({ graceMs: GRACE_MS, keepVersions: KEEP });
  storeClient = new S3Client({
    endpoint: server.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: server.opts.accessKeyId, secretAccessKey: server.opts.secretAccessKey },
  });
  const send = storeClient.send.bind(storeClient) as (c: unknown) => Promise<unknown>;
  (storeClient as unknown as { send: (c: unknown) => Promise<unknown> }).send = async (c: unknown) => {
    const cmd = c as { constructor: { name: string }; input: { Key?: string } };
    if (crashOn?.(cmd.constructor.name, cmd.input.Key ?? '')) throw new Error(`crash before ${cmd.constructor.name} ${cmd.input.Key}`);
    return send(c);
  };
}, 600_000);
afterAll(async () => {
  storeClient?.destroy();
  gc?.bucket.client.destroy();
  await server?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const store = () => new S3WorkspaceStore({ client: storeClient, bucket: 'ws-gc' });
const bucket = (): WorkspaceBucket => gc.bucket;
/** The sweeper's pass as worker/sweeper.ts runs it, at `now`. */
const pass = (now: number) => bucket().gc({ graceMs: gc.graceMs, keep: gc.keepVersions, now });

function host(name: string, workspaceId: string) {
  const root = path.join(tmp, name);
  fs.mkdirSync(root, { recursive: true });
  const dir = path.join(root, workspaceId);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}
async function keys(workspaceId: string, under = ''): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const r = await bucket().client.send(
      new ListObjectsV2Command({ Bucket: 'ws-gc', Prefix: bucket().key(workspaceId, under), ContinuationToken: token }),
    );
    for (const o of r.Contents ?? []) out.push(o.Key!.slice(bucket().key(workspaceId, '').length));
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return out.sort();
}
const blobs = async (workspaceId: string) => (await keys(workspaceId, 'blobs/')).map((k) => k.slice('blobs/'.length));
const manifests = async (workspaceId: string) => (await keys(workspaceId, 'manifests/')).map((k) => k.slice('manifests/'.length, -5));
const hash = (s: string) => sha256Hex(Buffer.from(s));

describe('the sweeper GCs the workspace bucket', () => {
  it('keeps S3_KEEP_VERSIONS manifests and what they or a save in progress need, deletes the rest past the grace', async () => {
    // Before the cut (past the grace when the pass runs): five saves of one workspace, each with a file of its own
    // beside one common file; a blob nothing references; a second workspace whose retirement stopped after `latest`.
    const id = { workspaceId: crypto.randomUUID(), generation: 1 };
    const a = host('a', id.workspaceId);
    fs.writeFileSync(path.join(a, 'common.txt'), 'in every version');
    const versions: string[] = [];
    for (let i = 1; i <= KEEP + 2; i++) {
      fs.writeFileSync(path.join(a, 'own.txt'), `version ${i}`);
      versions.push((await store().save(a, id)).version);
    }
    const strayOld = await bucket().putBlob(id.workspaceId, Buffer.from(`stray ${crypto.randomUUID()}`));
    const retired = { workspaceId: crypto.randomUUID(), generation: 1 };
    const r = host('r', retired.workspaceId);
    fs.writeFileSync(path.join(r, 'gone.txt'), 'its conversation was deleted');
    await store().save(r, retired);
    await bucket().client.send(new DeleteObjectCommand({ Bucket: 'ws-gc', Key: bucket().key(retired.workspaceId, 'latest') }));
    expect(await keys(retired.workspaceId)).toHaveLength(2); // its manifest and blob, no pointer

    // The cut: object times have a resolution of a second.
    const cut = Date.now() + 2500;
    await new Promise((res) => setTimeout(res, cut - Date.now()));

    // After the cut (within the grace): a blob nothing references yet, and a save that dies after uploading its blobs,
    // before its manifest (the state a concurrent save is in when the pass runs).
    const strayYoung = await bucket().putBlob(id.workspaceId, Buffer.from(`young ${crypto.randomUUID()}`));
    fs.writeFileSync(path.join(a, 'own.txt'), 'version 6, saved while the sweeper ran');
    fs.writeFileSync(path.join(a, 'new.txt'), `only in version 6 ${crypto.randomUUID()}`);
    crashOn = (command, key) => command === 'PutObjectCommand' && key.includes('/manifests/');
    await expect(store().save(a, id)).rejects.toThrow(/crash before/);
    crashOn = null;
    const halfSaved = [hash('version 6, saved while the sweeper ran'), hash(fs.readFileSync(path.join(a, 'new.txt'), 'utf8'))];
    for (const h of halfSaved) expect(await blobs(id.workspaceId)).toContain(h);
    expect((await bucket().latest(id))?.version).toBe(versions.at(-1));

    const report = await pass(cut + GRACE_MS - 1200);

    // Manifests: the latest and the newest ones up to S3_KEEP_VERSIONS; the two oldest are gone.
    expect(await manifests(id.workspaceId)).toEqual(versions.slice(-KEEP));
    // Blobs: those of the kept versions and the common one, the young stray and the half-done save's; the oldest two
    // versions' own files and the old stray are gone.
    const kept = [hash('in every version'), ...[3, 4, 5].map((i) => hash(`version ${i}`)), strayYoung, ...halfSaved];
    expect(await blobs(id.workspaceId)).toEqual([...kept].sort());
    expect(await blobs(id.workspaceId)).not.toContain(strayOld);
    for (const i of [1, 2]) expect(await blobs(id.workspaceId)).not.toContain(hash(`version ${i}`));
    // The retired workspace's prefix is empty.
    expect(await keys(retired.workspaceId)).toEqual([]);
    expect(report).toMatchObject({ deletedManifests: 2 + 1, deletedBlobs: 3 + 1 });

    // The save that was in progress completes (a retry, as the backend's next save would): its blobs were kept, and
    // what `latest` points at restores whole on another host.
    const v6 = await store().save(a, id);
    expect(v6.uploadedBlobs).toBe(0);
    expect((await bucket().latest(id))?.version).toBe(v6.version);
    const b = path.join(tmp, 'b', id.workspaceId);
    fs.mkdirSync(path.dirname(b), { recursive: true });
    expect(await store().restore(b, id)).toMatchObject({ version: v6.version, rebuilt: true });
    for (const name of ['common.txt', 'own.txt', 'new.txt'])
      expect(fs.readFileSync(path.join(b, name), 'utf8')).toBe(fs.readFileSync(path.join(a, name), 'utf8'));

    // A second pass much later: every blob the latest manifest references is still there; the young stray is not.
    await pass(Date.now() + 10 * GRACE_MS);
    const latest = (await bucket().latest(id))!;
    const m = await bucket().manifest(id, latest.version);
    const present = new Set(await blobs(id.workspaceId));
    for (const e of m.entries) if (e.kind === 'file') expect(present.has(e.sha256), e.path).toBe(true);
    expect(await manifests(id.workspaceId)).toHaveLength(KEEP);
    expect(present.has(strayYoung)).toBe(false);
  });

  it('never deletes what is under the prefix but not a workspace: a neighbour prefix nested in it, a stray object', async () => {
    // A shared bucket: another deployment (or an operator's archive) with S3_PREFIX=workspaces/archive/ writes under
    // ours, in the same shape; and a plain object. Neither has a `latest` pointer where this store would look for one.
    const neighbour = `workspaces/archive/${crypto.randomUUID()}/`;
    const foreign = [
      `${neighbour}latest`,
      `${neighbour}manifests/0000000000001-x.json`,
      `${neighbour}blobs/${hash('theirs')}`,
      'workspaces/README.txt',
    ];
    for (const Key of foreign) await bucket().client.send(new PutObjectCommand({ Bucket: 'ws-gc', Key, Body: 'not this store’s' }));
    await pass(Date.now() + 10 * GRACE_MS);
    const left: string[] = [];
    const r = await bucket().client.send(new ListObjectsV2Command({ Bucket: 'ws-gc', Prefix: 'workspaces/' }));
    for (const o of r.Contents ?? []) left.push(o.Key!);
    for (const key of foreign) expect(left, key).toContain(key);
  });
});
