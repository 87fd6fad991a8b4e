import { defineConfig } from 'vitest/config';

/**
 * The fault-injection suite (`npm run test:faults`): separately started processes killed and restarted at
 * chosen moments, a database audit after each test. One file at a time: every file runs its own
 * PostgreSQL, Temporal dev server, api, worker and agent backend, and the faults are about timing.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    // Prints every measured recovery after the last file (test/faults/summary.ts).
    globalSetup: ['test/faults/summary.ts'],
    // The Temporal core bridge is native: test files in child processes, not worker threads.
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 240_000,
    hookTimeout: 240_000,
    reporters: ['default'],
  },
});
