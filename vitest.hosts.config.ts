import { defineConfig } from 'vitest/config';

/**
 * The multi-host suite (`npm run test:hosts`, issue 44 item 2): services in network namespaces this suite creates
 * (root, iproute2), latency between them from Toxiproxy. One file at a time; no global setup (each file makes its own
 * hosts and removes them).
 */
export default defineConfig({
  test: {
    include: ['test/hosts/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 240_000,
    hookTimeout: 300_000,
    reporters: ['default'],
  },
});
