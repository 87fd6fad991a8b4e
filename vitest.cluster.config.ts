import { defineConfig } from 'vitest/config';

/**
 * The cluster failover suite (`npm run test:cluster`): the production topology of `npm run cluster` (the real
 * Temporal server on PostgreSQL, replicas of every service, compiled JavaScript) started once per file, parts
 * of it SIGKILLed mid-turn, the fault suite's audit after each test. One file at a time, like the faults suite.
 */
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    // The Temporal core bridge is native: test files in child processes, not worker threads.
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 240_000,
    hookTimeout: 600_000,
    reporters: ['default'],
  },
});
