/**
 * Files a shell command leaves in `<workspace>/outputs/` are handed back as message files (issue 13 item 4).
 * Both sides read them through here: the agent backend lists and hashes what a command created or changed,
 * the api copies exactly that content (same sha256) into uploads. The workspace is written by the agent, so
 * every read distrusts it: only plain names directly in `outputs/`, only regular files with one link, never
 * through a symlink (the opened descriptor's real path must be inside `outputs/`), and a size cap.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { FILE_TYPES, type Kind } from './uploads.js';

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

/** The regular files directly in `outputs/` (symlinks, directories and odd names skipped); empty when it is missing. */
export async function listOutputs(workspaceDir: string): Promise<Map<string, OutputStat>> {
  const dir = path.join(workspaceDir, OUTPUTS_DIR);
  const out = new Map<string, OutputStat>();
  const st = await fs.promises.lstat(dir).catch(() => null);
  if (!st?.isDirectory()) return out;
  for (const name of await fs.promises.readdir(dir).catch(() => [] as string[])) {
    if (!isSafeOutputName(name)) continue;
    const s = await fs.promises.lstat(path.join(dir, name)).catch(() => null);
    if (s?.isFile()) out.set(name, { mtimeMs: s.mtimeMs, size: s.size, ino: s.ino });
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

export class OutputRefused extends Error {}

/**
 * Reads `outputs/<name>` of a workspace without following links out of it. Throws OutputRefused (with a reason
 * fit for the model or a log) for a bad name, a symlink, a non-regular or hard-linked file, one over `maxBytes`,
 * or a descriptor whose real path is not `<workspace>/outputs/<name>`.
 */
export async function readOutputFile(workspaceDir: string, name: string, maxBytes: number): Promise<Buffer> {
  if (!isSafeOutputName(name)) throw new OutputRefused('not a plain file name');
  const root = await fs.promises.realpath(workspaceDir);
  const dirStat = await fs.promises.lstat(path.join(root, OUTPUTS_DIR)).catch(() => null);
  if (!dirStat?.isDirectory()) throw new OutputRefused(`${OUTPUTS_DIR}/ is not a directory`);
  const want = path.join(root, OUTPUTS_DIR, name);
  const pre = await fs.promises.lstat(want).catch(() => null);
  if (!pre) throw new OutputRefused('no such file');
  if (!pre.isFile()) throw new OutputRefused(pre.isSymbolicLink() ? 'a symbolic link' : 'not a regular file');
  // O_NOFOLLOW: the last component may not be a link; O_NONBLOCK: a FIFO swapped in cannot block the open.
  const fh = await fs.promises
    .open(want, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    .catch((err: NodeJS.ErrnoException) => {
      throw new OutputRefused(err.code === 'ELOOP' ? 'a symbolic link' : `cannot be opened (${err.code ?? 'error'})`);
    });
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new OutputRefused('not a regular file');
    if (st.nlink !== 1) throw new OutputRefused('a hard link');
    if (st.size > maxBytes) throw new OutputRefused(`larger than ${maxBytes} bytes`);
    // A directory on the way swapped for a symlink after the checks above still shows here: the descriptor's real path.
    const real = await fs.promises.readlink(`/proc/self/fd/${fh.fd}`).catch(() => null);
    if (real !== null && real !== want) throw new OutputRefused(`outside ${OUTPUTS_DIR}/`);
    if (real === null && (await fs.promises.realpath(want)) !== want) throw new OutputRefused(`outside ${OUTPUTS_DIR}/`);
    const buf = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
    let len = 0;
    while (len < buf.length) {
      const { bytesRead } = await fh.read(buf, len, buf.length - len, len);
      if (bytesRead === 0) break;
      len += bytesRead;
    }
    if (len > maxBytes) throw new OutputRefused(`larger than ${maxBytes} bytes`);
    return buf.subarray(0, len);
  } finally {
    await fh.close();
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
