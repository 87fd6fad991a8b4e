/**
 * A standalone api replica (docker-compose, production): needs DATABASE_URL, TEMPORAL_ADDRESS and
 * AGENT_BACKEND_URL. `npm start` runs the api in-process with everything else instead.
 */
import { Connection } from '@temporalio/client';
import { loadConfig } from '../core/config.js';
import { createDb } from '../core/db.js';
import { EventNotifier } from '../core/event-log.js';
import { createLogger } from '../core/logger.js';
import { createWiredApi } from './wire.js';

const config = loadConfig();
const logger = createLogger('api', config.LOG_LEVEL);
if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
  logger.fatal('DATABASE_URL and TEMPORAL_ADDRESS are required for a standalone api (npm start wires everything itself).');
  process.exit(1);
}
const db = createDb(config.DATABASE_URL, { max: 20 });
const connection = await Connection.connect({
  address: config.TEMPORAL_ADDRESS,
  channelArgs: { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 3000 },
});
const notifier = new EventNotifier(config.DATABASE_URL, logger);
await notifier.start();
const { app } = createWiredApi({ db, connection, notifier, config, logger, agentBackendUrl: () => config.agentBackendUrl });
const server = app.listen(config.API_PORT, config.API_HOST, () => logger.info({ port: config.API_PORT }, 'api listening'));
const stop = () => {
  server.close();
  void notifier.stop().then(() => db.$disconnect()).then(() => connection.close()).then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
