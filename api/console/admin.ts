/**
 * The studio's app administration (issue 34 item 2), under /console/api with its own console-key auth: an app's API
 * keys — listed by prefix (the key itself is shown once, at creation, and only its SHA-256 is stored), created,
 * revoked (the next /v1 call with it is a 401, on other replicas once the revoke's NOTIFY reached them and within the
 * auth cache's 5 s at worst; its open streams end; docs/operations.md "Secrets rotation") — and version
 * restore: a past published version published again as a new version (what service turns then run on), or loaded
 * into the shared draft to edit. Either way the version's config is validated again first (a dataset or tool
 * provider deleted since is a 400 invalid_agent_config, like a save). Another tenant's app reads as missing (404).
 */
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { findSharedDraft, findVersion, publishVersion, updateDraft } from '../../core/domain/agent-configs.js';
import { createUniqueAgentApp, type AgentAppIds } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import { generateAppApiKey } from '../../core/domain/api-keys.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { devDefaultSecrets, type Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { unixSeconds } from '../../core/platform/time.js';
import { validatedSoul } from './agent-config-validation.js';
import { evictAppKey } from '../auth.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import { requestStop } from '../turns/stop.js';
import { consoleApp, consoleAuth, consoleCaller } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { pageJson, pageOf } from '../pagination.js';
import { Uuid } from '../schemas.js';

export const CreateAppBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    icon: z.string().trim().min(1).max(16).optional().describe('An emoji (default 🤖).'),
    description: z.string().trim().max(400).default(''),
    model: z
      .object({ provider: z.string().trim().min(1).max(64), model: z.string().trim().min(1).max(200) })
      .strict()
      .optional()
      .describe('The agent’s model (default: the demo model); a provider the workspace cannot use is refused like a save.'),
    system_prompt: z.string().max(100_000).optional().describe('The agent’s system prompt (its first prompt).'),
  })
  .strict();
export const CreatedAppResponse = z.object({
  id: Uuid,
  name: z.string(),
  icon: z.string(),
  description: z.string(),
  mode: z.literal('agent'),
  agent_id: Uuid,
  active_version_id: Uuid.describe('Version 1, published from the first config (the shared draft starts from it).'),
  config: z.record(z.string(), z.unknown()).describe('That first config.'),
  created_at: z.number().int(),
});

/** The 201 body of a new app, the studio's "New agent" and an app's copy alike. */
export function createdAppView(
  app: { id: string; name: string; icon: string; description: string; created_at: Date },
  ids: AgentAppIds,
  config: Record<string, unknown>,
) {
  return CreatedAppResponse.parse({
    id: app.id,
    name: app.name,
    icon: app.icon,
    description: app.description,
    mode: 'agent',
    agent_id: ids.agentId,
    active_version_id: ids.configVersionId,
    config,
    created_at: unixSeconds(app.created_at),
  });
}

export const CreateApiKeyBody = z.object({ name: z.string().trim().min(1).max(100).default('default') }).strict();
export const RevokeApiKeyQuery = z.object({
  stop_turns: z
    .enum(['true', 'false'])
    .default('false')
    .describe(
      '`true`: also stop the turns the key started that are still running, queued or waiting for a human, as the stop endpoint does (each ends `stopped` with its partial answer and usage). Default: they go on; only the key’s open streams end.',
    ),
});
export const StoppedTurn = z.object({
  task_id: Uuid.describe('The message id (what the service API’s stop and events routes take).'),
  conversation_id: Uuid,
  status: z
    .enum(['pending', 'running', 'paused', 'queued'])
    .describe('Its status when the stop was requested (`paused`: waiting for a human).'),
});
export const RevokeApiKeyResponse = z.object({
  result: z.literal('success'),
  stopped_turns: z
    .array(StoppedTurn)
    .describe('The turns a stop was requested for; each ends `stopped` once its workflow has saved its state and usage.'),
});
export const RestoreVersionBody = z
  .object({
    to: z
      .enum(['publish', 'draft'])
      .default('draft')
      .describe('`publish`: a new version with this config (turns run on it); `draft`: the shared draft takes this config.'),
  })
  .strict();

const ApiKeyView = z.object({
  id: Uuid,
  name: z.string(),
  prefix: z.string().describe('The first characters of the key (`app-xxxx`), to tell keys apart; the key itself is never shown again.'),
  created_at: z.number().int(),
  last_used_at: z.number().int().nullable(),
  revoked_at: z.number().int().nullable(),
});
export const ApiKeyListResponse = z.object({
  data: z.array(ApiKeyView),
  has_more: z.boolean(),
  limit: z.number().int(),
  total: z.number().int(),
  page: z.number().int(),
});
export const CreatedApiKeyResponse = ApiKeyView.extend({ key: z.string().describe('The key, shown this once.') });
export const RestoreVersionResponse = z.object({
  restored_from: z.object({ id: Uuid, version: z.number().int() }),
  to: z.enum(['publish', 'draft']),
  version: z
    .object({ id: Uuid, version: z.number().int(), created_at: z.number().int() })
    .nullable()
    .describe('The new version (`publish`).'),
  draft: z.object({ id: Uuid, revision: z.number().int() }).nullable().describe('The shared draft after the load (`draft`).'),
});

type Token = { id: string; name: string; token_prefix: string; created_at: Date; last_used_at: Date | null; revoked_at: Date | null };
const keyView = (t: Token) => ({
  id: t.id,
  name: t.name,
  prefix: t.token_prefix,
  created_at: unixSeconds(t.created_at),
  last_used_at: t.last_used_at ? unixSeconds(t.last_used_at) : null,
  revoked_at: t.revoked_at ? unixSeconds(t.revoked_at) : null,
});

export interface ConsoleAdminDeps {
  db: Db;
  config: Config;
  logger: Logger;
  backend: Pick<AgentBackendClient, 'validateComposition' | 'cancelRun'>;
  /** A revoke with ?stop_turns=true stops turns the way the stop endpoint does (api/turns/stop.ts). */
  outbox: OutboxDispatcher;
}

/** What a stop can still end: a turn in flight, one waiting for a human (paused) and one queued behind it. */
const STOPPABLE = ['queued', 'pending', 'running', 'paused'] as const;

export function consoleAdminRoutes(deps: ConsoleAdminDeps): Router {
  const { db } = deps;
  const soulDeps = {
    db,
    backend: deps.backend,
    logger: deps.logger,
    signingKeyIsDefault: devDefaultSecrets(deps.config).includes('EXECUTION_CONTEXT_SIGNING_KEY'),
  };
  const r = Router();
  const auth = consoleAuth(db);
  const body: RequestHandler[] = jsonBody({ limit: '64kb', maxDepth: deps.config.JSON_MAX_DEPTH, rejectNul: true });

  /**
   * A new agent app: the demo agent's tools and switches with the given model and system prompt, checked as a save is
   * (400 invalid_agent_config naming the field), published as version 1 with a shared draft from it. The name is
   * unique in the tenant (409 app_name_taken).
   */
  r.post('/apps', auth, ...body, async (req: Request, res: Response) => {
    const { tenantId, accountId } = consoleCaller(req);
    const b = parseOr400(CreateAppBody, req.body ?? {});
    const soul = demoSoulConfig();
    if (b.system_prompt !== undefined) soul.prompt = { ...soul.prompt, system_prompt: b.system_prompt };
    if (b.model) soul.model = { provider: b.model.provider, model: b.model.model, model_settings: {} };
    // The demo agent's greeting and suggestions name the demo's triggers: a new agent starts without them.
    soul.features = { ...soul.features, opening_statement: '', suggested_questions: [] };
    const config = await validatedSoul(soulDeps, { tenantId, soul });
    const ids = await createUniqueAgentApp(
      db,
      { tenantId, name: b.name, description: b.description, icon: b.icon, createdBy: accountId },
      config,
    );
    if (!ids) throw new HttpError(409, 'app_name_taken', `This workspace already has an app named "${b.name}".`);
    const app = await db.app.findUniqueOrThrow({ where: { id: ids.appId } });
    res.status(201).json(createdAppView(app, ids, config));
  });

  r.get('/apps/:app_id/api-keys', auth, async (req, res) => {
    const { app } = await consoleApp(db, req);
    const page = pageOf(req.query);
    const where = { app_id: app.id };
    const [total, rows] = await Promise.all([
      db.apiToken.count({ where }),
      db.apiToken.findMany({ where, orderBy: [{ created_at: 'desc' }, { id: 'asc' }], skip: page.skip, take: page.take }),
    ]);
    res.json(pageJson(page, total, rows.map(keyView)));
  });

  r.post('/apps/:app_id/api-keys', auth, ...body, async (req: Request, res: Response) => {
    const { app } = await consoleApp(db, req);
    const { name } = parseOr400(CreateApiKeyBody, req.body ?? {});
    const { key, hash, prefix } = generateAppApiKey();
    const row = await db.apiToken.create({
      data: { tenant_id: app.tenant_id, app_id: app.id, token_hash: hash, token_prefix: prefix, name },
    });
    res.status(201).json({ ...keyView(row), key });
  });

  /**
   * Revoke (kept, with revoked_at, so the list says when); revoking again is a no-op that answers the same. The
   * update's trigger NOTIFYs every api replica, whose credential watch ends the key's open streams with an `error`
   * event `api_key_revoked` (api/credential-watch.ts); its turns go on unless `?stop_turns=true`, which stops them
   * through the stop endpoint's path (queued first, so none is started in between) and answers which.
   */
  r.delete('/apps/:app_id/api-keys/:key_id', auth, async (req, res) => {
    const { app } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.key_id, 'key_id');
    const { stop_turns } = parseOr400(RevokeApiKeyQuery, req.query);
    const row = await db.apiToken.findFirst({ where: { id, app_id: app.id } });
    if (!row) throw new HttpError(404, 'api_key_not_found', 'No such API key for this app.');
    if (!row.revoked_at) await db.apiToken.update({ where: { id }, data: { revoked_at: new Date() } });
    evictAppKey(row.token_hash);
    if (stop_turns !== 'true') return void res.status(204).end();
    const turns = await db.message.findMany({
      where: { api_token_id: id, app_id: app.id, status: { in: [...STOPPABLE] } },
      select: { id: true, conversation_id: true, workflow_id: true, status: true },
    });
    turns.sort(
      (a, b) => STOPPABLE.indexOf(a.status as (typeof STOPPABLE)[number]) - STOPPABLE.indexOf(b.status as (typeof STOPPABLE)[number]),
    );
    for (const m of turns) await requestStop(deps, m);
    deps.logger.info({ api_token_id: id, app_id: app.id, stopped: turns.length }, 'app key revoked; its turns stopped');
    res.json(
      RevokeApiKeyResponse.parse({
        result: 'success',
        stopped_turns: turns.map((m) => ({ task_id: m.id, conversation_id: m.conversation_id, status: m.status })),
      }),
    );
  });

  r.post('/apps/:app_id/agent/versions/:version_id/restore', auth, ...body, async (req: Request, res: Response) => {
    const { app, agent, ctx } = await consoleApp(db, req);
    const { to } = parseOr400(RestoreVersionBody, req.body ?? {});
    const versionId = parseOr400(Uuid, req.params.version_id, 'version_id');
    const v = await findVersion(db, agent.id, versionId);
    if (!v) throw new HttpError(404, 'agent_version_not_found', 'No such version of this agent.');
    const config = await validatedSoul(soulDeps, { tenantId: ctx.tenantId, soul: v.config_snapshot, appId: app.id, agentId: agent.id });
    const restored_from = { id: v.id, version: v.version };
    if (to === 'publish') {
      const nv = await db.$transaction((tx) =>
        publishVersion(tx, { tenantId: ctx.tenantId, agentId: agent.id, createdBy: ctx.accountId }, config),
      );
      res
        .status(201)
        .json({ restored_from, to, version: { id: nv.id, version: nv.version, created_at: unixSeconds(nv.created_at) }, draft: null });
      return;
    }
    const d = await findSharedDraft(db, agent.id);
    if (!d) throw new HttpError(404, 'agent_draft_not_found', 'The agent has no draft.');
    const saved = await updateDraft(db, d.id, config);
    res.json({ restored_from, to, version: null, draft: { id: saved.id, revision: saved.revision } });
  });

  return r;
}
