/**
 * The workspace's identity marker (issue 31, docs/seeds/001 `binding_lost`): `.dify-workspace` at the workspace root,
 * `{"workspace_id", "generation"}`, written when the backend creates the workspace for a binding's first turn. The
 * runtime layer checks it on entry: a workspace the api expects to exist (the binding has had a turn) whose marker is
 * missing (the directory was wiped, or WORKSPACES_DIR is not the shared storage the binding's earlier turns used) or
 * names another workspace or generation is lost — the run fails `binding_lost` instead of silently starting empty
 * while the session's history still refers to its files.
 *
 * The marker is written and read without following links (O_NOFOLLOW): an agent can replace it, but only with a
 * regular file inside its own workspace, and a marker it forges can at most claim its own identity.
 */
import fs from 'node:fs';
import path from 'node:path';
import { RunRefusedError } from '../errors.js';

export const MARKER_FILE = '.dify-workspace';
/** The reason a run fails with when its workspace is gone (activities/classify-failure.ts maps it to the seed's message). */
export const BINDING_LOST = 'binding_lost';
const MAX_MARKER_BYTES = 4096;

export interface WorkspaceIdentity {
  workspaceId: string;
  generation: number;
}

/** What the marker at `dir` says: absent, unreadable (not a regular file, not JSON), or an identity. */
export function readMarker(dir: string): WorkspaceIdentity | 'absent' | 'invalid' {
  let fd: number;
  try {
    fd = fs.openSync(path.join(dir, MARKER_FILE), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'absent' : 'invalid';
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > MAX_MARKER_BYTES) return 'invalid';
    const buf = Buffer.alloc(st.size);
    fs.readSync(fd, buf, 0, st.size, 0);
    const v = JSON.parse(buf.toString('utf8')) as { workspace_id?: unknown; generation?: unknown };
    if (typeof v.workspace_id !== 'string' || typeof v.generation !== 'number') return 'invalid';
    return { workspaceId: v.workspace_id, generation: v.generation };
  } catch {
    return 'invalid';
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes the marker of a workspace just created (exclusive: an existing one is left for checkWorkspaceMarker). */
export function writeMarker(dir: string, id: WorkspaceIdentity, owner?: { uid: number; gid: number }): void {
  const body = `${JSON.stringify({ workspace_id: id.workspaceId, generation: id.generation })}\n`;
  let fd: number;
  try {
    fd = fs.openSync(
      path.join(dir, MARKER_FILE),
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
      0o644,
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw err;
  }
  try {
    fs.writeSync(fd, body);
    if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
  } finally {
    fs.closeSync(fd);
  }
}

const lost = (id: WorkspaceIdentity, why: string) =>
  new RunRefusedError(null, `workspace ${id.workspaceId} (generation ${id.generation}) is lost: ${why}`, BINDING_LOST);

/**
 * The check on entry, before the workspace directory is created or touched:
 * - a marker naming this workspace and generation: the binding's own workspace;
 * - a marker naming anything else: foreign → binding_lost;
 * - no marker, and `expectExisting`: lost → binding_lost — except a workspace made before markers existed (it has the
 *   private `.tmp` every earlier turn created), which is adopted;
 * - no marker otherwise: a new workspace (the binding's first turn); the caller creates it and writes the marker.
 * Returns whether the marker is still to be written.
 */
export function checkWorkspaceMarker(dir: string, id: WorkspaceIdentity, expectExisting: boolean): { write: boolean } {
  const marker = readMarker(dir);
  if (marker === 'invalid') throw lost(id, `its ${MARKER_FILE} marker is not a valid workspace marker`);
  if (marker !== 'absent') {
    if (marker.workspaceId !== id.workspaceId || marker.generation !== id.generation)
      throw lost(id, `the directory belongs to workspace ${marker.workspaceId} (generation ${marker.generation})`);
    return { write: false };
  }
  if (!expectExisting) return { write: true };
  let legacy = false;
  try {
    legacy = fs.lstatSync(path.join(dir, '.tmp')).isDirectory();
  } catch {
    legacy = false;
  }
  if (!legacy)
    throw lost(id, 'its directory is missing or was emptied since its last turn (is WORKSPACES_DIR the storage its earlier turns used?)');
  return { write: true };
}
