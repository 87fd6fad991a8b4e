import path from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Colocated unit tests of the model gateway's mapping files (core/domain/llm/ai-sdk, core/domain/llm/catalogue), as in vercel/ai.
    include: ['test/**/*.test.ts', 'core/domain/llm/**/*.test.ts'],
    // The fault-injection, cluster, multi-host and containers suites run on their own (npm run test:faults /
    // test:cluster / test:hosts / test:containers).
    exclude: [...configDefaults.exclude, 'test/faults/**', 'test/cluster/**', 'test/hosts/**', 'test/containers/**'],
    // The Temporal core bridge is native: run test files in child processes, not worker threads.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/support/global-setup.ts'],
    env: {
      // Every worker the tests start from sources (in-process, child, npm start) reuses one bundle of workflows/ while
      // its files are unchanged, instead of 3-4 s of webpack per start (worker/workflow-bundle-cache.ts).
      // WORKER_WORKFLOW_BUNDLE_CACHE_DIR= (empty) switches it off: every worker bundles.
      WORKER_WORKFLOW_BUNDLE_CACHE_DIR:
        process.env.WORKER_WORKFLOW_BUNDLE_CACHE_DIR ?? path.join(import.meta.dirname, '.cache', 'workflow-bundles'),
    },
    // timing-reporter: the slowest 20 files at the end, every file's times in .cache/test-timings.json (.ci/run prints it last).
    reporters: ['default', './test/support/timing-reporter.ts'],
  },
});
