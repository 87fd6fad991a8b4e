/**
 * A whole stack per test file on the shared PostgreSQL + Temporal: own database, own task queue, and secrets of its
 * own (the backend refuses runtime and shell, and the api every workspace, while one holds its public default).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { inject } from 'vitest';
import { loadConfig, type Env } from '../../core/platform/config.js';
import { createLogger, type Logger } from '../../core/platform/logger.js';
import { ONE_CLIENT_LIMITS, startStack, type Stack, type StackOptions } from '../../stack/start-stack.js';
import { freshDatabase } from './db.js';

export async function startTestStack(
  name: string,
  opts: { env?: Partial<Env>; worker?: StackOptions['worker']; logger?: Logger } = {},
): Promise<Stack> {
  const databaseUrl = await freshDatabase(name);
  const config = loadConfig(
    {},
    {
      DATA_DIR: path.join(inject('testDataDir'), name),
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `tq-${name}-${process.pid}`,
      API_PORT: 0,
      AGENT_BACKEND_PORT: 0,
      DEMO_MODEL_TOKEN_DELAY_MS: 1,
      LOG_LEVEL: (process.env.TEST_LOG_LEVEL as Env['LOG_LEVEL']) ?? 'silent',
      // Per-key/per-user limits out of the way: many turns and streams run as one user here.
      ...ONE_CLIENT_LIMITS,
      // The fake model providers of the tests listen on loopback (a workspace's own base_url is guarded otherwise).
      MODEL_ALLOW_PRIVATE_NETWORK: true,
      // One bundle of workflows/ for every worker of the run (vitest.config.ts env; worker/workflow-bundle-cache.ts).
      WORKER_WORKFLOW_BUNDLE_CACHE_DIR: process.env.WORKER_WORKFLOW_BUNDLE_CACHE_DIR || undefined,
      AGENT_BACKEND_TOKEN: `test-backend-${crypto.randomBytes(12).toString('hex')}`,
      INNER_API_KEY: `test-inner-${crypto.randomBytes(12).toString('hex')}`,
      EXECUTION_CONTEXT_SIGNING_KEY: `test-context-${crypto.randomBytes(12).toString('hex')}`,
      ...opts.env,
    },
  );
  return startStack({ config, logger: opts.logger ?? createLogger(`test-${name}`, config.LOG_LEVEL), worker: opts.worker ?? 'in-process' });
}
