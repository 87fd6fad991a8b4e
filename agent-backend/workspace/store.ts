/**
 * Where a workspace lives between runs (issue 44 item 1; docs/workspace.md "Workspaces on object storage").
 *
 * - `posix` (the default, `npm start`'s): WORKSPACES_DIR is the one directory every api, worker and backend shares;
 *   nothing to restore or save.
 * - `s3`: the backend that runs the turn works on a local copy under its own WORKSPACES_DIR, restored from a bucket
 *   when the runtime layer enters and saved back when the run ends (success, ask_human pause, failure, stop). Objects,
 *   under `<S3_PREFIX><workspace id>/`:
 *     blobs/<sha256>               one per distinct file content, uploaded only when the bucket lacks it
 *     manifests/<version>.json     path → kind, mode, size, sha256 (directories and symlinks too), written after its blobs
 *     latest                       {version, generation}, written last
 *   A save that dies before `latest` leaves the previous version visible and whole (its blobs are never overwritten: a
 *   key is its content). A save moves only the blobs of changed files; a file is rehashed only when its size, inode,
 *   mtime or ctime differ from the last save (ctime cannot be set by the agent). A restore downloads only the blobs the
 *   local copy lacks: when the local copy is the latest version (the record beside the markers says so, and the
 *   directory is the one recorded) nothing moves at all.
 *
 * The local record is `WORKSPACES_DIR/.store/<workspace id>.json`, beside the workspaces like the markers (marker.ts):
 * the agent's shell cannot forge it. Everything in the tree is read and written through descriptors, never following
 * what the agent planted (core/domain/workspace-tree.ts, docs/security.md "Root never walks a tenant tree"); a restore is
 * built beside the workspace (`.partial-*`) and renamed into place, so a half restore is never the workspace. The
 * marker is rewritten for the restored directory: the bucket vouches for its identity, so it is the binding's own.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Logger } from '../../core/platform/logger.js';
import type { Owner } from '../../core/domain/workspace-fs.js';
import {
  Manifest,
  newVersion,
  Sha256,
  Version,
  WorkspaceBucket,
  workspaceBucket,
  type ManifestEntry,
  type Pointer,
} from '../../core/domain/workspace-bucket.js';
import { removeTree, TreeWriter, walkTree } from '../../core/domain/workspace-tree.js';
import { writeMarker, type WorkspaceIdentity } from '../../core/domain/workspace-marker.js';

/** The directory of local records, in WORKSPACES_DIR (never a workspace id). */
export const STORE_STATE_DIR = '.store';
/** Not saved: the command's TMPDIR (made again on entry). */
const EXCLUDED = (rel: string) => rel === '.tmp' || rel.startsWith('.tmp/');
/** Files up to this size are read into memory once (hashed and uploaded from the same bytes); larger ones are streamed. */
const INLINE_BYTES = 8 * 1024 * 1024;
const CONCURRENCY = 8;

export interface SaveReport {
  version: string;
  entries: number;
  files: number;
  bytes: number;
  /** Blobs this save uploaded (the bucket lacked them), and their bytes. */
  uploadedBlobs: number;
  uploadedBytes: number;
  /** Entries left out (FIFOs, sockets, devices, unreadable, hard links reaching outside the tree). */
  skipped: number;
}

export interface RestoreReport {
  /** The version the local copy is now (null: the bucket has none for this workspace and generation). */
  version: string | null;
  /** Whether the local copy was rebuilt (false: it was already that version, or there was nothing to restore). */
  rebuilt: boolean;
  downloadedBlobs: number;
  downloadedBytes: number;
  /** Files taken from the local copy instead of the bucket (same path and content). */
  reusedFiles: number;
}

export interface WorkspaceStore {
  readonly kind: 'posix' | 's3';
  /** Brings the local copy at `dir` to the latest saved version of `id` (before the marker check; a no-op for posix). */
  restore(dir: string, id: WorkspaceIdentity, owner?: Owner): Promise<RestoreReport>;
  /** Saves the local copy at `dir` as the new latest version of `id` (a no-op for posix). */
  save(dir: string, id: WorkspaceIdentity): Promise<SaveReport | null>;
  /** Puts a file a tool attached where the worker reads it (s3: its blob in the bucket; posix: nothing to do). */
  publish(id: WorkspaceIdentity, bytes: Buffer): Promise<void>;
}

/** Today's shared directory: the workspace is where every process already sees it. */
export const posixWorkspaceStore: WorkspaceStore = {
  kind: 'posix',
  restore: async () => ({ version: null, rebuilt: false, downloadedBlobs: 0, downloadedBytes: 0, reusedFiles: 0 }),
  save: async () => null,
  publish: async () => undefined,
};

export { Manifest } from '../../core/domain/workspace-bucket.js';

const LocalFile = z.object({
  sha256: Sha256,
  size: z.number(),
  ino: z.number(),
  mtime_ms: z.number(),
  ctime_ms: z.number(),
});
type LocalFile = z.infer<typeof LocalFile>;
const LocalState = z.object({
  workspace_id: z.string(),
  generation: z.number().int(),
  version: Version,
  /** `<inode>:<birth time ns>` of the directory this record describes (marker.ts's identity of a directory). */
  directory: z.string(),
  files: z.record(z.string(), LocalFile),
});
type LocalState = z.infer<typeof LocalState>;

/** One chunk as the stream TreeWriter.file takes. */
async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

const sha256 = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

async function readAll(fh: fs.promises.FileHandle, size: number): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  let off = 0;
  while (off < size) {
    const { bytesRead } = await fh.read(buf, off, size - off, off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return off === size ? buf : buf.subarray(0, off);
}

async function hashHandle(fh: fs.promises.FileHandle): Promise<string> {
  const h = crypto.createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  for (let pos = 0; ;) {
    const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) return h.digest('hex');
    h.update(buf.subarray(0, bytesRead));
    pos += bytesRead;
  }
}

/** The directory's identity (marker.ts's: inode and birth time), or null when it does not exist. */
function directoryId(dir: string): string | null {
  try {
    const st = fs.lstatSync(dir, { bigint: true });
    return st.isDirectory() ? `${st.ino}:${st.birthtimeNs}` : null;
  } catch {
    return null;
  }
}

const sameStat = (f: LocalFile | undefined, st: fs.Stats) =>
  !!f && f.size === st.size && f.ino === st.ino && f.mtime_ms === st.mtimeMs && f.ctime_ms === st.ctimeMs;
const localFile = (hash: string, st: fs.Stats): LocalFile => ({
  sha256: hash,
  size: st.size,
  ino: st.ino,
  mtime_ms: st.mtimeMs,
  ctime_ms: st.ctimeMs,
});

/** At most `n` tasks at once; `drain` waits for all and rethrows the first failure. */
class Limiter {
  private running = new Set<Promise<void>>();
  private failure: unknown;
  constructor(private readonly n: number) {}
  async add(task: () => Promise<void>): Promise<void> {
    if (this.failure) throw this.failure;
    while (this.running.size >= this.n) await Promise.race(this.running);
    if (this.failure) throw this.failure;
    const p: Promise<void> = task()
      .catch((err: unknown) => void (this.failure ??= err))
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }
  async drain(): Promise<void> {
    await Promise.all(this.running);
    if (this.failure) throw this.failure;
  }
}

export interface S3WorkspaceStoreOptions {
  client: S3Client;
  bucket: string;
  prefix?: string;
  logger?: Logger;
}

export class S3WorkspaceStore implements WorkspaceStore {
  readonly kind = 's3' as const;

  private readonly bucket: WorkspaceBucket;

  constructor(private readonly opts: S3WorkspaceStoreOptions) {
    this.bucket = new WorkspaceBucket(opts.client, opts.bucket, opts.prefix ?? 'workspaces/', opts.logger);
  }

  private key(id: WorkspaceIdentity, rest: string): string {
    return this.bucket.key(id.workspaceId, rest);
  }

  private hasObject(key: string): Promise<boolean> {
    return this.bucket.hasObject(key);
  }

  private putJson(key: string, value: unknown): Promise<void> {
    return this.bucket.putJson(key, value);
  }

  /** The latest saved version of `id`, or null (none, or one of another generation: not this binding's workspace). */
  latest(id: WorkspaceIdentity): Promise<Pointer | null> {
    return this.bucket.latest(id);
  }

  manifest(id: WorkspaceIdentity, version: string): Promise<Manifest> {
    return this.bucket.manifest(id, version);
  }

  /** A file a tool attached, in the bucket by its content before the run ends: the worker reads it from there. */
  async publish(id: WorkspaceIdentity, bytes: Buffer): Promise<void> {
    await this.bucket.putBlob(id.workspaceId, bytes);
  }

  async save(dir: string, id: WorkspaceIdentity): Promise<SaveReport> {
    const state = readState(dir, id);
    // Blobs the bucket holds for sure: those of the version the local copy was last saved as or restored from.
    const known = new Set(Object.values(state?.files ?? {}).map((f) => f.sha256));
    const entries: ManifestEntry[] = [];
    const files: Record<string, LocalFile> = {};
    const links = new Map<number, { nlink: number; paths: string[] }>();
    const uploads = new Limiter(CONCURRENCY);
    const report = { entries: 0, files: 0, bytes: 0, uploadedBlobs: 0, uploadedBytes: 0, skipped: 0 };
    const upload = async (hash: string, size: number, body: Buffer | (() => NodeJS.ReadableStream)) => {
      const key = this.key(id, `blobs/${hash}`);
      if (await this.hasObject(key)) return;
      await this.opts.client.send(
        new PutObjectCommand({
          Bucket: this.opts.bucket,
          Key: key,
          Body: Buffer.isBuffer(body) ? body : (body() as never),
          ContentLength: size,
          ContentType: 'application/octet-stream',
        }),
      );
      report.uploadedBlobs += 1;
      report.uploadedBytes += size;
    };
    await walkTree(dir, { exclude: EXCLUDED, onSkip: () => (report.skipped += 1) }, async (e) => {
      if (e.kind === 'dir') {
        entries.push({ kind: 'dir', path: e.path, mode: e.stat.mode & 0o7777 });
        return;
      }
      if (e.kind === 'symlink') {
        if (e.target) entries.push({ kind: 'symlink', path: e.path, target: e.target });
        return;
      }
      const st = e.stat;
      const prev = state?.files[e.path];
      let body: Buffer | undefined;
      let hash = sameStat(prev, st) ? prev!.sha256 : undefined;
      if (!hash || (!known.has(hash) && st.size <= INLINE_BYTES)) {
        if (st.size <= INLINE_BYTES) {
          body = await readAll(e.fh, st.size);
          hash = sha256(body);
        } else hash = await hashHandle(e.fh);
      }
      const size = body?.length ?? st.size;
      entries.push({ kind: 'file', path: e.path, mode: st.mode & 0o7777, size, sha256: hash });
      files[e.path] = localFile(hash, st);
      if (st.nlink > 1) {
        const g = links.get(st.ino) ?? { nlink: st.nlink, paths: [] };
        g.paths.push(e.path);
        links.set(st.ino, g);
      }
      if (known.has(hash)) return;
      known.add(hash);
      if (body) {
        const bytes = body;
        await uploads.add(() => upload(hash, bytes.length, bytes));
      } else {
        // Too large to hold: streamed from the open handle before the walk moves on (and closes it).
        const fh = e.fh;
        await upload(hash, st.size, () => fh.createReadStream({ start: 0, end: Math.max(st.size - 1, 0), autoClose: false }));
      }
    });
    await uploads.drain();
    // A hard link with a link outside the tree is not saved (core/domain/workspace-tree.ts copyTree's rule).
    const outside = new Set([...links.values()].filter((g) => g.paths.length < g.nlink).flatMap((g) => g.paths));
    const kept = entries.filter((e) => !outside.has(e.path));
    report.skipped += entries.length - kept.length;
    for (const p of outside) delete files[p];
    for (const e of kept)
      if (e.kind === 'file') {
        report.files += 1;
        report.bytes += e.size;
      }
    report.entries = kept.length;

    const version = newVersion();
    const manifest: Manifest = {
      format: 1,
      workspace_id: id.workspaceId.toLowerCase(),
      generation: id.generation,
      version,
      parent: state?.version ?? null,
      saved_at: new Date().toISOString(),
      entries: kept,
    };
    // Blobs, then the manifest, then the pointer: whatever stops this between them leaves `latest` whole.
    await this.putJson(this.key(id, `manifests/${version}.json`), manifest);
    await this.putJson(this.key(id, 'latest'), { format: 1, workspace_id: manifest.workspace_id, generation: id.generation, version });
    const directory = directoryId(dir);
    if (directory) writeState(dir, { workspace_id: manifest.workspace_id, generation: id.generation, version, directory, files });
    this.opts.logger?.info({ workspace_id: id.workspaceId, version, ...report }, 'workspace saved to the bucket');
    return { version, ...report };
  }

  async restore(dir: string, id: WorkspaceIdentity, owner?: Owner): Promise<RestoreReport> {
    const none = { downloadedBlobs: 0, downloadedBytes: 0, reusedFiles: 0 };
    const pointer = await this.latest(id);
    if (!pointer) return { version: null, rebuilt: false, ...none };
    const state = readState(dir, id);
    const current = directoryId(dir);
    if (state && state.version === pointer.version && current !== null && state.directory === current)
      return { version: pointer.version, rebuilt: false, ...none };
    const manifest = await this.manifest(id, pointer.version);
    const report = { ...none };
    const wanted = new Map<string, Extract<ManifestEntry, { kind: 'file' }>>();
    for (const e of manifest.entries) if (e.kind === 'file') wanted.set(e.path, e);
    const writer = await TreeWriter.create(dir, { owner });
    try {
      // Parents first: a manifest lists each directory before what is in it (the walk's order).
      for (const e of manifest.entries) if (e.kind === 'dir') await writer.dir(e.path, e.mode);
      const placed = new Set<string>();
      if (current !== null) {
        // Files the local copy already has (same path, same content) are copied from it, not downloaded.
        await walkTree(dir, { exclude: EXCLUDED, onSkip: () => undefined }, async (e) => {
          if (e.kind !== 'file') return;
          const want = wanted.get(e.path);
          if (!want || want.size !== e.stat.size) return;
          const prev = state?.files[e.path];
          const hash = sameStat(prev, e.stat) ? prev!.sha256 : await hashHandle(e.fh);
          if (hash !== want.sha256) return;
          await writer.file(e.path, want.mode, e.fh, want.size);
          placed.add(e.path);
          report.reusedFiles += 1;
        });
      }
      // Each missing content once, however many paths hold it.
      const missing = new Map<string, Extract<ManifestEntry, { kind: 'file' }>[]>();
      for (const e of wanted.values()) if (!placed.has(e.path)) missing.set(e.sha256, [...(missing.get(e.sha256) ?? []), e]);
      // Downloads run CONCURRENCY at a time; the writer takes one file at a time (it keeps a stack of open directories).
      let writing = Promise.resolve();
      const downloads = new Limiter(CONCURRENCY);
      for (const [hash, paths] of missing) {
        await downloads.add(async () => {
          const r = await this.opts.client.send(new GetObjectCommand({ Bucket: this.opts.bucket, Key: this.key(id, `blobs/${hash}`) }));
          const bytes = await r.Body!.transformToByteArray();
          if (bytes.length !== paths[0]!.size || sha256(bytes) !== hash)
            throw new Error(`workspace ${id.workspaceId}: blob ${hash} of ${paths[0]!.path} does not hold what the manifest says`);
          report.downloadedBlobs += 1;
          report.downloadedBytes += bytes.length;
          const next = writing.then(async () => {
            for (const e of paths) await writer.file(e.path, e.mode, once(bytes), e.size);
          });
          writing = next.catch(() => undefined);
          await next;
        });
      }
      await downloads.drain();
      await writing;
      for (const e of manifest.entries) if (e.kind === 'symlink') await writer.symlink(e.path, e.target);
      // The local copy steps aside (renamed away first, then removed) and the restored one takes its name.
      if (current !== null) await removeTree(dir);
      await writer.commit();
    } catch (err) {
      await writer.abort();
      throw err;
    }
    writeMarker(dir, id);
    writeState(dir, {
      workspace_id: manifest.workspace_id,
      generation: id.generation,
      version: manifest.version,
      directory: directoryId(dir)!,
      files: await statFiles(dir, wanted),
    });
    this.opts.logger?.info({ workspace_id: id.workspaceId, version: manifest.version, ...report }, 'workspace restored from the bucket');
    return { version: manifest.version, rebuilt: true, ...report };
  }
}

/** The restored files' stats under their manifest hashes (so the next save rehashes only what a command changes). */
async function statFiles(dir: string, wanted: Map<string, { sha256: string; size: number }>): Promise<Record<string, LocalFile>> {
  const out: Record<string, LocalFile> = {};
  await walkTree(dir, { exclude: EXCLUDED, onSkip: () => undefined }, async (e) => {
    const want = e.kind === 'file' ? wanted.get(e.path) : undefined;
    if (want && e.kind === 'file' && e.stat.size === want.size) out[e.path] = localFile(want.sha256, e.stat);
  });
  return out;
}

function statePath(dir: string): string {
  const abs = path.resolve(dir);
  return path.join(path.dirname(abs), STORE_STATE_DIR, `${path.basename(abs)}.json`);
}

/** The local record of `dir` when it is of this workspace and generation, else null. */
function readState(dir: string, id: WorkspaceIdentity): LocalState | null {
  try {
    const s = LocalState.parse(JSON.parse(fs.readFileSync(statePath(dir), 'utf8')));
    return s.workspace_id === id.workspaceId.toLowerCase() && s.generation === id.generation ? s : null;
  } catch {
    return null;
  }
}

function writeState(dir: string, s: LocalState): void {
  const p = statePath(dir);
  fs.mkdirSync(path.dirname(p), { recursive: true, mode: 0o700 });
  const tmp = `${p}.tmp-${crypto.randomUUID()}`;
  fs.writeFileSync(tmp, JSON.stringify(s), { mode: 0o600, flag: 'wx' });
  fs.renameSync(tmp, p);
}

/** The deployment's store (core/platform/config.ts WORKSPACE_STORE). */
export function createWorkspaceStore(config: Config, logger?: Logger): WorkspaceStore {
  const bucket = workspaceBucket(config, logger);
  if (!bucket) return posixWorkspaceStore;
  return new S3WorkspaceStore({ client: bucket.client, bucket: bucket.bucket, prefix: bucket.prefix, logger });
}
