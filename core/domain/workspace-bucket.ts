/**
 * The bucket format of workspaces on object storage (issue 44 item 1; docs/workspace.md "Workspaces on object storage"),
 * one definition for every process that touches it: the agent backend saves and restores whole workspaces
 * (agent-backend/workspace/store.ts); the api and the worker never need a workspace's disk in `WORKSPACE_STORE=s3`
 * mode and go through this module instead (turn uploads added as a new version, tool files read by their content
 * hash, fork as a new manifest over server-side copies of the blobs, retirement and the sweeper's GC).
 *
 * Objects, under `<S3_PREFIX><workspace id>/`:
 *   blobs/<sha256>               one per distinct file content (a key is its content: never overwritten)
 *   manifests/<version>.json     path → kind, mode, size, sha256 (directories and symlinks too), written after its blobs
 *   latest                       {version, generation}, written last
 */
import crypto from 'node:crypto';
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { z } from 'zod';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { isPlainComponent } from './workspace-fs.js';

/** A workspace in the bucket: its id and the generation its binding expects (another generation is not its own). */
export interface BucketIdentity {
  workspaceId: string;
  generation: number;
}

export const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
/** A path inside the workspace: plain components only, so a manifest can never name anything outside it. */
const RelPath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => p.split('/').every(isPlainComponent), 'not a relative path of plain components');
const Mode = z.number().int().min(0).max(0o7777);
export const ManifestEntry = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('dir'), path: RelPath, mode: Mode }).strict(),
  z.object({ kind: z.literal('file'), path: RelPath, mode: Mode, size: z.number().int().nonnegative(), sha256: Sha256 }).strict(),
  z.object({ kind: z.literal('symlink'), path: RelPath, target: z.string().min(1).max(4096) }).strict(),
]);
export type ManifestEntry = z.infer<typeof ManifestEntry>;
export const Version = z.string().regex(/^\d{13}-[0-9a-f-]{36}$/);
export const Manifest = z
  .object({
    format: z.literal(1),
    workspace_id: z.string(),
    generation: z.number().int(),
    version: Version,
    parent: Version.nullable(),
    saved_at: z.string(),
    entries: z.array(ManifestEntry).max(1_000_000),
  })
  .strict();
export type Manifest = z.infer<typeof Manifest>;
export const Pointer = z
  .object({ format: z.literal(1), workspace_id: z.string(), generation: z.number().int(), version: Version })
  .strict();
export type Pointer = z.infer<typeof Pointer>;

export const newVersion = () => `${String(Date.now()).padStart(13, '0')}-${crypto.randomUUID()}`;
const versionTime = (v: string) => Number(v.slice(0, 13));
export const sha256Hex = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

export const notFound = (err: unknown) =>
  err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata.httpStatusCode === 404);

/** A key below the prefix that is a workspace's: `<workspace id>/...` (the ids are lower-case UUIDs, key()). */
const WORKSPACE_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\//;

export interface GcReport {
  workspaces: number;
  deletedManifests: number;
  deletedBlobs: number;
}

export class WorkspaceBucket {
  readonly prefix: string;
  constructor(
    readonly client: S3Client,
    readonly bucket: string,
    prefix = 'workspaces/',
    readonly logger?: Logger,
  ) {
    this.prefix = prefix;
  }

  key(workspaceId: string, rest: string): string {
    return `${this.prefix}${workspaceId.toLowerCase()}/${rest}`;
  }

  async getJson(key: string): Promise<unknown> {
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return JSON.parse(await r.Body!.transformToString('utf8')) as unknown;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  async putJson(key: string, value: unknown): Promise<void> {
    await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: JSON.stringify(value), ContentType: 'application/json' }),
    );
  }

  async hasObject(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }

  /** The latest saved version of `id`, or null (none, or one of another generation: not this binding's workspace). */
  async latest(id: BucketIdentity): Promise<Pointer | null> {
    const raw = await this.getJson(this.key(id.workspaceId, 'latest'));
    if (raw === null) return null;
    const p = Pointer.parse(raw);
    return p.workspace_id === id.workspaceId.toLowerCase() && p.generation === id.generation ? p : null;
  }

  async manifest(id: BucketIdentity, version: string): Promise<Manifest> {
    const raw = await this.getJson(this.key(id.workspaceId, `manifests/${version}.json`));
    if (raw === null) throw new Error(`workspace ${id.workspaceId}: manifest ${version} is missing from the bucket`);
    const m = Manifest.parse(raw);
    if (m.workspace_id !== id.workspaceId.toLowerCase() || m.generation !== id.generation || m.version !== version)
      throw new Error(`workspace ${id.workspaceId}: manifest ${version} describes another workspace or version`);
    return m;
  }

  /** Uploads `bytes` as the blob of its content unless the bucket has it; returns its sha256. */
  async putBlob(workspaceId: string, bytes: Buffer): Promise<string> {
    const hash = sha256Hex(bytes);
    const key = this.key(workspaceId, `blobs/${hash}`);
    if (!(await this.hasObject(key)))
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: bytes,
          ContentLength: bytes.length,
          ContentType: 'application/octet-stream',
        }),
      );
    return hash;
  }

  /** The blob `hash` of `workspaceId`, checked against its hash; null when the bucket has none or it exceeds `maxBytes`. */
  async getBlob(workspaceId: string, hash: string, maxBytes: number): Promise<Buffer | null> {
    if (!Sha256.safeParse(hash).success) return null;
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(workspaceId, `blobs/${hash}`) }));
      if ((r.ContentLength ?? 0) > maxBytes) {
        await r.Body?.transformToByteArray().catch(() => undefined);
        return null;
      }
      const bytes = Buffer.from(await r.Body!.transformToByteArray());
      if (bytes.length > maxBytes || sha256Hex(bytes) !== hash) return null;
      return bytes;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  /** Writes `entries` as the new latest version of `id`: the manifest, then the pointer (a crash between leaves the old one). */
  async commit(id: BucketIdentity, entries: ManifestEntry[], parent: string | null): Promise<Manifest> {
    const manifest: Manifest = {
      format: 1,
      workspace_id: id.workspaceId.toLowerCase(),
      generation: id.generation,
      version: newVersion(),
      parent,
      saved_at: new Date().toISOString(),
      entries,
    };
    await this.putJson(this.key(id.workspaceId, `manifests/${manifest.version}.json`), manifest);
    await this.putJson(this.key(id.workspaceId, 'latest'), {
      format: 1,
      workspace_id: manifest.workspace_id,
      generation: id.generation,
      version: manifest.version,
    } satisfies Pointer);
    return manifest;
  }

  /**
   * Adds files under `dirs` (each created if missing) to the latest version of `id` as a new version: what the api
   * places for a turn (its uploads) before the run starts, restored by whichever backend runs it. The turn lock holds:
   * no run of this workspace saves meanwhile. A file already at a path is replaced.
   */
  async addFiles(id: BucketIdentity, dirs: string[], files: { name: string; bytes: Buffer; mode?: number }[]): Promise<string[]> {
    const pointer = await this.latest(id);
    const base = pointer ? (await this.manifest(id, pointer.version)).entries : [];
    const entries = [...base];
    const have = new Set(entries.map((e) => e.path));
    for (let i = 1; i <= dirs.length; i++) {
      const p = dirs.slice(0, i).join('/');
      if (have.has(p)) {
        const e = entries.find((x) => x.path === p)!;
        if (e.kind !== 'dir') throw new Error(`${p} in the workspace is not a directory`);
      } else {
        entries.push({ kind: 'dir', path: p, mode: 0o755 });
        have.add(p);
      }
    }
    const placed: string[] = [];
    for (const f of files) {
      const hash = await this.putBlob(id.workspaceId, f.bytes);
      const p = [...dirs, f.name].join('/');
      const at = entries.findIndex((e) => e.path === p);
      const entry: ManifestEntry = { kind: 'file', path: p, mode: f.mode ?? 0o644, size: f.bytes.length, sha256: hash };
      if (at >= 0) entries[at] = entry;
      else entries.push(entry);
      placed.push(p);
    }
    await this.commit(id, entries, pointer?.version ?? null);
    return placed;
  }

  /**
   * The latest version of `from` as the first version of `to` (a fork): a new manifest over the same contents, each blob
   * copied inside the bucket (CopyObject: no byte passes through this process). Null when `from` has no version.
   */
  async copy(from: BucketIdentity, to: BucketIdentity, budgetBytes: number): Promise<{ bytes: number; entries: number } | null> {
    const pointer = await this.latest(from);
    if (!pointer) return null;
    const m = await this.manifest(from, pointer.version);
    const bytes = m.entries.reduce((n, e) => n + (e.kind === 'file' ? e.size : 0), 0);
    if (bytes > budgetBytes) throw new BucketCopyOverBudget(bytes);
    const blobs = new Set(m.entries.flatMap((e) => (e.kind === 'file' ? [e.sha256] : [])));
    for (const hash of blobs)
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: this.key(to.workspaceId, `blobs/${hash}`),
          CopySource: `${this.bucket}/${this.key(from.workspaceId, `blobs/${hash}`)}`,
        }),
      );
    await this.commit(to, m.entries, null);
    return { bytes, entries: m.entries.length };
  }

  private async list(prefix: string): Promise<{ key: string; lastModified: Date }[]> {
    const out: { key: string; lastModified: Date }[] = [];
    let token: string | undefined;
    do {
      const r = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of r.Contents ?? []) if (o.Key) out.push({ key: o.Key, lastModified: o.LastModified ?? new Date(0) });
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  private async deleteKeys(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000)
      await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.bucket,
          Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true },
        }),
      );
  }

  /**
   * Retirement: the pointer goes first (from then on no restore finds the workspace: its next binding starts empty),
   * then its manifests and blobs. Idempotent; what a crash leaves behind the sweeper's GC removes.
   */
  async remove(workspaceId: string): Promise<void> {
    await this.deleteKeys([this.key(workspaceId, 'latest')]);
    const rest = await this.list(this.key(workspaceId, ''));
    await this.deleteKeys(rest.map((o) => o.key));
  }

  /**
   * The sweeper's GC of one pass. Per workspace prefix: manifests older than `graceMs` other than the latest and the
   * `keep` newest are deleted; then blobs older than `graceMs` that no remaining manifest references. A prefix with
   * no pointer (retired, its removal interrupted) loses everything older than `graceMs`.
   *
   * Why the grace period keeps concurrent saves whole: a save uploads (or finds, by HEAD) its blobs first and writes its
   * manifest after, within one run's release; a blob it found by HEAD is one an older manifest references, and a blob it
   * uploaded is younger than `graceMs`. So a blob is deleted only when it is older than the grace period AND absent
   * from every manifest listed after the blob list was taken — a save that could still reference it would have had to
   * stay between its HEAD and its manifest write for longer than `graceMs` (the default is an hour; a save takes seconds).
   */
  async gc(opts: { graceMs: number; keep: number; now?: number }): Promise<GcReport> {
    const now = opts.now ?? Date.now();
    const report: GcReport = { workspaces: 0, deletedManifests: 0, deletedBlobs: 0 };
    const byWorkspace = new Map<string, { key: string; lastModified: Date }[]>();
    for (const o of await this.list(this.prefix)) {
      const ws = o.key.slice(this.prefix.length).split('/')[0]!;
      // Only workspaces (their ids are UUIDs, `<id>/...`): another prefix nested in ours (`workspaces/archive/...`),
      // or anything else a shared bucket holds there, is not this store's to delete.
      if (!WORKSPACE_KEY.test(o.key.slice(this.prefix.length))) continue;
      byWorkspace.set(ws, [...(byWorkspace.get(ws) ?? []), o]);
    }
    for (const [ws, objects] of byWorkspace) {
      report.workspaces += 1;
      const old = (o: { lastModified: Date }) => now - o.lastModified.getTime() > opts.graceMs;
      const pointerRaw = await this.getJson(this.key(ws, 'latest'));
      const pointer = pointerRaw === null ? null : (Pointer.safeParse(pointerRaw).data ?? null);
      const manifestKeys = objects.filter((o) => o.key.startsWith(this.key(ws, 'manifests/')));
      const versions = manifestKeys
        .map((o) => ({ ...o, version: o.key.slice(this.key(ws, 'manifests/').length).replace(/\.json$/, '') }))
        .sort((a, b) => b.version.localeCompare(a.version));
      const kept = new Set(versions.slice(0, pointer ? opts.keep : 0).map((v) => v.version));
      if (pointer) kept.add(pointer.version);
      const drop = versions.filter((v) => !kept.has(v.version) && old(v) && now - versionTime(v.version) > opts.graceMs);
      await this.deleteKeys(drop.map((v) => v.key));
      report.deletedManifests += drop.length;
      // References: every manifest still there, read after the blob list above was taken.
      const referenced = new Set<string>();
      for (const v of versions) {
        if (drop.includes(v)) continue;
        const raw = await this.getJson(v.key);
        const m = raw === null ? null : Manifest.safeParse(raw).data;
        for (const e of m?.entries ?? []) if (e.kind === 'file') referenced.add(e.sha256);
      }
      const blobs = objects.filter((o) => o.key.startsWith(this.key(ws, 'blobs/')));
      const dead = blobs.filter((b) => old(b) && !referenced.has(b.key.slice(this.key(ws, 'blobs/').length)));
      await this.deleteKeys(dead.map((b) => b.key));
      report.deletedBlobs += dead.length;
      if (!pointer && objects.every(old))
        await this.deleteKeys(objects.filter((o) => !o.key.includes('/blobs/') && !o.key.includes('/manifests/')).map((o) => o.key));
    }
    if (report.deletedBlobs || report.deletedManifests) this.logger?.info({ ...report }, 'workspace bucket swept');
    return report;
  }
}

export class BucketCopyOverBudget extends Error {
  constructor(readonly bytes: number) {
    super(`the workspace holds ${bytes} bytes, over the copy budget`);
  }
}

export type BucketConfig = Pick<
  Config,
  | 'WORKSPACE_STORE'
  | 'S3_REGION'
  | 'S3_ENDPOINT'
  | 'S3_FORCE_PATH_STYLE'
  | 'S3_ACCESS_KEY_ID'
  | 'S3_SECRET_ACCESS_KEY'
  | 'S3_BUCKET'
  | 'S3_PREFIX'
>;
/** Where a deployment's workspaces live: WORKSPACES_DIR (posix) or the bucket (s3). */
export type WorkspacesConfig = BucketConfig & Pick<Config, 'workspacesDir'>;

/** The deployment's bucket (core/platform/config.ts S3_*), or null when WORKSPACE_STORE is not `s3`. */
export function workspaceBucket(config: BucketConfig, logger?: Logger): WorkspaceBucket | null {
  if (config.WORKSPACE_STORE !== 's3') return null;
  const clientConfig: S3ClientConfig = {
    region: config.S3_REGION,
    endpoint: config.S3_ENDPOINT,
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
    credentials:
      config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY
        ? { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY }
        : undefined,
  };
  return new WorkspaceBucket(new S3Client(clientConfig), config.S3_BUCKET!, config.S3_PREFIX, logger);
}

const cache = new WeakMap<object, WorkspaceBucket | null>();
/** workspaceBucket, one client per config object (the api's and the worker's config live as long as they do). */
export function bucketOf(config: BucketConfig): WorkspaceBucket | null {
  if (config.WORKSPACE_STORE !== 's3') return null;
  let b = cache.get(config);
  if (b === undefined) cache.set(config, (b = workspaceBucket(config)));
  return b;
}
