/**
 * The api: public service API (/v1, app keys), inner API (/inner/api, X-Inner-Api-Key), ops endpoints.
 * Stateless: any number of replicas; turn streams come from the event log, not from memory.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isCompiled, projectRoot } from '../core/platform/project-root.js';
import express, { type Router } from 'express';
import type { Client } from '@temporalio/client';
import type { AgentBackendClient } from '../core/protocol/backend-client.js';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import { jsonBody } from '../core/platform/json-guard.js';
import type { EventNotifier } from '../core/protocol/event-log.js';
import type { Logger } from '../core/platform/logger.js';
import type { OutboxDispatcher } from '../core/domain/outbox.js';
import { appKeyAuth } from './auth.js';
import type { CredentialWatch } from './credential-watch.js';
import { errorHandler, RETRY_AFTER_SECONDS, unknownRoute } from './errors.js';
import { openApiRoute } from './openapi/index.js';
import { createRateLimits } from './rate-limit.js';
import { requestLog } from './request-log.js';
import { metricsRoute, registerTurnStateGauges } from '../core/platform/metrics/http.js';
import { metricsEnabled } from '../core/platform/metrics/index.js';
import { traceRequests } from '../core/platform/tracing/index.js';
import { appInfoRoutes } from './service/app-info.js';
import { chatRoutes } from './service/chat.js';
import { monitoringRoutes } from './console/monitoring.js';
import { agentLogRoutes } from './console/agent-logs.js';
import { consoleRoutes } from './console/agent.js';
import { studioRoutes } from './console/studio.js';
import { consoleAdminRoutes } from './console/admin.js';
import { consoleAppRoutes } from './console/apps.js';
import { conversationRoutes } from './service/conversations.js';
import { feedbackRoutes } from './service/feedbacks.js';
import { fileRoutes, signedFileRoutes } from './service/files.js';
import { formRoutes } from './service/forms.js';
import { messageRoutes } from './service/messages.js';
import { suggestedRoutes } from './service/suggested.js';
import { toolProviderRoutes } from './console/tool-providers.js';
import { modelProviderRoutes } from './console/model-providers.js';
import { knowledgeRoutes } from './console/knowledge.js';
import { scheduleRoutes } from './console/schedules.js';
import { webhookRoutes } from './console/webhooks.js';
import { createEmbedder, type Embedder } from '../core/domain/knowledge/embed.js';
import { createDefaultProviders } from '../core/domain/llm/providers/index.js';
import type { ProviderRegistry } from '../core/domain/llm/provider.js';

/**
 * The pages as built by scripts/build-web.ts (Vite: web/ sources and their npm modules bundled): <dist>/web next to
 * the compiled api (npm run build), .cache/web from TypeScript (built by prestart/pretest and the test setup).
 */
const WEB_DIR = isCompiled(import.meta.url)
  ? path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web')
  : path.join(projectRoot(import.meta.url), '.cache', 'web');

export interface ApiDeps {
  db: Db;
  /** The agent backend, for the fast stop path. */
  backend: AgentBackendClient;
  temporal: Client;
  /** Delivers the signals and cancels routes write to the transactional outbox (fast path). */
  outbox: OutboxDispatcher;
  /** See TurnServiceDeps.eagerStart. */
  eagerStart?: boolean;
  notifier: EventNotifier;
  /** Ends the streams of a revoked app key on this replica (api/credential-watch.ts). */
  credentials?: CredentialWatch;
  config: Config;
  logger: Logger;
  /** Routers mounted under /inner/api (LLM invoke, agent-config prompt). */
  inner?: { path: string; router: Router }[];
  /** Embeddings for knowledge datasets (default: the deployment's model providers). */
  embed?: Embedder;
  /** The deployment's model providers, for the api's own model calls (suggested questions); default: from `config`. */
  providers?: ProviderRegistry;
  /** Which dependency is reachable (`{database, temporal, agent_backend}`); 503 while one is not. */
  ready?: () => Promise<Record<string, boolean>>;
}

/** The pages' policy: only this origin's scripts, styles and fetches; no framing; no referrer (keys never leak). */
function strictPage(_req: express.Request, res: express.Response, next: express.NextFunction): void {
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
  );
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  next();
}

export function createApiApp(deps: ApiDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  // The request's span first: the request log line then carries its trace id.
  app.use(traceRequests('api'));
  app.use(requestLog(deps.logger));

  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  // Prometheus (docs/operations.md "Observability"); the turn-state gauges read PostgreSQL when scraped.
  if (metricsEnabled()) registerTurnStateGauges(deps.db);
  app.get('/metrics', metricsRoute('api'));

  // The chat page (web/): static files, strict CSP; the app key travels only in the URL fragment.
  app.get('/', (_req, res) => res.redirect(302, '/chat/'));
  // Not built (an api started without prestart): say how, instead of a bare 404.
  app.get(['/chat/', '/studio/'], (_req, res, next) => {
    if (fs.existsSync(path.join(WEB_DIR, 'index.html'))) return next();
    res.status(503).type('text/plain').send('The pages are not built: run `npm run build:web` (npm start and npm test build them).');
  });
  app.use('/chat', strictPage, express.static(WEB_DIR, { index: 'index.html', maxAge: 0 }));
  // The studio (web/studio.html, issue 19): the same files and the same policy; the console key stays in sessionStorage.
  app.use('/studio', strictPage, express.static(WEB_DIR, { index: 'studio.html', maxAge: 0 }));
  app.get('/readyz', async (_req, res) => {
    const checks = deps.ready ? await deps.ready() : {};
    const ok = Object.values(checks).every(Boolean);
    if (!ok) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
    res.status(ok ? 200 : 503).json({ status: ok ? 'ok' : 'unavailable', checks });
  });

  app.get('/openapi.json', openApiRoute);
  app.use(signedFileRoutes(deps));

  // Inner routers parse their own bodies (with their own limits).
  for (const m of deps.inner ?? []) app.use(m.path, m.router);

  const v1 = express.Router();
  // The key is checked before the body is read; bodies: 1 MB, JSON_MAX_DEPTH deep, no NUL (issue 17 L3).
  v1.use(appKeyAuth(deps.db));
  v1.use(jsonBody({ limit: '1mb', maxDepth: deps.config.JSON_MAX_DEPTH, rejectNul: true }));
  v1.use(createRateLimits(deps).middleware);
  v1.use(chatRoutes(deps));
  v1.use(messageRoutes(deps));
  v1.use(formRoutes(deps));
  v1.use(conversationRoutes(deps));
  v1.use(feedbackRoutes(deps));
  v1.use(suggestedRoutes(deps));
  v1.use(appInfoRoutes(deps));
  v1.use(fileRoutes(deps));
  app.use('/v1', v1);
  // An app's scheduled turns and webhooks (issue 35: api/console/schedules.ts, api/console/webhooks.ts); console-key auth.
  app.use('/console/api', scheduleRoutes(deps));
  app.use('/console/api', webhookRoutes(deps));
  // Its own path and auth (api/console/auth.ts): the console router's middleware never runs for it.
  app.use('/console/api/tool-providers', toolProviderRoutes(deps));
  // Model providers and the workspace's credentials for them (docs/models.md): its own path and auth.
  app.use('/console/api/model-providers', modelProviderRoutes(deps));
  // /console/api/datasets… (docs/knowledge.md): its own auth (api/console/auth.ts); other paths pass through.
  app.use('/console/api', knowledgeRoutes({ ...deps, embed: deps.embed ?? createEmbedder(createDefaultProviders(deps.config)) }));
  // GET /console/api/apps/{app_id}/agent/logs (issue 18): its own auth (api/console/auth.ts); other paths pass through.
  app.use('/console/api', agentLogRoutes(deps));
  app.use('/console/api', monitoringRoutes(deps));
  // The studio's reads (api/console/studio.ts): apps list, one version, a turn's run facts; its own auth.
  app.use('/console/api', studioRoutes(deps));
  // An app's API keys (create, revoke) and version restore (api/console/admin.ts); its own auth.
  app.use('/console/api', consoleAdminRoutes(deps));
  // The app list's copy and delete (api/console/apps.ts); its own auth.
  app.use('/console/api', consoleAppRoutes(deps));
  app.use('/console/api', consoleRoutes(deps));

  app.use(unknownRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
