/**
 * Whole trees a tenant can change at the same moment, walked, copied and removed by a privileged process without
 * following anything the tenant planted (issue 45; the rule: docs/security.md "Root never walks a tenant tree").
 * The technique is core/domain/workspace-fs.ts's: every entry is reached as `/proc/self/fd/<dirfd>/<name>` (openat)
 * from a directory descriptor opened O_DIRECTORY|O_NOFOLLOW, read through a descriptor opened O_NOFOLLOW|O_NONBLOCK
 * and checked with fstat after the open. A symlink swapped in at any level fails the open (ELOOP/ENOTDIR) instead of
 * redirecting it, and what is read is what was checked.
 *
 * - walkTree: each entry once, parents first: directories, regular files (with an open handle), symlinks (their
 *   text, never followed). FIFOs, sockets, devices, files the tree's owner could not read itself, other file
 *   systems, entries swapped while the walk reached them and nesting deeper than MAX_DEPTH are reported as skipped.
 * - TreeWriter: builds a tree under a temporary name beside its destination (`.partial-<ms>-<uuid>`). Each entry is
 *   created O_EXCL relative to its parent's descriptor and given to its owner through the descriptor. commit renames
 *   the tree into place; abort removes it.
 * - copyTree: walkTree into a TreeWriter within a byte budget. A hard link stays a link when all of the file's links
 *   are in the tree, and is dropped (reported) when one is outside it.
 * - removeTree: first renames the tree to `.trash-<ms>-<uuid>`, so its path is free at once, then unlinks entry by
 *   entry relative to directory descriptors. unlink never follows, and a directory swapped for a symlink is unlinked
 *   as a link. Whatever a process still running in it keeps re-creating is left to sweepLeftovers.
 * - sweepLeftovers: removes `.partial-*` and `.trash-*` entries older than an hour (a crashed copy or removal).
 *
 * Not Node's fs.cp or fs.rm: both check an entry and then act on its path again, which a symlink swapped in between
 * redirects (issue 45 measured 24–44 root-only files copied by fs.cp under a racer).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { at, DIR_FLAGS, READ_FLAGS, readableBy, treeReader, type Owner } from './workspace-fs.js';

type Handle = fs.promises.FileHandle;
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fs.constants;

/** Deepest directory a walk enters (shellctl's quota walk stops at the same depth, sandbox/shellctl/limits.go). */
export const MAX_DEPTH = 256;
/** What an entry costs a copy's budget at least, and the unit its bytes are counted in (one file-system block). */
export const BLOCK = 4096;
/** How old an interrupted copy or removal must be before the sweeper removes it. */
export const LEFTOVER_MAX_AGE_MS = 3_600_000;

export const SKIP_REASONS = [
  'fifo',
  'socket',
  'device',
  'hard_link',
  'not_readable',
  'other_filesystem',
  'too_deep',
  'changed_during_copy',
] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];
export interface SkippedEntry {
  path: string;
  reason: SkipReason;
}

/** One entry as walked; `parent` is the inode of the directory it was found in (a name is `parent` + its last component). */
export type TreeEntry =
  | { kind: 'dir'; path: string; parent: number; stat: fs.Stats }
  | { kind: 'file'; path: string; parent: number; stat: fs.Stats; fh: Handle }
  | { kind: 'symlink'; path: string; parent: number; stat: fs.Stats; target: string };

export interface WalkOptions {
  /** Relative paths left out (with everything below them). */
  exclude?: (rel: string) => boolean;
  /** Whose reads are checked: default the root's owner unless that is root or this process (treeReader); null: none. */
  reader?: Owner | null;
  maxDepth?: number;
  onSkip: (s: SkippedEntry) => void;
}

interface WalkContext {
  exclude?: (rel: string) => boolean;
  reader: Owner | undefined;
  dev: number;
  maxDepth: number;
  onSkip: (s: SkippedEntry) => void;
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException).code;

function specialKind(st: fs.Stats): SkipReason {
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'device';
  return 'changed_during_copy';
}

/**
 * Visits every entry of the tree at `dir`, parents first (`visit` returning false for a directory skips what is in
 * it). File handles are open only during their visit. The root itself is opened without following a link at its
 * own name; the path to it is the deployment's.
 */
export async function walkTree(dir: string, opts: WalkOptions, visit: (e: TreeEntry) => Promise<void | boolean>): Promise<void> {
  const root = await fs.promises.open(dir, DIR_FLAGS);
  try {
    const st = await root.stat();
    const ctx: WalkContext = {
      exclude: opts.exclude,
      reader: opts.reader === undefined ? treeReader(st) : (opts.reader ?? undefined),
      dev: st.dev,
      maxDepth: opts.maxDepth ?? MAX_DEPTH,
      onSkip: opts.onSkip,
    };
    await walkDir(root, st.ino, '', 1, ctx, visit);
  } finally {
    await root.close();
  }
}

async function walkDir(
  dir: Handle,
  ino: number,
  prefix: string,
  depth: number,
  ctx: WalkContext,
  visit: (e: TreeEntry) => Promise<void | boolean>,
) {
  // The pinned directory, listed in batches (a directory of a million names is never read at once).
  const listing = await fs.promises.opendir(`/proc/self/fd/${dir.fd}`, { bufferSize: 256 }).catch((e: unknown) => {
    // Not this process's to read (a non-root api, a directory its owner made unreadable): left out, said so.
    if (errno(e) === 'EACCES') return null;
    throw e;
  });
  if (!listing) return ctx.onSkip({ path: prefix, reason: 'not_readable' });
  for await (const ent of listing) {
    const rel = prefix ? `${prefix}/${ent.name}` : ent.name;
    if (ctx.exclude?.(rel)) continue;
    await walkEntry(dir, ino, ent.name, rel, depth, ctx, visit);
  }
}

/** Why an entry could not be opened: EACCES is a permission (not_readable), anything else a change under the walk. */
const openFailure = (e: unknown): SkipReason => (errno(e) === 'EACCES' ? 'not_readable' : 'changed_during_copy');

async function walkEntry(
  dir: Handle,
  parent: number,
  name: string,
  rel: string,
  depth: number,
  ctx: WalkContext,
  visit: (e: TreeEntry) => Promise<void | boolean>,
): Promise<void> {
  const p = at(dir, name);
  const skip = (reason: SkipReason) => ctx.onSkip({ path: rel, reason });
  const st = await fs.promises.lstat(p).catch(() => null);
  if (!st) return; // gone meanwhile
  if (st.isSymbolicLink()) {
    const target = await fs.promises.readlink(p).catch(() => null);
    if (target === null) return skip('changed_during_copy');
    await visit({ kind: 'symlink', path: rel, parent, stat: st, target });
    return;
  }
  if (st.isDirectory()) {
    if (depth > ctx.maxDepth) return skip('too_deep');
    let failed: SkipReason = 'changed_during_copy';
    const sub = await fs.promises.open(p, DIR_FLAGS).catch((e: unknown) => void (failed = openFailure(e)));
    if (!sub) return skip(failed); // swapped for a link or a file since the lstat: not followed
    try {
      const s = await sub.stat();
      if (s.dev !== ctx.dev) return skip('other_filesystem');
      if (!readableBy(s, ctx.reader)) return skip('not_readable');
      if ((await visit({ kind: 'dir', path: rel, parent, stat: s })) === false) return;
      await walkDir(sub, s.ino, rel, depth + 1, ctx, visit);
    } finally {
      await sub.close();
    }
    return;
  }
  if (!st.isFile()) return skip(specialKind(st));
  let failed: SkipReason = 'changed_during_copy';
  const fh = await fs.promises.open(p, READ_FLAGS).catch((e: unknown) => void (failed = openFailure(e)));
  if (!fh) return skip(failed);
  try {
    // What was opened, not what the lstat saw: a FIFO or another file swapped in meanwhile is judged here.
    const s = await fh.stat();
    if (!s.isFile()) return skip(specialKind(s));
    if (s.dev !== ctx.dev) return skip('other_filesystem');
    if (!readableBy(s, ctx.reader)) return skip('not_readable');
    await visit({ kind: 'file', path: rel, parent, stat: s, fh });
  } finally {
    await fh.close();
  }
}

/** A name for an interrupted copy (`partial`) or a tree being removed (`trash`): its time lets the sweeper judge its age. */
function leftoverName(kind: 'partial' | 'trash'): string {
  return `.${kind}-${Date.now()}-${crypto.randomUUID()}`;
}
const LEFTOVER = /^\.(partial|trash)-(\d{13})-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The deployment's directory a tree lives in (WORKSPACES_DIR): followed if it is a link, it is not the tenant's. */
async function openParent(dir: string): Promise<Handle> {
  return fs.promises.open(dir, O_RDONLY | O_DIRECTORY);
}

/** Splits a relative path into its parent's and its own name. */
function split(rel: string): [string, string] {
  const i = rel.lastIndexOf('/');
  return i < 0 ? ['', rel] : [rel.slice(0, i), rel.slice(i + 1)];
}

interface Open {
  rel: string;
  fh: Handle;
  /** Set once the directory's entries are written (a read-only mode would refuse them to a non-root writer). */
  mode: number | null;
}

/**
 * A tree built under a temporary name next to `dest` and renamed into place by commit (never a half-written tree at
 * `dest`). Entries are added parents first (the order walkTree and a tar stream give); every one is created
 * O_EXCL|O_NOFOLLOW relative to its parent's descriptor and, when this process is root, given to `owner` through it.
 */
export class TreeWriter {
  private readonly stack: Open[];
  private done = false;

  private constructor(
    private readonly parent: Handle,
    /** The temporary name in the destination's directory (`.partial-<ms>-<uuid>`). */
    readonly tempName: string,
    private readonly rootFh: Handle,
    private readonly finalName: string,
    private readonly owner: Owner | undefined,
  ) {
    this.stack = [{ rel: '', fh: rootFh, mode: null }];
  }

  /** Starts a tree for `dest` (which must not exist when commit runs); its directory is created if missing. */
  static async create(dest: string, opts: { owner?: Owner } = {}): Promise<TreeWriter> {
    const abs = path.resolve(dest);
    await fs.promises.mkdir(path.dirname(abs), { recursive: true });
    const parent = await openParent(path.dirname(abs));
    try {
      const temp = leftoverName('partial');
      await fs.promises.mkdir(at(parent, temp), { mode: 0o700 });
      const root = await fs.promises.open(at(parent, temp), DIR_FLAGS);
      const owner = process.geteuid?.() === 0 ? opts.owner : undefined;
      return new TreeWriter(parent, temp, root, path.basename(abs), owner);
    } catch (err) {
      await parent.close();
      throw err;
    }
  }

  /** The new tree's root (e.g. to write a marker into it before commit). */
  get root(): Handle {
    return this.rootFh;
  }

  private async give(fh: Handle): Promise<void> {
    if (this.owner) await fh.chown(this.owner.uid, this.owner.gid);
  }

  private async pop(): Promise<void> {
    const top = this.stack.pop()!;
    if (top.mode !== null) await top.fh.chmod(top.mode);
    await top.fh.close();
  }

  /** The descriptor of directory `rel`: from the stack of open parents, else opened from the root, never following. */
  private async dirOf(rel: string): Promise<Handle> {
    while (this.stack.length > 1) {
      const top = this.stack.at(-1)!.rel;
      if (top === rel || rel.startsWith(`${top}/`)) break;
      await this.pop();
    }
    let top = this.stack.at(-1)!;
    while (top.rel !== rel) {
      const rest = top.rel ? rel.slice(top.rel.length + 1) : rel;
      const name = rest.split('/')[0]!;
      const fh = await fs.promises.open(at(top.fh, name), DIR_FLAGS);
      top = { rel: top.rel ? `${top.rel}/${name}` : name, fh, mode: null };
      this.stack.push(top);
    }
    return top.fh;
  }

  /** A directory (its mode is applied once the entries below it are written). */
  async dir(rel: string, mode: number): Promise<void> {
    const [parentRel, name] = split(rel);
    const parent = await this.dirOf(parentRel);
    await fs.promises.mkdir(at(parent, name), { mode: 0o700 });
    const fh = await fs.promises.open(at(parent, name), DIR_FLAGS);
    this.stack.push({ rel, fh, mode: mode & 0o1777 });
    await this.give(fh);
  }

  /**
   * A regular file with what `source` holds: at most `maxBytes` of a handle (read from offset 0), or the chunks of a
   * stream (more than `maxBytes` throws TreeBudgetExceeded). Returns the bytes written.
   */
  async file(rel: string, mode: number, source: Handle | AsyncIterable<Uint8Array>, maxBytes: number): Promise<number> {
    const [parentRel, name] = split(rel);
    const parent = await this.dirOf(parentRel);
    const out = await fs.promises.open(at(parent, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    let written = 0;
    try {
      if ('fd' in source) {
        const buf = Buffer.allocUnsafe(Math.min(1 << 20, Math.max(maxBytes, 1)));
        while (written < maxBytes) {
          const { bytesRead } = await source.read(buf, 0, Math.min(buf.length, maxBytes - written), written);
          if (bytesRead === 0) break;
          await out.write(buf, 0, bytesRead);
          written += bytesRead;
        }
      } else {
        for await (const chunk of source) {
          if (written + chunk.byteLength > maxBytes) throw new TreeBudgetExceeded(maxBytes);
          await out.write(chunk);
          written += chunk.byteLength;
        }
      }
      await this.give(out);
      await out.chmod(mode & 0o777);
    } finally {
      await out.close();
    }
    return written;
  }

  /** A symbolic link (its text as it was; nothing resolves it here). */
  async symlink(rel: string, target: string): Promise<void> {
    const [parentRel, name] = split(rel);
    const parent = await this.dirOf(parentRel);
    await fs.promises.symlink(target, at(parent, name));
    if (this.owner) await fs.promises.lchown(at(parent, name), this.owner.uid, this.owner.gid);
  }

  /** A hard link at `rel` to the file already written at `existing`. */
  async link(rel: string, existing: string): Promise<void> {
    const [fromRel, fromName] = split(existing);
    const from = await this.openDetached(fromRel);
    try {
      const [parentRel, name] = split(rel);
      const parent = await this.dirOf(parentRel);
      await fs.promises.link(at(from, fromName), at(parent, name));
    } finally {
      if (from !== this.rootFh) await from.close();
    }
  }

  /** Removes a file written earlier (a hard link found to reach outside the tree). */
  async remove(rel: string): Promise<void> {
    const [parentRel, name] = split(rel);
    const dir = await this.openDetached(parentRel);
    try {
      await fs.promises.unlink(at(dir, name)).catch((e: unknown) => {
        if (errno(e) !== 'ENOENT') throw e;
      });
    } finally {
      if (dir !== this.rootFh) await dir.close();
    }
  }

  /** A directory of the new tree opened from its root without touching the stack (the caller closes it). */
  private async openDetached(rel: string): Promise<Handle> {
    let dir = this.rootFh;
    for (const name of rel ? rel.split('/') : []) {
      const next = await fs.promises.open(at(dir, name), DIR_FLAGS);
      if (dir !== this.rootFh) await dir.close();
      dir = next;
    }
    return dir;
  }

  /** Renames the tree into place with the root's `mode`; refuses (EEXIST) when something is already there. */
  async commit(mode = 0o755): Promise<void> {
    while (this.stack.length > 1) await this.pop();
    await this.give(this.rootFh);
    await this.rootFh.chmod(mode & 0o1777);
    const there = await fs.promises.lstat(at(this.parent, this.finalName)).catch((e: unknown) => {
      if (errno(e) === 'ENOENT') return null;
      throw e;
    });
    if (there) throw Object.assign(new Error(`${this.finalName} already exists`), { code: 'EEXIST' });
    await fs.promises.rename(at(this.parent, this.tempName), at(this.parent, this.finalName));
    this.done = true;
    await this.close();
  }

  /** Removes what was written (nothing is left under the temporary name); a no-op after commit. */
  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    try {
      while (this.stack.length > 1) await this.stack.pop()!.fh.close();
      await removeAt(this.parent, this.tempName);
    } finally {
      await this.close();
    }
  }

  private async close(): Promise<void> {
    while (this.stack.length > 1) await this.stack.pop()!.fh.close();
    await this.rootFh.close().catch(() => undefined);
    await this.parent.close().catch(() => undefined);
  }
}

/** A copy that would take more than its budget. */
export class TreeBudgetExceeded extends Error {
  constructor(readonly budget: number) {
    super(`the tree holds more than ${budget} bytes`);
  }
}

export interface CopyReport {
  /** What the copy counts against its budget: each entry's bytes in whole blocks, at least one block an entry. */
  bytes: number;
  /** Directories, files and links copied. */
  entries: number;
  /** The first `maxSkipped` entries left out, with why. */
  skipped: SkippedEntry[];
  /** How many were left out in all. */
  skippedTotal: number;
}

const cost = (st: fs.Stats) => Math.max(BLOCK, Math.ceil(st.size / BLOCK) * BLOCK);

/**
 * Copies the tree at `from` into `writer` (nothing committed: the caller commits or aborts), at most `budgetBytes`
 * (TreeBudgetExceeded beyond). Entries that change under the copy are skipped, never followed.
 */
export async function copyTree(
  from: string,
  writer: TreeWriter,
  opts: { budgetBytes: number; exclude?: (rel: string) => boolean; reader?: Owner | null; maxSkipped?: number },
): Promise<CopyReport> {
  const report: CopyReport = { bytes: 0, entries: 0, skipped: [], skippedTotal: 0 };
  const maxSkipped = opts.maxSkipped ?? 100;
  const onSkip = (s: SkippedEntry) => {
    report.skippedTotal += 1;
    if (report.skipped.length < maxSkipped) report.skipped.push(s);
  };
  const take = (n: number) => {
    report.bytes += n;
    if (report.bytes > opts.budgetBytes) throw new TreeBudgetExceeded(opts.budgetBytes);
  };
  // Files with more than one link: kept as links between their copies, dropped when a link is outside the tree.
  // Counted by distinct (directory inode, name): a directory walked twice (renamed under the walk) counts its links once.
  const links = new Map<number, { nlink: number; paths: string[]; names: Set<string> }>();
  // An entry whose name is already taken in the copy (a name listed twice while renamed under the walk) is skipped.
  const taken = (err: unknown, rel: string) => {
    if (errno(err) !== 'EEXIST') throw err;
    onSkip({ path: rel, reason: 'changed_during_copy' });
    return false;
  };
  await walkTree(from, { exclude: opts.exclude, reader: opts.reader, onSkip }, async (e) => {
    if (e.kind === 'dir') {
      take(BLOCK);
      const ok = await writer.dir(e.path, e.stat.mode).then(
        () => true,
        (err: unknown) => taken(err, e.path),
      );
      if (ok) report.entries += 1;
      return ok;
    }
    if (e.kind === 'symlink') {
      take(BLOCK);
      await writer.symlink(e.path, e.target).then(
        () => (report.entries += 1),
        (err: unknown) => taken(err, e.path),
      );
      return;
    }
    const group = e.stat.nlink > 1 ? links.get(e.stat.ino) : undefined;
    if (group) {
      take(BLOCK);
      group.nlink = Math.max(group.nlink, e.stat.nlink);
      await writer.link(e.path, group.paths[0]!).then(
        () => {
          group.paths.push(e.path);
          group.names.add(`${e.parent}/${e.path.slice(e.path.lastIndexOf('/') + 1)}`);
          report.entries += 1;
        },
        (err: unknown) => taken(err, e.path),
      );
      return;
    }
    take(cost(e.stat));
    const ok = await writer.file(e.path, e.stat.mode, e.fh, e.stat.size).then(
      () => true,
      (err: unknown) => taken(err, e.path),
    );
    if (!ok) return;
    report.entries += 1;
    if (e.stat.nlink > 1)
      links.set(e.stat.ino, {
        nlink: e.stat.nlink,
        paths: [e.path],
        names: new Set([`${e.parent}/${e.path.slice(e.path.lastIndexOf('/') + 1)}`]),
      });
  });
  for (const group of links.values()) {
    if (group.names.size >= group.nlink) continue;
    for (const p of group.paths) {
      await writer.remove(p);
      report.entries -= 1;
      onSkip({ path: p, reason: 'hard_link' });
    }
  }
  return report;
}

/**
 * Removes the tree at `dir` (absolute) without following anything in it: renamed to `.trash-<ms>-<uuid>` in its
 * directory first, then emptied through directory descriptors. True when it is gone; false when entries kept
 * appearing (a process still writing in it): the trash is left for sweepLeftovers. A missing `dir` is gone.
 */
export async function removeTree(dir: string): Promise<boolean> {
  const abs = path.resolve(dir);
  const parent = await openParent(path.dirname(abs)).catch((e: unknown) => {
    if (errno(e) === 'ENOENT') return null;
    throw e;
  });
  if (!parent) return true;
  try {
    return await removeAt(parent, path.basename(abs));
  } finally {
    await parent.close();
  }
}

/**
 * Passes over one directory beyond the two a removal needs (one to unlink, one to find it refilled) that all of one
 * removal may spend before the tree counts as still being written to (a process running in it re-creates entries).
 */
const EXTRA_PASSES = 64;

async function removeAt(parent: Handle, name: string): Promise<boolean> {
  let trash = name;
  if (!(LEFTOVER.test(name) && name.startsWith('.trash-'))) {
    trash = leftoverName('trash');
    try {
      await fs.promises.rename(at(parent, name), at(parent, trash));
    } catch (e) {
      if (errno(e) === 'ENOENT') return true;
      throw e;
    }
  }
  // Directories nested deeper than MAX_DEPTH are moved up beside the trash and removed in turn (bounded recursion).
  const ctx: RemoveContext = {
    extra: EXTRA_PASSES,
    hoist: async (dir, child) => {
      const t = leftoverName('trash');
      await fs.promises.rename(at(dir, child), at(parent, t));
      queue.push(t);
    },
  };
  const queue = [trash];
  let gone = true;
  while (queue.length) {
    const next = queue.shift()!;
    try {
      await fs.promises.unlink(at(parent, next)); // a file or a link at the tree's path
      continue;
    } catch (e) {
      if (errno(e) === 'ENOENT') continue;
      if (errno(e) !== 'EISDIR' && errno(e) !== 'EPERM') throw e;
    }
    if (!(await removeDir(parent, next, 1, ctx))) gone = false;
  }
  return gone;
}

interface RemoveContext {
  /** Passes left beyond the first two of each directory. */
  extra: number;
  hoist: (dir: Handle, name: string) => Promise<void>;
}

/** Removes directory `name` of the pinned `parent` with everything in it; false when the pass budget ran out. */
async function removeDir(parent: Handle, name: string, depth: number, ctx: RemoveContext): Promise<boolean> {
  const p = at(parent, name);
  for (let attempt = 0; ; attempt++) {
    if (attempt >= 2 && --ctx.extra < 0) return false;
    const dir = await fs.promises.open(p, DIR_FLAGS).catch((e: unknown) => {
      if (['ENOENT', 'ENOTDIR', 'ELOOP'].includes(errno(e) ?? '')) return null;
      throw e;
    });
    if (!dir) {
      // Gone, or swapped for a link or a file: that is unlinked (never followed).
      const left = await fs.promises.unlink(p).then(
        () => false,
        (e: unknown) => {
          if (errno(e) === 'ENOENT') return false;
          if (errno(e) === 'EISDIR') return true; // a directory again: once more
          throw e;
        },
      );
      if (!left) return true;
      continue;
    }
    try {
      if (!(await emptyDir(dir, depth, ctx))) return false;
    } finally {
      await dir.close();
    }
    try {
      await fs.promises.rmdir(p);
      return true;
    } catch (e) {
      if (errno(e) === 'ENOENT') return true;
      if (!['ENOTEMPTY', 'EEXIST', 'ENOTDIR'].includes(errno(e) ?? '')) throw e;
    }
  }
}

/** One pass unlinking what the pinned directory holds (subdirectories removed whole); false: the budget ran out. */
async function emptyDir(dir: Handle, depth: number, ctx: RemoveContext): Promise<boolean> {
  // Its owner may have made it read-only: the tree is ours to remove (fchmod through the descriptor).
  const st = await dir.stat();
  if ((st.mode & 0o700) !== 0o700) await dir.chmod((st.mode & 0o7777) | 0o700).catch(() => undefined);
  for await (const ent of await fs.promises.opendir(`/proc/self/fd/${dir.fd}`, { bufferSize: 256 })) {
    try {
      await fs.promises.unlink(at(dir, ent.name));
      continue;
    } catch (e) {
      if (errno(e) === 'ENOENT') continue;
      if (errno(e) !== 'EISDIR' && errno(e) !== 'EPERM') throw e;
    }
    if (depth >= MAX_DEPTH) {
      await ctx.hoist(dir, ent.name).catch((e: unknown) => {
        if (errno(e) !== 'ENOENT') throw e;
      });
      continue;
    }
    if (!(await removeDir(dir, ent.name, depth + 1, ctx))) return false;
  }
  return true;
}

/**
 * Removes what interrupted copies (`.partial-*`) and removals (`.trash-*`) left in `dir` (WORKSPACES_DIR) when older
 * than `olderThanMs` (by the time in their name). Returns the names removed. Run by the worker's sweeper
 * (worker/sweeper.ts).
 */
export async function sweepLeftovers(dir: string, opts: { olderThanMs?: number; now?: number } = {}): Promise<string[]> {
  const cutoff = (opts.now ?? Date.now()) - (opts.olderThanMs ?? LEFTOVER_MAX_AGE_MS);
  const parent = await openParent(dir).catch((e: unknown) => {
    if (errno(e) === 'ENOENT') return null;
    throw e;
  });
  if (!parent) return [];
  const removed: string[] = [];
  try {
    const names: string[] = [];
    for await (const ent of await fs.promises.opendir(`/proc/self/fd/${parent.fd}`, { bufferSize: 256 })) {
      const m = LEFTOVER.exec(ent.name);
      if (m && Number(m[2]) < cutoff) names.push(ent.name);
    }
    for (const name of names) if (await removeAt(parent, name)) removed.push(name);
  } finally {
    await parent.close();
  }
  return removed;
}
