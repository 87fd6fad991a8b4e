/**
 * Every file the api (or the backend) places into an agent workspace or reads back out of it goes through here
 * (issue 27 item 5). The workspace is written by the agent, so no path inside it is trusted: an `uploads` the
 * agent replaced with a symlink must not send a root-owned write into another directory (another tenant's
 * workspace), and an `outputs/x` must not read anything outside.
 *
 * Node has no openat/openat2, but `/proc/self/fd/<dirfd>/<name>` resolves `<name>` inside the directory the
 * descriptor pins, whatever has since been renamed or replaced on the path to it: the openat equivalent. So a
 * path is walked one component at a time from the workspace root (opened with O_DIRECTORY|O_NOFOLLOW, its real
 * path checked), each directory opened with O_DIRECTORY|O_NOFOLLOW relative to its parent's descriptor (a
 * symlink at any level fails with ELOOP, a file with ENOTDIR), created with mkdir at the same fd-relative path
 * when missing. Files are created with O_EXCL|O_NOFOLLOW under a temp name and renamed over the final name
 * inside the same pinned directory (rename replaces a planted symlink, never writes through it); reads open with
 * O_NOFOLLOW|O_NONBLOCK (a FIFO cannot block) and check the descriptor: a regular file, one link, under the cap.
 *
 * Whole trees (fork's copy, removal) are walked the same way in the sibling core/domain/workspace-tree.ts; the rule
 * both serve: docs/security.md "Root never walks a tenant tree".
 *
 * Refusals are WorkspaceRefused with a reason fit for the model (a placed file's `error`, a not-attached note).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY, O_NOCTTY } = fs.constants;
/** A directory, never through a symlink at its own name. */
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** A file to read: never through a symlink, never blocking (a FIFO), never becoming a controlling terminal. */
export const READ_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

/** A path inside the workspace refused (symlink, not a directory, not a regular file, too large...). */
export class WorkspaceRefused extends Error {}

/** `/proc/self/fd/<fd>/<name>`: `<name>` resolved inside the directory the descriptor pins (openat's equivalent). */
export const at = (dir: fs.promises.FileHandle | number, name: string) => `/proc/self/fd/${typeof dir === 'number' ? dir : dir.fd}/${name}`;

/** Who an identity is, for the "could its owner read it" check. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * Whether `owner` could read what `st` describes without privileges: its own (it may chmod it), else by the group or
 * other bits. Root, and this process's own uid, read anything of theirs anyway: no check then (`owner` undefined).
 */
export function readableBy(st: fs.Stats, owner: Owner | undefined): boolean {
  if (!owner) return true;
  if (st.uid === owner.uid) return true;
  return st.gid === owner.gid ? (st.mode & 0o040) !== 0 : (st.mode & 0o004) !== 0;
}

/** The identity a tree's reads are checked against: its root's owner, unless that is this process (or root) itself. */
export function treeReader(root: fs.Stats): Owner | undefined {
  const me = process.geteuid?.() ?? -1;
  return root.uid === 0 || root.uid === me ? undefined : { uid: root.uid, gid: root.gid };
}

/** A single path component: no separators, not `.`/`..`, no NUL, bounded. */
export function isPlainComponent(name: string): boolean {
  return name.length > 0 && name.length <= 255 && name !== '.' && name !== '..' && !/[/\u0000]/.test(name);
}

function describeDir(parts: string[]): string {
  return parts.length ? `${parts.join('/')}/ in the workspace` : 'the workspace';
}

/** The owner new entries get: the workspace root's (when we run as root and it is someone else's). */
interface Root {
  fh: fs.promises.FileHandle;
  uid: number;
  gid: number;
  /** Whose reads are checked (treeReader of the root as opened). */
  reader: Owner | undefined;
}

/**
 * Opens the workspace directory itself: never through a symlink at its own name, and its descriptor's real path
 * must be `<realpath of the workspaces dir>/<id>` (the parents are the deployment's, the name is checked here).
 * With `create`, a missing workspace directory is made (its parent, the deployment's workspaces dir, too).
 */
async function openRoot(workspaceDir: string, create: boolean): Promise<Root> {
  const abs = path.resolve(workspaceDir);
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(abs, DIR_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && create) {
      await fs.promises.mkdir(path.dirname(abs), { recursive: true });
      await fs.promises.mkdir(abs, { mode: 0o755 }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
      });
      return openRoot(abs, false);
    }
    if (code === 'ENOENT') throw new WorkspaceRefused('the workspace does not exist');
    throw refusal(await whyNotDir(code, abs), []);
  }
  try {
    const want = path.join(await fs.promises.realpath(path.dirname(abs)), path.basename(abs));
    const real = await fs.promises.readlink(`/proc/self/fd/${fh.fd}`);
    if (real !== want) throw new WorkspaceRefused('the workspace directory is not where it should be');
    const st = await fh.stat();
    return { fh, uid: st.uid, gid: st.gid, reader: treeReader(st) };
  } catch (err) {
    await fh.close();
    throw err;
  }
}

function refusal(code: string | undefined, parts: string[], what: 'dir' | 'file' = 'dir'): WorkspaceRefused {
  const where = what === 'dir' ? describeDir(parts) : `${parts.join('/')} in the workspace`;
  if (code === 'ELOOP' || code === 'SYMLINK') return new WorkspaceRefused(`${where} is a symbolic link`);
  if (code === 'ENOTDIR') return new WorkspaceRefused(`${where} is not a directory`);
  if (code === 'ENOENT') return new WorkspaceRefused(`${where} does not exist`);
  return new WorkspaceRefused(`${where} cannot be opened (${code ?? 'error'})`);
}

/**
 * O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR, like on a file: an lstat of the same (fd-relative) path
 * tells the two apart for the message. Only the wording depends on it; the open already refused.
 */
async function whyNotDir(code: string | undefined, p: string): Promise<string | undefined> {
  if (code !== 'ENOTDIR') return code;
  const st = await fs.promises.lstat(p).catch(() => null);
  return st?.isSymbolicLink() ? 'SYMLINK' : code;
}

/** New entries belong to the workspace's owner (the sandbox uid), not to the api's root. */
async function adopt(root: Root, fh: fs.promises.FileHandle): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const st = await fh.stat();
  if (st.uid !== root.uid || st.gid !== root.gid) await fh.chown(root.uid, root.gid);
}

/**
 * Walks `parts` from the root, one O_NOFOLLOW directory open at a time, each relative to its parent's descriptor.
 * Returns the last directory's handle (the caller closes it); the intermediate ones are closed on the way.
 */
async function walk(root: Root, parts: string[], create: boolean): Promise<fs.promises.FileHandle> {
  let dir = root.fh;
  try {
    for (const [i, part] of parts.entries()) {
      if (!isPlainComponent(part)) throw new WorkspaceRefused(`not a plain path component: ${JSON.stringify(part)}`);
      const p = at(dir, part);
      let next: fs.promises.FileHandle;
      try {
        next = await fs.promises.open(p, DIR_FLAGS);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' || !create) throw refusal(await whyNotDir(code, p), parts.slice(0, i + 1));
        // mkdir never follows a symlink at its last component (EEXIST): the open below then refuses it.
        await fs.promises.mkdir(p, { mode: 0o755 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw refusal(e.code, parts.slice(0, i + 1));
        });
        try {
          next = await fs.promises.open(p, DIR_FLAGS);
        } catch (e) {
          throw refusal(await whyNotDir((e as NodeJS.ErrnoException).code, p), parts.slice(0, i + 1));
        }
        await adopt(root, next);
      }
      if (dir !== root.fh) await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    if (dir !== root.fh) await dir.close();
    throw err;
  }
}

/** Runs `fn` with the directory `parts` of the workspace pinned by a descriptor (opened without following links). */
async function withDir<T>(
  workspaceDir: string,
  parts: string[],
  create: boolean,
  owner: { uid: number; gid: number } | undefined,
  fn: (dir: fs.promises.FileHandle, root: Root) => Promise<T>,
): Promise<T> {
  const root = await openRoot(workspaceDir, create);
  if (owner) Object.assign(root, owner);
  try {
    const dir = await walk(root, parts, create);
    try {
      return await fn(dir, root);
    } finally {
      if (dir !== root.fh) await dir.close();
    }
  } finally {
    await root.fh.close();
  }
}

/**
 * Writes `bytes` to `<dirs...>/<name>` inside the workspace (directories created as needed) and returns the path
 * relative to the workspace. Idempotent: a retry writes the same path again (a new temp file renamed over it).
 * Refuses (WorkspaceRefused) when any directory on the way is a symlink or not a directory.
 */
export async function placeWorkspaceFile(
  workspaceDir: string,
  dirs: string[],
  name: string,
  bytes: Uint8Array,
  /** Who new directories and the file belong to (the workspace's sandbox uid); default: the workspace root's owner. */
  opts: { owner?: { uid: number; gid: number } } = {},
): Promise<string> {
  if (!isPlainComponent(name) || name.startsWith('.')) throw new WorkspaceRefused(`not a plain file name: ${JSON.stringify(name)}`);
  return withDir(workspaceDir, dirs, true, opts.owner, async (dir, root) => {
    const tmp = `.${crypto.randomUUID()}.part`;
    const fh = await fs.promises.open(at(dir, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644).catch((err: NodeJS.ErrnoException) => {
      throw refusal(err.code, [...dirs, name], 'file');
    });
    try {
      try {
        await fh.writeFile(bytes);
        await adopt(root, fh);
      } finally {
        await fh.close();
      }
      // Within the pinned directory: a symlink planted at the final name is replaced, never followed.
      await fs.promises.rename(at(dir, tmp), at(dir, name)).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'EISDIR' || err.code === 'ENOTEMPTY' || err.code === 'EEXIST'
          ? new WorkspaceRefused(`${[...dirs, name].join('/')} in the workspace is a directory`)
          : err;
      });
    } catch (err) {
      await fs.promises.unlink(at(dir, tmp)).catch(() => undefined);
      throw err;
    }
    return [...dirs, name].join('/');
  });
}

/**
 * Reads `<dirs...>/<name>` of the workspace: no symlink at any level, a regular file with one link (a hard link
 * could be another path's content) that the workspace's owner could read itself (as walkTree asks: a host file
 * hard-linked in where fs.protected_hardlinks=0 keeps one link once the host renames a new version over its own
 * name), at most `maxBytes`. Throws WorkspaceRefused with the reason.
 */
export async function readWorkspaceFile(workspaceDir: string, dirs: string[], name: string, maxBytes: number): Promise<Buffer> {
  if (!isPlainComponent(name)) throw new WorkspaceRefused('not a plain file name');
  return withDir(workspaceDir, dirs, false, undefined, async (dir, root) => {
    // O_NONBLOCK: a FIFO swapped in cannot block the open (nor the read: it is refused by the fstat below).
    const fh = await fs.promises.open(at(dir, name), READ_FLAGS).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ELOOP') throw new WorkspaceRefused('a symbolic link');
      if (err.code === 'ENOENT') throw new WorkspaceRefused('no such file');
      throw new WorkspaceRefused(`cannot be opened (${err.code ?? 'error'})`);
    });
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new WorkspaceRefused('not a regular file');
      if (st.nlink !== 1) throw new WorkspaceRefused('a hard link');
      if (!readableBy(st, root.reader)) throw new WorkspaceRefused("not readable by the workspace's owner");
      if (st.size > maxBytes) throw new WorkspaceRefused(`larger than ${maxBytes} bytes`);
      const buf = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
      let len = 0;
      while (len < buf.length) {
        const { bytesRead } = await fh.read(buf, len, buf.length - len, len);
        if (bytesRead === 0) break;
        len += bytesRead;
      }
      if (len > maxBytes) throw new WorkspaceRefused(`larger than ${maxBytes} bytes`);
      return buf.subarray(0, len);
    } finally {
      await fh.close();
    }
  });
}

/**
 * The entries directly in `<dirs...>` of the workspace with their lstat (nothing followed); an empty map when the
 * directory is missing or refused (a symlink, a file).
 */
export async function listWorkspaceDir(workspaceDir: string, dirs: string[]): Promise<Map<string, fs.Stats>> {
  const out = new Map<string, fs.Stats>();
  try {
    await withDir(workspaceDir, dirs, false, undefined, async (dir) => {
      for (const name of await fs.promises.readdir(`/proc/self/fd/${dir.fd}`)) {
        const st = await fs.promises.lstat(at(dir, name)).catch(() => null);
        if (st) out.set(name, st);
      }
    });
  } catch (err) {
    if (!(err instanceof WorkspaceRefused)) throw err;
  }
  return out;
}
