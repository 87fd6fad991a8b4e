/**
 * A standalone api replica (docker-compose, production): needs DATABASE_URL, TEMPORAL_ADDRESS and
 * AGENT_BACKEND_URL. `npm start` runs the api in-process with everything else instead.
 */
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../core/config.js';
import { createDb } from '../core/db.js';
import { EventNotifier } from '../core/event-log.js';
import { createDefaultProviders } from '../core/llm/providers/index.js';
import { createLogger } from '../core/logger.js';
import { createApiApp } from './app.js';
import { createInnerLlmRouter } from './inner/llm.js';

const config = loadConfig();
const logger = createLogger('api', config.LOG_LEVEL);
if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
  logger.fatal('DATABASE_URL and TEMPORAL_ADDRESS are required for a standalone api (npm start wires everything itself).');
  process.exit(1);
}
const db = createDb(config.DATABASE_URL, { max: 20 });
const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const notifier = new EventNotifier(config.DATABASE_URL, logger);
await notifier.start();
const app = createApiApp({
  db,
  temporal,
  notifier,
  config,
  logger,
  inner: [{ path: '/inner/api/agent/llm', router: createInnerLlmRouter({ db, config, logger, providers: createDefaultProviders(config) }) }],
  ready: async () => ({
    database: await db.$queryRaw`select 1`.then(() => true, () => false),
    temporal: await connection.workflowService.getSystemInfo({}).then(() => true, () => false),
    agent_backend: await fetch(`${config.agentBackendUrl}/healthz`).then((r) => r.ok, () => false),
  }),
});
const server = app.listen(config.API_PORT, config.API_HOST, () => logger.info({ port: config.API_PORT }, 'api listening'));
const stop = () => {
  server.close();
  void notifier.stop().then(() => db.$disconnect()).then(() => connection.close()).then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
