/**
 * A standalone api replica (docker-compose, production): needs DATABASE_URL, TEMPORAL_ADDRESS and
 * AGENT_BACKEND_URL. `npm start` runs the api in-process with everything else instead. It starts while
 * Temporal is unreachable (history, stream reattach and forms need only PostgreSQL; starting a turn answers
 * 503 + Retry-After until Temporal is back, /readyz says `temporal: false`).
 */
import { devDefaultSecrets, loadConfig } from '../core/platform/config.js';
import { createDb } from '../core/platform/db.js';
import { EventNotifier } from '../core/protocol/event-log.js';
import { createLogger } from '../core/platform/logger.js';
import { setupObservability } from '../core/platform/observability.js';
import { temporalSecurity } from '../core/platform/temporal-connection.js';
import { createWiredApi, lazyTemporalConnection } from './wire.js';
import { createHttpServer } from '../core/platform/http-server.js';
import { installProcessGuard } from '../core/platform/process-guard.js';

const config = loadConfig();
setupObservability(config, 'api');
const logger = createLogger('api', config.LOG_LEVEL);
installProcessGuard(logger, config.UNCAUGHT_ERROR_POLICY);
if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
  logger.fatal('DATABASE_URL and TEMPORAL_ADDRESS are required for a standalone api (npm start wires everything itself).');
  process.exit(1);
}
const weakSecrets = devDefaultSecrets(config);
if (weakSecrets.length)
  logger.warn(
    { secrets: weakSecrets },
    'development default secrets in use: anyone who reads the source can call the inner API; NODE_ENV=production refuses them',
  );
const db = createDb(config.DATABASE_URL, { max: 20, preparedStatements: config.HOT_SQL_PREPARED });
const connection = lazyTemporalConnection(config.TEMPORAL_ADDRESS, temporalSecurity(config));
const notifier = new EventNotifier(config.DATABASE_URL, logger, config.PG_LISTEN_CONNECT_TIMEOUT_MS);
await notifier.start();
const {
  app,
  started,
  stop: stopBackground,
} = createWiredApi({
  db,
  connection,
  notifier,
  config,
  logger,
  agentBackendUrl: () => config.agentBackendUrl,
});
await started();
const server = createHttpServer(app, config).listen(config.API_PORT, config.API_HOST, () =>
  logger.info({ port: config.API_PORT }, 'api listening'),
);
const stop = () => {
  server.close();
  void stopBackground()
    .then(() => notifier.stop())
    .then(() => db.$disconnect())
    .then(() => connection.close())
    .then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
