/**
 * Entry point of the agent backend: `npm run agent-backend`. Needs DATABASE_URL (the backend keeps
 * runs and events in its own `agent_backend` schema) and reaches the api at API_INTERNAL_URL.
 */
import { loadConfig } from '../core/platform/config.js';
import { createLogger } from '../core/platform/logger.js';
import { setupObservability } from '../core/platform/observability.js';
import { installProcessGuard } from '../core/platform/process-guard.js';
import { createAgentBackend } from './server.js';
import { isConnectionError, PgRunStore } from './store.js';

async function main(): Promise<void> {
  const config = loadConfig();
  setupObservability(config, 'agent-backend');
  const logger = createLogger('agent-backend', config.LOG_LEVEL);
  installProcessGuard(logger, config.UNCAUGHT_ERROR_POLICY);
  if (!config.DATABASE_URL) {
    logger.fatal('DATABASE_URL is required (npm start provides embedded PostgreSQL)');
    process.exit(1);
  }
  const store = new PgRunStore(config.DATABASE_URL, logger);
  // PostgreSQL may be restarting while the backend starts: wait for it rather than exit.
  for (let delay = 500; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      await store.init();
      break;
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      logger.warn({ err: (err as Error).message, retry_in_ms: delay }, 'agent backend: PostgreSQL unreachable at start, waiting');
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  const backend = createAgentBackend({ config, logger, store });
  const running = await backend.start();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'agent backend stopping');
    await running.close();
    await store.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
