import { defineConfig } from 'vitest/config';

// The Temporal-restart test hangs intermittently (under investigation, see issue 6's note): it runs with
// `npm run test:restart`, not in the default suite, until it is reliable.
const RESTART = 'test/integration/ask-human-restart.test.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: process.env.RUN_RESTART_TEST ? [] : [RESTART],
    // The Temporal core bridge is native: run test files in child processes, not worker threads.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default'],
  },
});
