/**
 * The workspace's identity marker (issue 31, docs/seeds/001 `binding_lost`): `WORKSPACES_DIR/.markers/<workspace id>`,
 * `{"workspace_id", "generation", "directory_inode"}` (the directory's inode and birth time), written when the backend creates the workspace for a binding's
 * first turn. The runtime layer checks it on entry: a workspace the api expects to exist (the binding has had a turn)
 * whose marker is missing (WORKSPACES_DIR was wiped, or is not the shared storage the binding's earlier turns used),
 * whose directory is gone or is another directory than the one marked (deleted and recreated, e.g. by files the api
 * placed for the turn), or whose marker names another workspace or generation is lost — the run fails `binding_lost`
 * instead of silently starting empty while the session's history still refers to its files.
 *
 * The marker lives beside the workspaces, not in one (issue 43 item 2): the agent's shell writes only its own workspace
 * (shellctl's mounts and Landlock rules), so it can neither forge nor delete what its binding is checked against. It
 * is in WORKSPACES_DIR itself, not a sibling of it, so it is on the same storage as the directories it marks.
 * Workspaces of earlier releases kept it inside as `.dify-workspace`: the first entry after the upgrade checks that
 * one as before, writes the marker here and removes it (migrateLegacyMarker), before any command of the turn runs;
 * from then on a `.dify-workspace` in the tree is just a file of the agent's.
 *
 * Both are read and written relative to directory descriptors without following links (core/domain/workspace-fs.ts,
 * the rule of docs/security.md "Root never walks a tenant tree"). The format lives here, below every process: the
 * backend writes and checks it (agent-backend/workspace/marker.ts `checkWorkspaceMarker`), the api and the worker
 * write it for a fork and remove it with a retired or lost workspace.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { at, DIR_FLAGS, READ_FLAGS, readableBy, treeReader } from './workspace-fs.js';

/** The directory of markers, in WORKSPACES_DIR (never a workspace id: those are UUIDs). */
export const MARKERS_DIR = '.markers';
/** Where releases before issue 43 kept the marker: inside the workspace, where its agent could change it. */
export const LEGACY_MARKER_FILE = '.dify-workspace';
const MAX_MARKER_BYTES = 4096;
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

export interface WorkspaceIdentity {
  workspaceId: string;
  generation: number;
}

/** A marker as stored: the identity and the directory it was written for (`<inode>:<birth time ns>`). */
export interface WorkspaceMarker extends WorkspaceIdentity {
  directoryInode: string | null;
}

/** `WORKSPACES_DIR/.markers/<id>` of the workspace directory `dir` (`WORKSPACES_DIR/<id>`). */
export function markerPath(dir: string): string {
  const abs = path.resolve(dir);
  return path.join(path.dirname(abs), MARKERS_DIR, path.basename(abs));
}

function openDir(p: string): number | null {
  try {
    return fs.openSync(p, DIR_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return null;
    throw err;
  }
}

export function withDir<T>(fd: number | null, fn: (fd: number | null) => T): T {
  try {
    return fn(fd);
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** The workspace directory's descriptor (never through a link at its own name), or null when there is none. */
export const openWorkspace = (dir: string) => openDir(path.resolve(dir));
/** The markers directory's descriptor, made on first use when `create`. */
function openMarkers(dir: string, create: boolean): number | null {
  const p = path.dirname(markerPath(dir));
  if (create) fs.mkdirSync(p, { recursive: true, mode: 0o755 });
  return openDir(p);
}

/**
 * Which directory a descriptor is: its inode and birth time (an inode number alone is reused at once by a directory made
 * right after one was removed). A rename, and so a fork's copy moved into place, keeps both.
 */
export function inodeOf(fd: number): string {
  const st = fs.fstatSync(fd, { bigint: true });
  return `${st.ino}:${st.birthtimeNs}`;
}

/** Reads and parses a small regular file opened relative to `dirFd` (null: absent; 'invalid': anything else wrong). */
function readJson(dirFd: number, name: string, check?: (st: fs.Stats) => boolean): Record<string, unknown> | null | 'invalid' {
  let fd: number;
  try {
    fd = fs.openSync(at(dirFd, name), READ_FLAGS);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? null : 'invalid';
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > MAX_MARKER_BYTES || (check && !check(st))) return 'invalid';
    const buf = Buffer.alloc(st.size);
    fs.readSync(fd, buf, 0, st.size, 0);
    const v = JSON.parse(buf.toString('utf8')) as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : 'invalid';
  } catch {
    return 'invalid';
  } finally {
    fs.closeSync(fd);
  }
}

function identityOf(v: Record<string, unknown> | null | 'invalid'): WorkspaceMarker | 'absent' | 'invalid' {
  if (v === null) return 'absent';
  if (v === 'invalid' || typeof v.workspace_id !== 'string' || typeof v.generation !== 'number') return 'invalid';
  const ino = typeof v.directory_inode === 'string' && /^\d+:\d+$/.test(v.directory_inode) ? v.directory_inode : null;
  return { workspaceId: v.workspace_id, generation: v.generation, directoryInode: ino };
}

/** What the marker of the workspace directory `dir` says: absent, not a marker, or its identity. */
export function readMarker(dir: string): WorkspaceMarker | 'absent' | 'invalid' {
  return withDir(openMarkers(dir, false), (d) => (d === null ? 'absent' : identityOf(readJson(d, path.basename(path.resolve(dir))))));
}

/**
 * The marker a workspace of an earlier release kept inside itself. A hard link or a file the workspace's owner could not
 * read (a root-only file linked in) is never read as root: not a marker.
 */
export function readLegacyMarker(wsFd: number): WorkspaceMarker | 'absent' | 'invalid' {
  const reader = treeReader(fs.fstatSync(wsFd));
  const m = identityOf(readJson(wsFd, LEGACY_MARKER_FILE, (st) => st.nlink === 1 && readableBy(st, reader)));
  return typeof m === 'object' ? { ...m, directoryInode: null } : m;
}

/**
 * Writes (or replaces) the marker of the workspace directory `dir` for `id`, recording the directory's inode: read
 * from `directoryFd` when given (a fork's copy before it is renamed into place — a rename keeps the inode), else from
 * `dir`, which must exist. Written under a temporary name and renamed over the marker's, so a reader never sees half.
 */
export function writeMarker(dir: string, id: WorkspaceIdentity, directoryFd?: number): void {
  const ino =
    directoryFd !== undefined
      ? inodeOf(directoryFd)
      : withDir(openWorkspace(dir), (d) => {
          if (d === null) throw Object.assign(new Error(`workspace directory ${dir} does not exist`), { code: 'ENOENT' });
          return inodeOf(d);
        });
  const body = `${JSON.stringify({ workspace_id: id.workspaceId, generation: id.generation, directory_inode: ino })}\n`;
  withDir(openMarkers(dir, true), (d) => {
    if (d === null) throw new Error(`the markers directory ${path.dirname(markerPath(dir))} cannot be opened`);
    const temp = `.tmp-${crypto.randomUUID()}`;
    const fd = fs.openSync(at(d, temp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
    try {
      fs.writeSync(fd, body);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.renameSync(at(d, temp), at(d, path.basename(path.resolve(dir))));
    } catch (err) {
      fs.rmSync(at(d, temp), { force: true });
      throw err;
    }
  });
}

/**
 * Removes the marker of a workspace whose directory is removed (retirement, a lost binding, a failed fork). Best effort:
 * one left behind is harmless (it names a directory that no longer exists, and a first turn replaces it).
 */
export function removeMarker(dir: string): void {
  try {
    withDir(openMarkers(dir, false), (d) => d !== null && fs.rmSync(at(d, path.basename(path.resolve(dir))), { force: true }));
  } catch {
    // see above
  }
}
