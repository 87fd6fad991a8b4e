/** The commit a bench run measured, and whether files outside bench/ differ from it (every scenario's result says so). */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function codeUnderTest(): { commit: string | null; dirty: boolean | null } {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  const head = git('rev-parse', '--short', 'HEAD');
  if (head.status !== 0) return { commit: null, dirty: null };
  const status = git('status', '--porcelain', '--', '.', ':!bench', ':!test/bench');
  return { commit: head.stdout.trim(), dirty: status.stdout.trim() !== '' };
}
