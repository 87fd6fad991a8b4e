/** The api with all its routers and readiness checks, as both `npm start` and a standalone replica run it. */
import { Client, type ConnectionLike } from '@temporalio/client';
import { AgentBackendClient } from '../core/backend-client.js';
import type { Config } from '../core/config.js';
import type { Db } from '../core/db.js';
import type { EventNotifier } from '../core/event-log.js';
import { createDefaultProviders } from '../core/llm/providers/index.js';
import type { Logger } from '../core/logger.js';
import { createApiApp } from './app.js';
import { createInnerLlmRouter } from './inner/llm.js';
import { innerAgentConfigRoutes } from './routes/inner-agent-config.js';

export function createWiredApi(deps: {
  db: Db;
  connection: ConnectionLike;
  /** True when `connection` is a NativeConnection a worker of this process polls with (eager start). */
  eagerStart?: boolean;
  notifier: EventNotifier;
  config: Config;
  logger: Logger;
  /** Where the agent backend is (known only after it started, in the dev stack). */
  agentBackendUrl: () => string;
}) {
  const { db, connection, notifier, config, logger } = deps;
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const backend = new AgentBackendClient(deps.agentBackendUrl, config.AGENT_BACKEND_TOKEN);
  const app = createApiApp({
    db,
    backend,
    temporal,
    eagerStart: deps.eagerStart,
    notifier,
    config,
    logger: logger.child({ component: 'api' }),
    inner: [
      { path: '/inner/api/agent/llm', router: createInnerLlmRouter({ db, config, logger, providers: createDefaultProviders(config) }) },
      { path: '/inner/api/agent-config', router: innerAgentConfigRoutes({ db, innerApiKey: config.INNER_API_KEY }) },
    ],
    ready: async () => ({
      database: await db.$queryRaw`select 1`.then(() => true, () => false),
      temporal: await connection.workflowService.getSystemInfo({}).then(() => true, () => false),
      agent_backend: await fetch(`${deps.agentBackendUrl()}/healthz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false),
    }),
  });
  return { app, temporal };
}
