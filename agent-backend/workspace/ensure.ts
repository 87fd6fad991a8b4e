/**
 * The workspace directory and its two directories of the backend's making, `.tmp` (the command's TMPDIR) and
 * `outputs/` (whose new files become message files), made on first use and given to the workspace's own uid before
 * every command. The backend runs as root here while the workspace's agent (a process of an earlier command may still
 * be running) can rename, replace or swap any entry in it: so nothing is done by path inside the workspace. The
 * workspace is opened once (never through a link at its own name); each directory is made and opened relative to that
 * descriptor without following a link (`/proc/self/fd/<fd>/<name>`, openat's equivalent, core/domain/workspace-fs.ts),
 * and its owner is read and changed on the descriptor (fstat, fchown), so what is chowned is the directory that was
 * opened, never whatever a name points at a moment later. The by-path lstat + lchown this replaces chowned the entry at
 * the name at the time of the call: a symlink was only relabelled, but a hard link swapped in between the two calls
 * (where the host allows links to others' files, fs.protected_hardlinks=0) would have handed a host file to the tenant.
 * A link or a file the agent left at `.tmp` or `outputs` stays as it is (a link at outputs/ attaches nothing).
 * The rule: docs/security.md "Root never walks a tenant tree"; the racer test: test/security/tenant-tree/paths.test.ts.
 */
import fs from 'node:fs';
import { at, DIR_FLAGS } from '../../core/domain/workspace-fs.js';
import { OUTPUTS_DIR } from '../../core/domain/workspace-outputs.js';

/** The directories made in every workspace (beside the workspace root itself). */
export const WORKSPACE_DIRS = ['.tmp', OUTPUTS_DIR] as const;

function adopt(fd: number, owner: { uid: number; gid: number } | undefined): void {
  if (!owner) return;
  const st = fs.fstatSync(fd);
  if (st.isDirectory() && (st.uid !== owner.uid || st.gid !== owner.gid)) fs.fchownSync(fd, owner.uid, owner.gid);
}

/** Opens a directory entry of `dirFd` without following a link; null when it is a link, a file or missing. */
function openChildDir(dirFd: number, name: string): number | null {
  try {
    return fs.openSync(at(dirFd, name), DIR_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Makes `dir` (its parents are the deployment's WORKSPACES_DIR), `dir/.tmp` and `dir/outputs` where missing, and gives
 * the three to `owner` when given (the workspace's sandbox uid), all by descriptor. Returns `dir`.
 */
export function ensureWorkspaceDirs(dir: string, owner?: { uid: number; gid: number }): string {
  fs.mkdirSync(dir, { recursive: true });
  const root = fs.openSync(dir, DIR_FLAGS);
  try {
    adopt(root, owner);
    for (const name of WORKSPACE_DIRS) {
      try {
        // mkdir never follows a link at its own name (EEXIST): a link the agent put there is left alone.
        fs.mkdirSync(at(root, name), { mode: 0o755 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const fd = openChildDir(root, name);
      if (fd === null) continue;
      try {
        adopt(fd, owner);
      } finally {
        fs.closeSync(fd);
      }
    }
  } finally {
    fs.closeSync(root);
  }
  return dir;
}
