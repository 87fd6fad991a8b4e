/**
 * What the studio page (web/studio.html, issue 19) needs beyond the agent's console routes: the caller's tenant's
 * agent apps, one published version's config (to diff two versions), its annotations, and a turn's run facts for the inspector —
 * its Temporal workflow (with a link into the Temporal UI when TEMPORAL_UI_URL is known) and the backend run id.
 * Console key (api/console/auth.ts); another tenant's app or another app's message read as missing (404).
 */
import { ModelInputPart } from '../../core/domain/llm/model-input.js';
import { Router, type Request } from 'express';
import { z } from 'zod';
import { findVersion } from '../../core/domain/agent-configs.js';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { unixSeconds } from '../../core/platform/time.js';
import { consoleApp, consoleAuth, consoleCaller } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { pageJson, pageOf } from '../pagination.js';
import { builtinToolList } from '../../core/protocol/builtin-tools.js';

const PageFields = { has_more: z.boolean(), limit: z.number().int(), total: z.number().int(), page: z.number().int() };

export const StudioAppList = z.object({
  ...PageFields,
  data: z.array(
    z.object({
      id: Uuid,
      name: z.string(),
      icon: z.string(),
      description: z.string(),
      mode: z.string(),
      agent_id: Uuid,
      active_version_id: Uuid.nullable().describe('The published version service turns run on.'),
      annotation_reply: z.object({ enabled: z.boolean(), score_threshold: z.number() }),
      created_at: z.number().int(),
    }),
  ),
});

export const AgentVersionResponse = z.object({
  id: Uuid,
  version: z.number().int(),
  active: z.boolean(),
  config: z.record(z.string(), z.unknown()).describe('The soul config as published.'),
  created_by: z.string().nullable(),
  created_at: z.number().int(),
});

export const AnnotationListResponse = z.object({
  ...PageFields,
  data: z.array(
    z.object({ id: Uuid, question: z.string(), content: z.string(), hit_count: z.number().int(), created_at: z.number().int() }),
  ),
});

/** What each model request of a turn was sent (the inspector's context view; api/inner/llm.ts records it). */
export const ModelInputsResponse = z.object({
  message_id: Uuid,
  data: z.array(z.object({ call_index: z.number().int(), total_tokens: z.number().int(), parts: z.array(ModelInputPart) })),
});

export const TurnRunResponse = z.object({
  message_id: Uuid,
  conversation_id: Uuid,
  invoke_from: z.string(),
  turn_status: z.string(),
  answer: z.string().describe('The answer so far (the text deltas, collapsed).'),
  error: z.string().nullable(),
  error_code: z.string().nullable(),
  usage: z.unknown().describe("The turn's usage as in message_end (null before the turn ends)."),
  workflow_id: z.string().describe("The Temporal workflow of the turn (an ask_human continuation shares its paused turn's)."),
  backend_run_id: z.string().nullable().describe("The agent backend's run id (null before the run was created)."),
  temporal: z.object({
    namespace: z.string(),
    workflow_url: z
      .string()
      .nullable()
      .describe('`{TEMPORAL_UI_URL}/namespaces/{namespace}/workflows/{workflow_id}`; null without a UI URL.'),
  }),
});

/** The builtin shelf as the studio's tool checkboxes read it: core/protocol/builtin-tools.ts, the backend's own contract. */
export const BuiltinToolListResponse = z.object({
  data: z.array(
    z.object({
      name: z.string().describe('The name to put in `tools.core` (and the model-facing tool name).'),
      label: z.string(),
      description: z.string().describe('What the model reads.'),
      category: z.string(),
      network: z.boolean().describe('It reaches the network (through the SSRF guard).'),
      sandbox: z.boolean().describe("It runs in the agent's sandbox: only with runtime and shell on."),
      parameters: z.record(z.string(), z.unknown()).describe('JSON schema of its arguments (from the zod schema the backend checks).'),
    }),
  ),
});

export function studioRoutes(deps: { db: Db; config: Pick<Config, 'TEMPORAL_NAMESPACE' | 'TEMPORAL_UI_URL'> }): Router {
  const { db, config } = deps;
  const r = Router();

  r.get('/builtin-tools', consoleAuth(db), (_req, res) => {
    res.json(BuiltinToolListResponse.parse({ data: builtinToolList() }));
  });

  r.get('/apps', consoleAuth(db), async (req: Request, res) => {
    const { tenantId } = consoleCaller(req);
    // Only agent apps: the studio edits an app through its agent. Paginated (Dify's page/limit, api/pagination.ts).
    const page = pageOf(req.query);
    const where = { tenant_id: tenantId, agent: { isNot: null } };
    const [total, apps] = await Promise.all([
      db.app.count({ where }),
      db.app.findMany({
        where,
        include: { agent: true },
        orderBy: [{ created_at: 'asc' }, { id: 'asc' }],
        skip: page.skip,
        take: page.take,
      }),
    ]);
    res.json(
      StudioAppList.parse({
        ...pageJson(page, total, []),
        data: apps.map((a) => ({
          id: a.id,
          name: a.name,
          icon: a.icon,
          description: a.description,
          mode: a.mode,
          agent_id: a.agent!.id,
          active_version_id: a.agent!.active_config_snapshot_id,
          annotation_reply: { enabled: a.annotation_reply_enabled, score_threshold: a.annotation_score_threshold },
          created_at: unixSeconds(a.created_at),
        })),
      }),
    );
  });

  r.get('/apps/:app_id/agent/versions/:version_id', consoleAuth(db), async (req: Request, res) => {
    const { agent } = await consoleApp(db, req);
    const v = await findVersion(db, agent.id, parseOr400(Uuid, req.params.version_id, 'version_id'));
    if (!v) throw new HttpError(404, 'agent_version_not_found', 'Version not found.');
    res.json({
      id: v.id,
      version: v.version,
      active: v.id === agent.active_config_snapshot_id,
      config: v.config_snapshot,
      created_by: v.created_by,
      created_at: unixSeconds(v.created_at),
    });
  });

  /** The app's annotations, newest first (POST …/annotations adds one; api/console/agent.ts). */
  r.get('/apps/:app_id/annotations', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const page = pageOf(req.query);
    const [total, rows] = await Promise.all([
      db.annotation.count({ where: { app_id: app.id } }),
      db.annotation.findMany({
        where: { app_id: app.id },
        orderBy: [{ created_at: 'desc' }, { id: 'desc' }],
        skip: page.skip,
        take: page.take,
      }),
    ]);
    res.json({
      ...pageJson(page, total, []),
      data: rows.map((a) => ({
        id: a.id,
        question: a.question,
        content: a.content,
        hit_count: a.hit_count,
        created_at: unixSeconds(a.created_at),
      })),
    });
  });

  /** The messages each model request of the turn was sent, part by part with token counts (another app's turn: 404). */
  r.get('/apps/:app_id/agent/messages/:message_id/model-inputs', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.message_id, 'message_id');
    const m = await db.message.findFirst({ where: { id, app_id: app.id }, select: { id: true, tenant_id: true } });
    if (!m) throw new HttpError(404, 'message_not_found', 'Message not found.');
    const rows = await db.messageModelInput.findMany({
      where: { message_id: m.id, tenant_id: m.tenant_id },
      orderBy: { call_index: 'asc' },
    });
    const body: z.infer<typeof ModelInputsResponse> = {
      message_id: m.id,
      data: rows.map((r) => {
        const parts = z.array(ModelInputPart).catch([]).parse(r.parts);
        return { call_index: r.call_index, total_tokens: parts.reduce((n, p) => n + p.tokens, 0), parts };
      }),
    };
    res.json(body);
  });

  /** Any turn of the app (service or debugger), like the agent log: the inspector's run facts. */
  r.get('/apps/:app_id/agent/messages/:message_id/run', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.message_id, 'message_id');
    const m = await db.message.findFirst({ where: { id, app_id: app.id }, include: { agent_run: { select: { backend_run_id: true } } } });
    if (!m) throw new HttpError(404, 'message_not_found', 'Message not found.');
    const ns = config.TEMPORAL_NAMESPACE;
    const ui = config.TEMPORAL_UI_URL?.replace(/\/+$/, '');
    res.json({
      message_id: m.id,
      conversation_id: m.conversation_id,
      invoke_from: m.invoke_from,
      turn_status: m.status,
      answer: m.answer,
      error: m.error,
      error_code: m.error_code,
      usage: m.usage ?? null,
      workflow_id: m.workflow_id,
      backend_run_id: m.agent_run?.backend_run_id ?? null,
      temporal: {
        namespace: ns,
        workflow_url: ui ? `${ui}/namespaces/${encodeURIComponent(ns)}/workflows/${encodeURIComponent(m.workflow_id)}` : null,
      },
    });
  });

  return r;
}
