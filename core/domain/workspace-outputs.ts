/**
 * Files a shell command leaves in `<workspace>/outputs/` are handed back as message files (issue 13 item 4).
 * Both sides read them through here: the agent backend lists and hashes what a command created or changed,
 * the api copies exactly that content (same sha256) into uploads. The workspace is written by the agent, so
 * every read distrusts it: only plain names directly in `outputs/`, only regular files with one link, never
 * through a symlink at any level (core/domain/workspace-fs.ts walks from the workspace root by descriptor), and a size cap.
 */
import crypto from 'node:crypto';
import { FILE_TYPES, type Kind } from './uploads.js';
import { listWorkspaceDir, readWorkspaceFile, WorkspaceRefused } from './workspace-fs.js';

export const OUTPUTS_DIR = 'outputs';
/** Files one command may hand back; more are reported to the model as not attached. */
export const MAX_OUTPUT_FILES = 10;
const REF_PREFIX = `workspace:${OUTPUTS_DIR}/`;

/** What a tool result event carries for one file: `workspace:outputs/<name>`. */
export const outputRef = (name: string) => `${REF_PREFIX}${name}`;

/** The file name of a `workspace:outputs/<name>` reference, or null for anything else. */
export function parseOutputRef(url: string): string | null {
  if (!url.startsWith(REF_PREFIX)) return null;
  const name = url.slice(REF_PREFIX.length);
  return isSafeOutputName(name) ? name : null;
}

/** A plain file name: no separators, no `.`/`..`, no control characters, not hidden, bounded length. */
export function isSafeOutputName(name: string): boolean {
  return name.length > 0 && name.length <= 200 && !/[/\\\u0000-\u001f\u007f]/.test(name) && !name.startsWith('.');
}

/** What identifies one version of a file: a changed mtime, size or inode means the command wrote it. */
export interface OutputStat {
  mtimeMs: number;
  size: number;
  ino: number;
}

/** The regular files directly in `outputs/` (symlinks, directories and odd names skipped); empty when it is missing or not a directory. */
export async function listOutputs(workspaceDir: string): Promise<Map<string, OutputStat>> {
  const out = new Map<string, OutputStat>();
  for (const [name, s] of await listWorkspaceDir(workspaceDir, [OUTPUTS_DIR])) {
    if (isSafeOutputName(name) && s.isFile()) out.set(name, { mtimeMs: s.mtimeMs, size: s.size, ino: s.ino });
  }
  return out;
}

/** Names in `after` that are new or changed since `before`, in name order. */
export function changedOutputs(before: Map<string, OutputStat>, after: Map<string, OutputStat>): string[] {
  return [...after.entries()]
    .filter(([name, s]) => {
      const b = before.get(name);
      return !b || b.mtimeMs !== s.mtimeMs || b.size !== s.size || b.ino !== s.ino;
    })
    .map(([name]) => name)
    .sort();
}

/** A refused output file (the same class as every workspace refusal, core/domain/workspace-fs.ts). */
export { WorkspaceRefused as OutputRefused };

/**
 * Reads `outputs/<name>` of a workspace through core/domain/workspace-fs.ts (no link followed at any level, a regular
 * file with one link, at most `maxBytes`). Throws OutputRefused with a reason fit for the model or a log.
 */
export async function readOutputFile(workspaceDir: string, name: string, maxBytes: number): Promise<Buffer> {
  if (!isSafeOutputName(name)) throw new WorkspaceRefused('not a plain file name');
  try {
    return await readWorkspaceFile(workspaceDir, [OUTPUTS_DIR], name, maxBytes);
  } catch (err) {
    // `outputs/ in the workspace is a symbolic link` reads better to the model as the directory it expected.
    if (err instanceof WorkspaceRefused && err.message.startsWith(`${OUTPUTS_DIR}/ in the workspace`))
      throw new WorkspaceRefused(`${OUTPUTS_DIR}/ is not a directory (${err.message.slice(`${OUTPUTS_DIR}/ in the workspace `.length)})`);
    throw err;
  }
}

export const sha256 = (bytes: Buffer) => crypto.createHash('sha256').update(bytes).digest('hex');

/** Type of an output file: a known upload type whose content matches its extension, else a binary document. */
export function outputFileType(name: string, bytes: Buffer): { ext: string; mime: string; kind: Kind } {
  const ext = /\.([A-Za-z0-9]{1,10})$/.exec(name)?.[1]?.toLowerCase() ?? 'bin';
  const t = FILE_TYPES[ext];
  if (t?.sniff(bytes.subarray(0, 4096))) return { ext, mime: t.mime, kind: t.kind };
  return { ext, mime: 'application/octet-stream', kind: 'document' };
}
