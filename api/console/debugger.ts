/**
 * The console account's debugger conversations, on a par with the service API's turns (issue 19): list them and
 * their messages, re-attach to a turn's stream (Last-Event-ID), stop a turn, and read and submit its ask_human
 * form. A debugger turn belongs to the console account that started it (messages.account_id, invoke_from
 * `debugger`): another account of the tenant, or another tenant, gets 404 for all of it, never 403. Mounted by
 * api/console/agent.ts after its console-key check and body parser.
 *
 * Files (issue 43, docs/seeds/000 "Multimodal file handling"): the studio uploads with POST …/agent/debug/files/upload
 * (an upload of the console account, as POST /v1/files/upload is one of an end user), and a debugger turn sends them
 * as `files` like a service-API turn, with the same checks and refusals (api/turns/message-files.ts) against the
 * draft the turn runs on.
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { EventNotifier } from '../../core/protocol/event-log.js';
import type { Logger } from '../../core/platform/logger.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import { consoleApp } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { FormToken, formJson, submitForm } from '../turns/form-submission.js';
import { ChatFile, Query, Uuid } from '../schemas.js';
import { receiveUpload, uploadJson } from '../service/files.js';
import { lastEventId, streamTurn } from '../turns/stream.js';
import { requestStop } from '../turns/stop.js';
import { messageJson, messagePage } from '../service/messages.js';
import { toConversation } from '../service/conversations.js';
import { suggestionAnswerer } from '../service/suggested.js';
import { findBuildDraft, findSharedDraft } from '../../core/domain/agent-configs.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { ProviderRegistry } from '../../core/domain/llm/provider.js';

export const DEBUGGER = 'debugger';

/** A debugger turn (POST …/agent/debug/chat-messages, api/console/agent.ts): `draft` picks the shared draft or the caller's build draft. */
export const DebugChat = z.object({
  query: Query,
  inputs: z.record(z.string(), z.unknown()).default({}),
  conversation_id: z.union([Uuid, z.literal('')]).optional(),
  draft: z.enum(['draft', 'build']).default('draft'),
  /** As in POST /v1/chat-messages: local_file = one of the caller's debugger uploads of this app (…/debug/files/upload). */
  files: z.array(ChatFile).max(20).nullable().default([]),
});

const Limit = z.coerce.number().int().min(1).max(100).default(20);
export const DebugConversationsQuery = z.object({ last_id: z.union([Uuid, z.literal('')]).optional(), limit: Limit });
export const DebugMessagesQuery = z.object({ conversation_id: Uuid, first_id: z.union([Uuid, z.literal('')]).optional(), limit: Limit });
export const DebugFormSubmitRequest = z.object({
  /** Field name → value. */
  inputs: z.record(z.string(), z.unknown()).default({}),
  /** The id of one of the form's actions. */
  action: z.string().min(1).max(64),
});

export interface ConsoleDebuggerDeps {
  db: Db;
  notifier: EventNotifier;
  outbox: OutboxDispatcher;
  backend: Pick<AgentBackendClient, 'cancelRun'>;
  config: Config;
  logger: Logger;
  /** The deployment's model providers, for suggested questions (default: from `config`). */
  providers?: ProviderRegistry;
}

export function consoleDebuggerRoutes(deps: ConsoleDebuggerDeps): Router {
  const { db } = deps;
  const r = Router();
  const base = '/apps/:app_id/agent/debug';

  /** Rows of this app that are the caller's debugger turns: the one filter every route applies. */
  async function scope(req: Request) {
    const { app, ctx } = await consoleApp(db, req);
    return { app, owned: { app_id: app.id, account_id: ctx.accountId, invoke_from: DEBUGGER } };
  }

  async function ownedMessage(req: Request) {
    const { owned } = await scope(req);
    const id = parseOr400(Uuid, req.params.task_id, 'task_id');
    const msg = await db.message.findFirst({ where: { id, ...owned } });
    if (!msg) throw new HttpError(404, 'not_found', 'Task not found.');
    return msg;
  }

  /** The form by token if its turn is one of the caller's debugger turns in this app (404 otherwise). */
  async function ownedForm(req: Request) {
    const { owned } = await scope(req);
    const token = parseOr400(FormToken, req.params.form_token, 'form_token');
    const form = await db.humanInputForm.findUnique({ where: { token } });
    const msg = form?.app_id === owned.app_id ? await db.message.findFirst({ where: { id: form.message_id, ...owned } }) : null;
    if (!form || !msg) throw new HttpError(404, 'human_input_form_not_found', 'Form not found.');
    return form;
  }

  const suggest = suggestionAnswerer(deps);
  /**
   * Dify's console twin of GET /v1/messages/{id}/suggested (its debugger asks `…/chat-messages/{id}/suggested-questions`):
   * `{data: [questions]}` after one of the caller's debugger answers, when the draft that turn ran on (its
   * `metadata.draft_type`) has `features.suggested_questions_after_answer` on — the debugger tries the draft being edited.
   */
  r.get(`${base}/messages/:message_id/suggested-questions`, async (req, res) => {
    const { owned } = await scope(req);
    const { agent } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.message_id, 'message_id');
    const msg = await db.message.findFirst({ where: { id, ...owned, rolled_back_at: null, conversation: { deleted_at: null } } });
    if (!msg) throw new HttpError(404, 'message_not_exists', 'Message Not Exists.');
    const build = (msg.metadata as { draft_type?: string } | null)?.draft_type === 'BUILD_DRAFT';
    const draft = build ? await findBuildDraft(db, agent.id, msg.account_id) : await findSharedDraft(db, agent.id);
    const soul = AgentSoulConfig.safeParse(draft?.config ?? null);
    if (!soul.success) throw new HttpError(404, 'agent_draft_not_found', 'The draft this turn ran on is gone.');
    res.json({ data: await suggest(msg, soul.data) });
  });

  /** A file for the caller's debugger turns (multipart `file`; no `user`: the console account owns it). */
  r.post(`${base}/files/upload`, async (req, res) => {
    const { app, ctx } = await consoleApp(db, req);
    const row = await receiveUpload(deps, req, { tenantId: ctx.tenantId, appId: app.id }, async () => ({ account_id: ctx.accountId }));
    res.status(201).json(uploadJson(row, ctx.accountId));
  });

  r.get(`${base}/conversations`, async (req, res) => {
    const { owned } = await scope(req);
    const q = parseOr400(DebugConversationsQuery, req.query, 'query');
    const where = { ...owned, deleted_at: null };
    let cursor = {};
    if (q.last_id) {
      const last = await db.conversation.findFirst({ where: { id: q.last_id, ...where } });
      if (!last) throw new HttpError(404, 'last_conversation_not_exists', 'Last Conversation Not Exists.');
      // (updated_at, id) is the sort key: equal timestamps are neither skipped nor repeated.
      cursor = { OR: [{ updated_at: { lt: last.updated_at } }, { updated_at: last.updated_at, id: { lt: last.id } }] };
    }
    const rows = await db.conversation.findMany({
      where: { ...where, ...cursor },
      orderBy: [{ updated_at: 'desc' }, { id: 'desc' }],
      take: q.limit + 1,
    });
    res.json({
      limit: q.limit,
      has_more: rows.length > q.limit,
      data: rows.slice(0, q.limit).map((c) => ({ ...toConversation(c), active_message_id: c.active_message_id })),
    });
  });

  r.get(`${base}/messages`, async (req, res) => {
    const { owned } = await scope(req);
    const q = parseOr400(DebugMessagesQuery, req.query, 'query');
    const conv = await db.conversation.findFirst({ where: { id: q.conversation_id, ...owned, deleted_at: null } });
    if (!conv) throw new HttpError(404, 'conversation_not_exists', 'Conversation Not Exists.');
    const { has_more, page } = await messagePage(db, conv.id, q);
    const draftType = (m: { metadata: unknown }) => (m.metadata as { draft_type?: string } | null)?.draft_type ?? 'DRAFT';
    res.json({ limit: q.limit, has_more, data: page.map((m) => ({ ...messageJson(m, deps.config), draft_type: draftType(m) })) });
  });

  /** Re-attach to a debugger turn's stream: every event after Last-Event-ID (or `?last_event_id=`), then live ones. */
  r.get(`${base}/chat-messages/:task_id/events`, async (req, res) => {
    const after = lastEventId(req);
    const msg = await ownedMessage(req);
    await streamTurn({ db, notifier: deps.notifier, pingMs: deps.config.SSE_PING_MS }, req, res, msg.id, after);
  });

  r.post(`${base}/chat-messages/:task_id/stop`, async (req, res) => {
    await requestStop(deps, await ownedMessage(req));
    res.json({ result: 'success' });
  });

  r.get(`${base}/forms/:form_token`, async (req, res) => {
    res.json(formJson(await ownedForm(req)));
  });

  /** Submits the form: the paused debugger turn resumes on the draft it ran on (its binding, snapshot and call). */
  r.post(`${base}/forms/:form_token`, async (req, res) => {
    const form = await ownedForm(req);
    res.json(await submitForm(deps, form, parseOr400(DebugFormSubmitRequest, req.body)));
  });

  return r;
}
