import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault-injection suite runs on its own (npm run test:faults, vitest.faults.config.ts).
    exclude: [...configDefaults.exclude, 'test/faults/**'],
    // The Temporal core bridge is native: run test files in child processes, not worker threads.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default'],
  },
});
