/**
 * App metadata (Dify service API): GET /v1/parameters from the agent's active soul config features
 * (opening statement, suggested questions, file upload with our size limits), GET /v1/info and
 * GET /v1/meta. Features Agent Apps don't have here are reported disabled, in Dify's shape.
 *
 * /v1/parameters advertises only what really works (issue 13 item 7): a file type is offered only where its
 * files reach the agent — images when the model takes them natively (vision), documents when the agent has a
 * workspace and a shell to open them in (activities/prepare/workspace-files.ts; without one a document would only be a
 * link in the prompt, which no model here can fetch). Extension `multitask_strategy`: the app's default (issue 35),
 * so a client knows what a follow-up sent during a turn does. `retriever_resource`: on when the agent retrieves from
 * knowledge with the feature on — its answers then carry Dify's `retriever_resources` (a deviation from seed 001's
 * Agent App, which returns none; docs/knowledge.md "Citations"). Runtime/shell have no Dify field.
 */
import { Router } from 'express';
import type { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { appCtx, type AppContext } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { UserQuery, type AppInfoResponse, type ParametersResponse } from '../schemas.js';
import { FILE_TYPES, UPLOAD_LIMITS } from '../../core/domain/uploads.js';
import { createDefaultProviders, type ProviderConfig } from '../../core/domain/llm/providers/index.js';
import { resolveTenantModel } from '../../core/domain/llm/tenant-model.js';

const off = { enabled: false };
const METHODS = ['local_file', 'remote_url'] as const;

export interface AppInfoDeps {
  db: Db;
  config: ProviderConfig;
  /** Whether the model takes images natively; default: the deployment's model providers say, for this tenant. */
  modelSupportsVision?: ModelVision;
}

/** Whether `provider/model` takes images for `tenantId` (a tenant's declared model says so itself). */
export type ModelVision = (provider: string, model: string, tenantId: string) => boolean | Promise<boolean>;

/** The deployment's providers' word on vision, with the tenant's declared models (core/domain/llm/tenant-model.ts). */
export function tenantVision(db: Db, config: ProviderConfig & { ENCRYPTION_KEY?: string }): ModelVision {
  let providers: ReturnType<typeof createDefaultProviders> | undefined;
  return async (p, m, tenantId) =>
    (await resolveTenantModel(db, config.ENCRYPTION_KEY, (providers ??= createDefaultProviders(config)), tenantId, p, m))
      ?.supports_vision ?? false;
}

/** Which upload kinds reach the agent with this soul on this deployment. */
export function reachableFileKinds(soul: AgentSoulConfig, supportsVision: boolean): { image: boolean; document: boolean } {
  const upload = soul.features.file_upload;
  return {
    // A text-only model with a workspace and shell gets the image as a file it can work on (seed 000's fallback).
    image: upload.enabled && upload.image_enabled && (supportsVision || (soul.runtime.enabled && soul.shell.enabled)),
    document: upload.enabled && soul.runtime.enabled && soul.shell.enabled,
  };
}

export function appInfoRoutes(deps: AppInfoDeps): Router {
  const r = Router();
  const { db } = deps;
  const supportsVision = deps.modelSupportsVision ?? tenantVision(db, deps.config);

  async function activeSoul(app: AppContext) {
    const agent = app.agentId
      ? await db.agent.findUnique({ where: { id: app.agentId }, include: { active_config_snapshot: true, app: true } })
      : null;
    const parsed = AgentSoulConfig.safeParse(agent?.active_config_snapshot?.config_snapshot ?? null);
    if (!agent || !parsed.success) throw new HttpError(400, 'app_unavailable', 'App unavailable, please check your app configurations.');
    return { soul: parsed.data, app: agent.app };
  }

  r.get('/parameters', async (req, res) => {
    parseOr400(UserQuery, req.query, 'query');
    const { soul, app } = await activeSoul(appCtx(req));
    const f = soul.features;
    const reach = reachableFileKinds(soul, await supportsVision(soul.model.provider, soul.model.model, app.tenant_id));
    const types = (['image', 'document'] as const).filter((k) => reach[k]);
    const uploads = types.length > 0;
    const body: z.input<typeof ParametersResponse> = {
      opening_statement: f.opening_statement,
      suggested_questions: f.suggested_questions,
      // Dify's follow-up questions after each answer (GET /v1/messages/{id}/suggested, api/service/suggested.ts).
      suggested_questions_after_answer: { enabled: f.suggested_questions_after_answer.enabled },
      speech_to_text: off,
      text_to_speech: off,
      // Dify's citations (issue 42 problem 6): knowledge answers carry the chunks they were given.
      retriever_resource: { enabled: soul.knowledge.enabled && f.retriever_resource.enabled },
      annotation_reply: { enabled: app.annotation_reply_enabled },
      more_like_this: off,
      // Keyword moderation with no keyword can never hit (activities/prepare/input-guards.ts, the output guard).
      sensitive_word_avoidance: { enabled: (f.moderation.enabled || f.moderation.output_enabled) && f.moderation.keywords.length > 0 },
      user_input_form: [],
      file_upload: {
        enabled: uploads,
        allowed_file_types: [...types],
        allowed_file_extensions: Object.entries(FILE_TYPES)
          .filter(([, t]) => reach[t.kind])
          .map(([ext]) => `.${ext}`),
        allowed_file_upload_methods: uploads ? [...METHODS] : [],
        number_limits: uploads ? f.file_upload.max_files : 0,
        image: {
          enabled: reach.image,
          number_limits: reach.image ? f.file_upload.max_files : 0,
          detail: 'high',
          transfer_methods: reach.image ? [...METHODS] : [],
        },
      },
      system_parameters: {
        file_size_limit: reach.document ? UPLOAD_LIMITS.documentMb : 0,
        image_file_size_limit: reach.image ? UPLOAD_LIMITS.imageMb : 0,
        audio_file_size_limit: 0,
        video_file_size_limit: 0,
        workflow_file_upload_limit: uploads ? f.file_upload.max_files : 0,
      },
      // Extension: a client (the chat page) knows whether a follow-up may be sent while a turn runs.
      multitask_strategy: app.multitask_strategy,
    };
    res.json(body);
  });

  r.get('/info', async (req, res) => {
    const ctx = appCtx(req);
    const app = await db.app.findUnique({ where: { id: ctx.appId } });
    if (!app) throw new HttpError(404, 'app_not_found', 'App not found.');
    const body: z.input<typeof AppInfoResponse> = { name: app.name, description: app.description, tags: [], mode: 'agent' };
    res.json(body);
  });

  /** Dify's tool icon map; Agent Apps here have no tool icons to show. */
  r.get('/meta', (req, res) => {
    appCtx(req);
    res.json({ tool_icons: {} });
  });

  return r;
}
