import fs from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';
import { fileOptions } from './vitest.config.js';

/**
 * `npm run test:unit`: the files of `npm test` that need none of the services its global setup starts (no PostgreSQL,
 * Temporal dev server or stack), found by reading them: a file is left out when it, or a test helper it imports
 * (relative imports under test/, followed), calls vitest's inject(). Every file here still runs in `npm test`.
 */
const ROOT = import.meta.dirname;

function needsServices(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  if (/\binject\(/.test(text)) return true;
  for (const m of text.matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
    const target = path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts'));
    if (!target.startsWith(path.join(ROOT, 'test') + path.sep) || !fs.existsSync(target)) continue;
    if (needsServices(target, seen)) return true;
  }
  return false;
}

const excluded = ['test/faults', 'test/cluster', 'test/hosts', 'test/containers'];
const unitFiles = ['test', 'core/domain/llm']
  .flatMap((dir) => fs.readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' }).map((f) => path.join(dir, f)))
  .filter((f) => f.endsWith('.test.ts') && !excluded.some((d) => f.startsWith(d + path.sep)))
  .filter((f) => !needsServices(path.join(ROOT, f)))
  .sort();

export default defineConfig({
  test: {
    ...fileOptions,
    maxWorkers: 2,
    // Unit files share their worker's process (npm test's `shared` project does the same): imported once per worker.
    isolate: false,
    include: unitFiles,
    globalSetup: [],
    reporters: ['default', ['./test/support/timing-reporter.ts', { file: '.cache/test-timings-unit.json' }]],
  },
});
