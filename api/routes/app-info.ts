/**
 * App metadata (Dify service API): GET /v1/parameters from the agent's active soul config features
 * (opening statement, suggested questions, file upload with our size limits), GET /v1/info and
 * GET /v1/meta. Features Agent Apps don't have here are reported disabled, in Dify's shape.
 */
import { Router } from 'express';
import type { z } from 'zod';
import type { Db } from '../../core/db.js';
import { AgentSoulConfig } from '../../core/soul.js';
import { appCtx, type AppContext } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { UserQuery, type AppInfoResponse, type ParametersResponse } from '../schemas.js';
import { FILE_TYPES, UPLOAD_LIMITS } from '../../core/uploads.js';

const off = { enabled: false };
const METHODS = ['local_file', 'remote_url'] as const;

export function appInfoRoutes(deps: { db: Db }): Router {
  const r = Router();
  const { db } = deps;

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
    const types = f.file_upload.image_enabled ? ['image', 'document'] : ['document'];
    const body: z.input<typeof ParametersResponse> = {
      opening_statement: f.opening_statement,
      suggested_questions: f.suggested_questions,
      suggested_questions_after_answer: off,
      speech_to_text: off,
      text_to_speech: off,
      retriever_resource: { enabled: soul.knowledge.enabled },
      annotation_reply: { enabled: app.annotation_reply_enabled },
      more_like_this: off,
      sensitive_word_avoidance: { enabled: f.moderation.enabled },
      user_input_form: [],
      file_upload: {
        enabled: f.file_upload.enabled,
        allowed_file_types: types,
        allowed_file_extensions: Object.entries(FILE_TYPES)
          .filter(([, t]) => types.includes(t.kind))
          .map(([ext]) => `.${ext}`),
        allowed_file_upload_methods: [...METHODS],
        number_limits: f.file_upload.max_files,
        image: {
          enabled: f.file_upload.enabled && f.file_upload.image_enabled,
          number_limits: f.file_upload.max_files,
          detail: 'high',
          transfer_methods: [...METHODS],
        },
      },
      system_parameters: {
        file_size_limit: UPLOAD_LIMITS.documentMb,
        image_file_size_limit: UPLOAD_LIMITS.imageMb,
        audio_file_size_limit: 0,
        video_file_size_limit: 0,
        workflow_file_upload_limit: f.file_upload.max_files,
      },
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
