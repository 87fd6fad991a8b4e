/**
 * A vitest reporter beside 'default' (vitest.config.ts): after the run it prints the slowest files (import and tests
 * apart, so a file that is slow to load is told from one whose tests are slow) and writes every file's figures to
 * .cache/test-timings.json, which `.ci/run` prints again at its end (scripts/test-timings.ts). Growth of the suite
 * stays visible run by run; nothing here asserts a time.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export interface FileTiming {
  /** Relative to the project root. */
  file: string;
  state: string;
  tests: number;
  /** Importing the file and what it imports, and running its describe() callbacks (vitest's collectDuration). */
  importMs: number;
  /** Its tests and hooks (vitest's duration). */
  testsMs: number;
  /** Setup files and the runner's own preparation. */
  setupMs: number;
  /** importMs + testsMs + setupMs: the file's time in its worker. */
  totalMs: number;
}

export interface TimingReport {
  finishedAt: string;
  wallMs: number;
  files: number;
  tests: number;
  /** Sums over the files. */
  importMs: number;
  testsMs: number;
  timings: FileTiming[];
}

const ROOT = path.resolve(import.meta.dirname, '../..');
export const TIMINGS_FILE = path.join(ROOT, '.cache', 'test-timings.json');

export function fileTiming(m: TestModule): FileTiming {
  const d = m.diagnostic();
  const importMs = Math.round(d.collectDuration);
  const testsMs = Math.round(d.duration);
  const setupMs = Math.round(d.setupDuration + d.prepareDuration + d.environmentSetupDuration);
  return {
    file: path.relative(ROOT, m.moduleId),
    state: m.state(),
    tests: [...m.children.allTests()].length,
    importMs,
    testsMs,
    setupMs,
    totalMs: importMs + testsMs + setupMs,
  };
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The table both the reporter and scripts/test-timings.ts print. */
export function formatReport(r: TimingReport, top = 20): string {
  const rows = [...r.timings].sort((a, b) => b.totalMs - a.totalMs).slice(0, top);
  const w = Math.max(...rows.map((t) => t.file.length), 4);
  const lines = [
    `slowest ${rows.length} of ${r.files} test files (${r.tests} tests; wall ${s(r.wallMs)}, summed import ${s(r.importMs)}, tests ${s(r.testsMs)}):`,
    `  ${'total'.padStart(8)} ${'import'.padStart(8)} ${'tests'.padStart(8)}  ${'file'.padEnd(w)}  tests`,
    ...rows.map(
      (t) =>
        `  ${s(t.totalMs).padStart(8)} ${s(t.importMs).padStart(8)} ${s(t.testsMs).padStart(8)}  ${t.file.padEnd(w)}  ${t.tests}${t.state === 'passed' ? '' : ` ${t.state}`}`,
    ),
  ];
  return lines.join('\n');
}

export default class TimingReporter implements Reporter {
  private started = Date.now();
  private readonly file: string;
  private readonly top: number;

  constructor(opts: { file?: string; top?: number } = {}) {
    this.file = opts.file ? path.resolve(ROOT, opts.file) : TIMINGS_FILE;
    this.top = opts.top ?? 20;
  }

  onTestRunStart(): void {
    this.started = Date.now();
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const timings = testModules.map(fileTiming);
    const report: TimingReport = {
      finishedAt: new Date().toISOString(),
      wallMs: Date.now() - this.started,
      files: timings.length,
      tests: timings.reduce((n, t) => n + t.tests, 0),
      importMs: timings.reduce((n, t) => n + t.importMs, 0),
      testsMs: timings.reduce((n, t) => n + t.testsMs, 0),
      timings: timings.sort((a, b) => b.totalMs - a.totalMs),
    };
    if (!timings.length) return;
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    fs.writeFileSync(this.file, JSON.stringify(report, null, 2) + '\n');
    process.stdout.write(`\n${formatReport(report, this.top)}\n(all files: ${path.relative(ROOT, this.file)})\n`);
  }
}
