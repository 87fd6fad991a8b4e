import { defineConfig } from 'vitest/config';

/**
 * The containers built and run (`npm run test:containers`, issue 44 item 3): deploy/containers/run.ts builds the
 * images from a debootstrap rootfs and runs docker-compose.yml with one shell turn through it. Long on a fresh
 * machine (debootstrap, image builds: docs/deploying.md "Containers built and run here"), so not in `npm test`.
 */
export default defineConfig({
  test: {
    include: ['test/containers/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 90 * 60_000,
    hookTimeout: 90 * 60_000,
    reporters: ['default'],
  },
});
