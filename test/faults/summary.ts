/**
 * The faults suite's summary (vitest globalSetup of vitest.faults.config.ts): every `[recovery]` a test measured
 * (fixture.ts `recovery`) is appended to one file, and after the last file the suite prints them, one line each:
 * `faults: backend SIGKILL → turn failed in 4.2 s`. docs/failure-modes.md is written from these lines.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const RECOVERIES_FILE = path.join(
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..'),
  '.data',
  'faults-recoveries.jsonl',
);

/** Appends one measured recovery (called from the test processes). */
export function recordRecovery(file: string, what: string, ms: number): void {
  fs.mkdirSync(path.dirname(RECOVERIES_FILE), { recursive: true });
  fs.appendFileSync(RECOVERIES_FILE, JSON.stringify({ file, what, ms }) + '\n');
}

export default function setup(): () => void {
  fs.rmSync(RECOVERIES_FILE, { force: true });
  return () => {
    let lines: { file: string; what: string; ms: number }[] = [];
    try {
      lines = fs
        .readFileSync(RECOVERIES_FILE, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { file: string; what: string; ms: number });
    } catch {
      return;
    }
    const out = lines.map((r) => `faults: ${r.what} in ${(r.ms / 1000).toFixed(1)} s   [${r.file}]`);
    process.stdout.write(`\n${out.length} recoveries measured:\n${out.join('\n')}\n`);
  };
}
