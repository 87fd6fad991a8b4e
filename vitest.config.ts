import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Colocated unit tests of the model gateway's mapping files (core/domain/llm/ai-sdk, core/domain/llm/catalogue), as in vercel/ai.
    include: ['test/**/*.test.ts', 'core/domain/llm/**/*.test.ts'],
    // The fault-injection and cluster suites run on their own (npm run test:faults / test:cluster).
    exclude: [...configDefaults.exclude, 'test/faults/**', 'test/cluster/**'],
    // The Temporal core bridge is native: run test files in child processes, not worker threads.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default'],
  },
});
