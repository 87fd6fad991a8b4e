/**
 * Console API (`/console/api`, `Authorization: Bearer <console key>` of an account): edit the agent's
 * shared draft and one's personal build draft, publish a draft as a new immutable version, list versions,
 * merge a build draft into the shared draft (conflict-checked on the shared draft's revision), manage annotations,
 * and run debugger turns against a draft (invoke_from `debugger`, docs/seeds/000) — stopped, re-attached and
 * answered through api/console/debugger.ts.
 */
import { type Request, Router } from 'express';
import { z } from 'zod';
import { MultitaskSettings } from '../schemas.js';
import {
  ensureBuildDraft,
  findBuildDraft,
  findSharedDraft,
  listVersions,
  mergeBuildDraft,
  publishVersion,
  saveBuildDraft,
  updateDraft,
} from '../../core/domain/agent-configs.js';
import { devDefaultSecrets } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { validatedSoul } from './agent-config-validation.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { retireBuildDraftBinding } from '../../core/domain/turn/bindings.js';
import { buildComposition } from '../../core/domain/soul-composition.js';
import type { AppContext } from '../auth.js';
import { consoleApp } from './auth.js';
import { consoleAuth } from './auth.js';
import { createRateLimits } from '../rate-limit.js';
import { HttpError, parseOr400 } from '../errors.js';
import { streamTurn } from '../turns/stream.js';
import { consoleDebuggerRoutes, DebugChat, type ConsoleDebuggerDeps } from './debugger.js';
import { consoleForkRoutes } from './fork.js';
import { startTurn, type TurnServiceDeps } from '../turns/start.js';
import { unixSeconds } from '../../core/platform/time.js';
import { pageJson, pageOf } from '../pagination.js';

interface ConsoleCtx {
  tenantId: string;
  accountId: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    consoleCtx?: ConsoleCtx;
  }
}

/** The config itself is checked by validatedSoul (schema, datasets, tool providers, the backend's registry). */
const DraftBody = z.object({ config: z.record(z.string(), z.unknown()) });
/** `base_revision`: the shared draft's revision this build draft now builds on (a rebase after resolving a conflict). */
const BuildDraftBody = DraftBody.extend({ base_revision: z.number().int().min(1).optional() });
const MergeBody = z.object({ force: z.boolean().default(false) });
const PublishBody = z.object({ from: z.enum(['draft', 'build-draft']).default('draft') });
export const AnnotationBody = z.object({ question: z.string().min(1).max(2000), content: z.string().min(1).max(20_000) });
export const AnnotationSettings = z.object({ enabled: z.boolean(), score_threshold: z.number().min(0).max(1).default(0.8) });

type ConsoleRouteDeps = TurnServiceDeps &
  Omit<ConsoleDebuggerDeps, 'backend'> & { backend: Pick<AgentBackendClient, 'validateComposition' | 'cancelRun'> };
type SoulDeps = ReturnType<typeof soulDepsOf>;

/**
 * The console's agent routes behind the console key, a body guard and the console's limits: the drafts, publishing and
 * versions, the app's settings, the debugger's turn, then the debugger's and fork's own routers.
 */
export function consoleRoutes(deps: ConsoleRouteDeps): Router {
  const { db } = deps;
  const r = Router();
  r.use(consoleAuth(db));
  // Bodies are read only once the console key is known: 1 MB, JSON_MAX_DEPTH deep, no NUL anywhere.
  r.use(jsonBody({ limit: '1mb', maxDepth: deps.config.JSON_MAX_DEPTH, rejectNul: true }));
  // Per console key and account (docs/security.md): request rate, open debugger streams, debugger turns in progress.
  r.use(createRateLimits(deps).consoleMiddleware);
  const soulDeps = soulDepsOf(deps);
  draftRoutes(r, deps, soulDeps);
  versionRoutes(r, deps, soulDeps);
  appSettingRoutes(r, deps);
  debugChatRoute(r, deps);
  // Stop, re-attach, forms and history of the caller's debugger turns (behind the console key above).
  r.use(consoleDebuggerRoutes(deps));
  r.use(consoleForkRoutes(deps));
  return r;
}

/** What validating and saving a config needs. */
function soulDepsOf(deps: ConsoleRouteDeps) {
  return {
    db: deps.db,
    backend: deps.backend,
    logger: deps.logger,
    // Issue 27: no workspace is authorized on the public signing key, so a config with a runtime would not run.
    signingKeyIsDefault: devDefaultSecrets(deps.config).includes('EXECUTION_CONTEXT_SIGNING_KEY'),
  };
}

/** The app and its agent, in the caller's tenant only (404 otherwise). */
const appOf = (db: Db, req: Request) => consoleApp(db, req);

type DraftRow = Awaited<ReturnType<typeof sharedDraft>>;
async function sharedDraft(db: Db, agentId: string) {
  const d = await findSharedDraft(db, agentId);
  if (!d) throw new HttpError(404, 'agent_draft_not_found', 'The agent has no draft.');
  return d;
}

const draftJson = (d: DraftRow) => ({
  id: d.id,
  draft_type: d.draft_type,
  config: d.config,
  base_version_id: d.base_version_id,
  revision: d.revision,
  base_revision: d.base_draft_revision,
  updated_at: unixSeconds(d.updated_at),
});

/** The shared draft, the caller's build draft and its merge. */
function draftRoutes(r: Router, deps: ConsoleRouteDeps, soulDeps: SoulDeps): void {
  const { db } = deps;
  r.get('/apps/:app_id/agent/draft', async (req, res) => {
    const { agent } = await appOf(db, req);
    res.json(draftJson(await sharedDraft(db, agent.id)));
  });

  r.put('/apps/:app_id/agent/draft', async (req, res) => {
    const { app, agent, ctx } = await appOf(db, req);
    const body = parseOr400(DraftBody, req.body);
    const d = await sharedDraft(db, agent.id);
    const config = await validatedSoul(soulDeps, { tenantId: ctx.tenantId, soul: body.config, appId: app.id, agentId: agent.id });
    // Drafts are edited in place: their id cannot prove a retained snapshot still fits (docs/seeds/000), so the
    // topology check at run time does.
    res.json(draftJson(await updateDraft(db, d.id, config)));
  });

  r.get('/apps/:app_id/agent/build-draft', async (req, res) => {
    const { agent, ctx } = await appOf(db, req);
    const d = await findBuildDraft(db, agent.id, ctx.accountId);
    if (!d) throw new HttpError(404, 'agent_build_draft_not_found', 'You have no build draft for this agent.');
    res.json(draftJson(d));
  });

  r.put('/apps/:app_id/agent/build-draft', async (req, res) => {
    const { app, agent, ctx } = await appOf(db, req);
    const body = parseOr400(BuildDraftBody, req.body);
    if (body.base_revision !== undefined) {
      const shared = await sharedDraft(db, agent.id);
      if (body.base_revision > shared.revision)
        throw new HttpError(400, 'invalid_param', `base_revision: the shared draft is at revision ${shared.revision}.`);
    }
    const config = await validatedSoul(soulDeps, { tenantId: ctx.tenantId, soul: body.config, appId: app.id, agentId: agent.id });
    const before = await findBuildDraft(db, agent.id, ctx.accountId);
    const d = await saveBuildDraft(
      db,
      {
        tenantId: ctx.tenantId,
        agentId: agent.id,
        accountId: ctx.accountId,
        baseVersionId: agent.active_config_snapshot_id,
        baseDraftRevision: body.base_revision,
      },
      config,
    );
    // Another layer topology: the draft's retained session cannot continue (issue 31); its next turn starts afresh.
    if (before && topologyOf(before.config) !== topologyOf(config)) await retireBuildDraftBinding(db, deps.config, d.id);
    res.json(draftJson(d));
  });

  /** Discard the caller's build draft (issue 31): the draft and its binding (with its workspace) are gone. */
  r.delete('/apps/:app_id/agent/build-draft', async (req, res) => {
    const { agent, ctx } = await appOf(db, req);
    const build = await findBuildDraft(db, agent.id, ctx.accountId);
    if (!build) throw new HttpError(404, 'agent_build_draft_not_found', 'You have no build draft for this agent.');
    await retireBuildDraftBinding(db, deps.config, build.id);
    await db.agentConfigDraft.deleteMany({ where: { id: build.id, draft_type: 'BUILD_DRAFT' } });
    res.status(204).end();
  });

  /**
   * Merge the caller's build draft into the shared draft (docs/seeds/004 "draft merge"): clean when the shared draft is
   * still at the build draft's base revision, else 409 `agent_draft_conflict` (nothing changes) unless `force`.
   */
  r.post('/apps/:app_id/agent/build-draft/merge', async (req, res) => {
    const { app, agent, ctx } = await appOf(db, req);
    const { force } = parseOr400(MergeBody, req.body ?? {});
    const build = await findBuildDraft(db, agent.id, ctx.accountId);
    if (!build) throw new HttpError(404, 'agent_build_draft_not_found', 'You have no build draft for this agent.');
    // Checked like a save of the shared draft (outside the transaction: the backend's verdict is an HTTP call).
    const config = await validatedSoul(soulDeps, {
      tenantId: ctx.tenantId,
      soul: build.config,
      appId: app.id,
      agentId: agent.id,
      stored: true,
    });
    const out = await db.$transaction(async (tx) => mergeBuildDraft(tx, { shared: await sharedDraft(db, agent.id), build, config, force }));
    if (out.status === 'conflict') {
      throw new HttpError(
        409,
        'agent_draft_conflict',
        `The shared draft changed since your build draft was based on it (revision ${out.baseRevision ?? 'unknown'}, now ` +
          `${out.sharedRevision}). Merge those changes into your build draft and save it with base_revision ${out.sharedRevision}, ` +
          'or merge with force to overwrite them.',
        { shared_revision: out.sharedRevision, base_revision: out.baseRevision },
      );
    }
    // Merged: the build draft's session belonged to the draft as it was (issue 31).
    await retireBuildDraftBinding(db, deps.config, build.id);
    res.json({ draft: draftJson(out.shared), build_draft: draftJson(out.build) });
  });
}

/** Publishing a draft, and the versions. */
function versionRoutes(r: Router, deps: ConsoleRouteDeps, soulDeps: SoulDeps): void {
  const { db } = deps;
  r.post('/apps/:app_id/agent/publish', async (req, res) => {
    const { app, agent, ctx } = await appOf(db, req);
    const { from } = parseOr400(PublishBody, req.body ?? {});
    const draft = from === 'draft' ? await findSharedDraft(db, agent.id) : await findBuildDraft(db, agent.id, ctx.accountId);
    if (!draft) throw new HttpError(404, 'agent_draft_not_found', 'Nothing to publish.');
    // Checked again (a draft saved before these checks, a dataset deleted since), outside the transaction: the
    // backend's verdict is an HTTP call. What was checked is what is published.
    const config = await validatedSoul(soulDeps, {
      tenantId: ctx.tenantId,
      soul: draft.config,
      appId: app.id,
      agentId: agent.id,
      stored: true,
    });
    const version = await db.$transaction((tx) =>
      publishVersion(tx, { tenantId: ctx.tenantId, agentId: agent.id, createdBy: ctx.accountId, fromDraftId: draft.id }, config),
    );
    // Published from the build draft: its session ends with it, like a merge (issue 31).
    if (from !== 'draft') await retireBuildDraftBinding(db, deps.config, draft.id);
    res.status(201).json({ id: version.id, version: version.version, created_at: unixSeconds(version.created_at) });
  });

  r.get('/apps/:app_id/agent/versions', async (req, res) => {
    const { agent } = await appOf(db, req);
    const page = pageOf(req.query);
    const [total, rows] = await Promise.all([
      db.agentConfigVersion.count({ where: { agent_id: agent.id } }),
      listVersions(db, agent.id, { skip: page.skip, take: page.take }),
    ]);
    res.json({
      ...pageJson(page, total, []),
      data: rows.map((v) => ({
        id: v.id,
        version: v.version,
        active: v.id === agent.active_config_snapshot_id,
        created_by: v.created_by,
        created_at: unixSeconds(v.created_at),
      })),
    });
  });
}

/** The app's annotations, annotation settings and multitask strategy. */
function appSettingRoutes(r: Router, deps: ConsoleRouteDeps): void {
  const { db } = deps;
  r.post('/apps/:app_id/annotations', async (req, res) => {
    const { app, ctx } = await appOf(db, req);
    const body = parseOr400(AnnotationBody, req.body);
    const a = await db.annotation.create({ data: { tenant_id: ctx.tenantId, app_id: app.id, ...body } });
    res
      .status(201)
      .json({ id: a.id, question: a.question, content: a.content, hit_count: a.hit_count, created_at: unixSeconds(a.created_at) });
  });

  r.put('/apps/:app_id/annotation-settings', async (req, res) => {
    const { app } = await appOf(db, req);
    const body = parseOr400(AnnotationSettings, req.body);
    await db.app.update({
      where: { id: app.id },
      data: { annotation_reply_enabled: body.enabled, annotation_score_threshold: body.score_threshold },
    });
    res.json({ enabled: body.enabled, score_threshold: body.score_threshold });
  });

  /** The app's default multitask strategy (issue 35): what a chat request without `multitask_strategy` does when busy. */
  r.get('/apps/:app_id/multitask-settings', async (req, res) => {
    const { app } = await appOf(db, req);
    const row = await db.app.findUniqueOrThrow({ where: { id: app.id }, select: { multitask_strategy: true } });
    res.json({ default_strategy: row.multitask_strategy, queue_limit: deps.config.CONVERSATION_QUEUE_LIMIT });
  });

  r.put('/apps/:app_id/multitask-settings', async (req, res) => {
    const { app } = await appOf(db, req);
    const body = parseOr400(MultitaskSettings, req.body);
    await db.app.update({ where: { id: app.id }, data: { multitask_strategy: body.default_strategy } });
    res.json({ default_strategy: body.default_strategy, queue_limit: deps.config.CONVERSATION_QUEUE_LIMIT });
  });

  /** A debugger turn against the shared draft or the caller's build draft; streams like the service API. */
}

/** A debugger turn on the caller's draft, streamed. */
function debugChatRoute(r: Router, deps: ConsoleRouteDeps): void {
  const { db } = deps;
  r.post('/apps/:app_id/agent/debug/chat-messages', async (req, res) => {
    const { app, agent, ctx } = await appOf(db, req);
    const body = parseOr400(DebugChat, req.body);
    // "My build draft" before its first save: made from the shared draft now, so its first message runs (issue 42).
    if (body.draft === 'build')
      await ensureBuildDraft(db, {
        tenantId: ctx.tenantId,
        agentId: agent.id,
        accountId: ctx.accountId,
        baseVersionId: agent.active_config_snapshot_id,
      });
    const appCtx: AppContext = { tenantId: ctx.tenantId, appId: app.id, agentId: agent.id, appName: app.name };
    const turn = await startTurn(
      deps,
      appCtx,
      {
        query: body.query,
        inputs: body.inputs,
        conversation_id: body.conversation_id,
        user: ctx.accountId,
        response_mode: 'streaming',
        files: body.files,
        auto_generate_name: true,
      },
      'debugger',
      { kind: 'account', accountId: ctx.accountId, draftType: body.draft === 'build' ? 'BUILD_DRAFT' : 'DRAFT' },
    );
    await streamTurn({ db, notifier: deps.notifier, pingMs: deps.config.SSE_PING_MS }, req, res, turn.messageId, 0);
  });
}

/** The ordered layer names a turn of this config sends (what a retained session snapshot must match). */
function topologyOf(raw: unknown): string {
  const parsed = AgentSoulConfig.safeParse(raw);
  if (!parsed.success) return 'invalid';
  const layers = buildComposition(parsed.data, {
    tenantId: 't',
    appId: 'a',
    agentId: 'g',
    conversationId: 'c',
    messageId: 'm',
    userId: 'u',
    userFrom: 'account',
    invokeFrom: 'debugger',
    configVersionId: null,
    query: '',
    files: [],
    supportsVision: false,
    innerApiKey: 'topology',
    workspaceId: '00000000-0000-4000-8000-000000000000',
  });
  return layers.map((l) => l.name).join(',');
}
