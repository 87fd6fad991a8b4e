/**
 * Conversations of an end user (Dify service API): list with `last_id` pagination and `sort_by`, rename
 * (or name from the first query with `auto_generate`), and delete (soft: `deleted_at`; an in-flight turn
 * is cancelled). Another app or user gets 404, never 403, so ids cannot be probed.
 */
import { Router } from 'express';
import type { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { enqueueOutbox, type OutboxDispatcher, type OutboxEntry } from '../../core/domain/outbox.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import {
  ConversationsQuery,
  DeleteConversationRequest,
  ForkConversationRequest,
  RenameConversationRequest,
  Uuid,
  type ConversationResponse,
} from '../schemas.js';
import { conversationTitle } from '../../core/domain/turn-text.js';
import { findOwnedConversation } from '../ownership.js';
import { unixSeconds } from '../../core/platform/time.js';
import { retireBinding } from '../../core/domain/turn/bindings.js';
import { forkConversation, type ForkConfig } from './fork.js';

type ConversationRow = { id: string; name: string; inputs: unknown; status: string; created_at: Date; updated_at: Date };

export function toConversation(c: ConversationRow): z.input<typeof ConversationResponse> {
  return {
    id: c.id,
    name: c.name,
    inputs: (c.inputs ?? {}) as Record<string, unknown>,
    status: c.status,
    introduction: '',
    created_at: unixSeconds(c.created_at),
    updated_at: unixSeconds(c.updated_at),
  };
}

export function conversationRoutes(deps: { db: Db; outbox: OutboxDispatcher; logger: Logger; config: ForkConfig }): Router {
  const r = Router();
  const { db } = deps;

  r.get('/conversations', async (req, res) => {
    const app = appCtx(req);
    const q = parseOr400(ConversationsQuery, req.query, 'query');
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: q.user } } });
    if (!endUser) return void res.json({ limit: q.limit, has_more: false, data: [] });
    const field = q.sort_by.replace('-', '') as 'created_at' | 'updated_at';
    const dir = q.sort_by.startsWith('-') ? 'desc' : 'asc';
    const beyond = dir === 'desc' ? 'lt' : 'gt';
    let cursor = {};
    if (q.last_id) {
      const last = await db.conversation.findFirst({ where: { id: q.last_id, app_id: app.appId, end_user_id: endUser.id } });
      if (!last) throw new HttpError(404, 'last_conversation_not_exists', 'Last Conversation Not Exists.');
      // (field, id) is the sort key, so conversations with equal timestamps are neither skipped nor repeated.
      cursor = { OR: [{ [field]: { [beyond]: last[field] } }, { [field]: last[field], id: { [beyond]: last.id } }] };
    }
    const rows = await db.conversation.findMany({
      where: { app_id: app.appId, end_user_id: endUser.id, deleted_at: null, ...cursor },
      orderBy: [{ [field]: dir }, { id: dir }],
      take: q.limit + 1,
    });
    const page = rows.slice(0, q.limit);
    // Extension (issue 42): the turn in flight of each conversation, so a client marks the ones answering or waiting
    // for a form and re-attaches to them (GET /v1/chat-messages/{task_id}/events).
    const activeIds = page.map((c) => c.active_message_id).filter((id): id is string => !!id);
    const active = activeIds.length
      ? new Map(
          (await db.message.findMany({ where: { id: { in: activeIds } }, select: { id: true, status: true } })).map((m) => [
            m.id,
            m.status,
          ]),
        )
      : new Map<string, string>();
    const activeTurn = (c: { active_message_id: string | null }) => {
      const status = c.active_message_id ? active.get(c.active_message_id) : undefined;
      return c.active_message_id && status ? { message_id: c.active_message_id, status } : null;
    };
    res.json({
      limit: q.limit,
      has_more: rows.length > q.limit,
      data: page.map((c) => ({ ...toConversation(c), active_turn: activeTurn(c) })),
    });
  });

  r.post('/conversations/:conversation_id/name', async (req, res) => {
    const app = appCtx(req);
    const id = parseOr400(Uuid, req.params.conversation_id, 'conversation_id');
    const body = parseOr400(RenameConversationRequest, req.body ?? {});
    const conv = await findOwnedConversation(db, app.appId, body.user, id);
    let name: string;
    if (body.auto_generate) {
      const first = await db.message.findFirst({
        where: { conversation_id: conv.id },
        orderBy: [{ created_at: 'asc' }, { id: 'asc' }],
        select: { query: true },
      });
      name = first ? conversationTitle(first.query) : conv.name;
    } else {
      if (!body.name) throw new HttpError(400, 'invalid_param', 'name: is required unless auto_generate is true.');
      name = body.name;
    }
    const updated = await db.conversation.update({ where: { id: conv.id }, data: { name } });
    res.json(toConversation(updated));
  });

  // Extension (issue 35): a new conversation answering from the session after that message (api/service/fork.ts).
  r.post('/conversations/:conversation_id/fork', async (req, res) => {
    const app = appCtx(req);
    const id = parseOr400(Uuid, req.params.conversation_id, 'conversation_id');
    const body = parseOr400(ForkConversationRequest, req.body ?? {});
    const conv = await findOwnedConversation(db, app.appId, body.user, id);
    const fork = await forkConversation(deps, conv, body.message_id);
    res.status(201).json({ ...toConversation(fork.conversation), workspace_copy: fork.workspaceCopy });
  });

  r.delete('/conversations/:conversation_id', async (req, res) => {
    const app = appCtx(req);
    const id = parseOr400(Uuid, req.params.conversation_id, 'conversation_id');
    const { user } = parseOr400(DeleteConversationRequest, { user: req.body?.user ?? req.query.user });
    const conv = await findOwnedConversation(db, app.appId, user, id);
    // A deleted conversation keeps no turn running or waiting for a human: the soft delete and the cancel
    // of its in-flight turn commit together (outbox), and the cancel is delivered now or once Temporal is back.
    const cancel = await db.$transaction(async (tx): Promise<OutboxEntry | null> => {
      const deleted = await tx.conversation.updateMany({ where: { id: conv.id, deleted_at: null }, data: { deleted_at: new Date() } });
      if (deleted.count !== 1 || !conv.active_message_id) return null;
      const msg = await tx.message.findUnique({ where: { id: conv.active_message_id }, select: { workflow_id: true } });
      return msg ? enqueueOutbox(tx, { kind: 'cancel', workflowId: msg.workflow_id }) : null;
    });
    if (cancel) await deps.outbox.deliverNow(cancel);
    // The conversation's workspace goes with it (status, retired_at, files removed; idempotent).
    if (conv.agent_workspace_binding_id) await retireBinding(db, deps.config, conv.agent_workspace_binding_id, 'conversation_deleted');
    res.status(204).end();
  });

  return r;
}
