/** History route: messages with their agent thoughts, files and feedback (Dify pagination). */
import { Router } from 'express';
import type { Config } from '../../core/config.js';
import type { Db, Prisma } from '../../core/db.js';
import { resignFileUrl } from '../../core/uploads.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { MessagesQuery } from '../schemas.js';
import { findOwnedConversation } from '../ownership.js';
import { unixSeconds } from '../../core/time.js';

export function messageRoutes(deps: { db: Db; config: Pick<Config, 'ENCRYPTION_KEY' | 'FILE_LINK_TTL_S'> }): Router {
  const r = Router();
  const { db } = deps;

  r.get('/messages', async (req, res) => {
    const app = appCtx(req);
    const q = parseOr400(MessagesQuery, req.query, 'query');
    const conv = await findOwnedConversation(db, app.appId, q.user, q.conversation_id);
    const { has_more, page } = await messagePage(db, conv.id, q, { where: { from_end_user_id: conv.end_user_id! } });
    res.json({ limit: q.limit, has_more, data: page.map((m) => messageJson(m, deps.config)) });
  });

  return r;
}

/**
 * One page of a conversation's history, oldest first (Dify pagination: `first_id` is the oldest message the client
 * has, the page ends before it). Shared by the service API and the console's debugger history. `feedbacks`: the
 * end user's feedback to include (a debugger message has none).
 */
export async function messagePage(
  db: Db,
  conversationId: string,
  q: { first_id?: string; limit: number },
  feedbacks?: { where: Prisma.MessageFeedbackWhereInput },
) {
  let before: Date | undefined;
  if (q.first_id) {
    const first = await db.message.findFirst({ where: { id: q.first_id, conversation_id: conversationId } });
    if (!first) throw new HttpError(404, 'first_message_not_exists', 'First Message Not Exists.');
    before = first.created_at;
  }
  const rows = await db.message.findMany({
    where: { conversation_id: conversationId, ...(before ? { created_at: { lt: before } } : {}) },
    orderBy: [{ created_at: 'desc' }, { id: 'desc' }],
    take: q.limit + 1,
    include: { thoughts: { orderBy: { position: 'asc' } }, files: true, ...(feedbacks ? { feedbacks } : {}) },
  });
  return { has_more: rows.length > q.limit, page: rows.slice(0, q.limit).reverse() as MessageRow[] };
}

/** Feedback is an end user's: a debugger message is listed without it. */
type MessageRow = Prisma.MessageGetPayload<{ include: { thoughts: true; files: true } }> & { feedbacks?: { rating: string }[] };

/** One message of the history as the service API shows it (the console's debugger history shares it). */
export function messageJson(m: MessageRow, config: Pick<Config, 'ENCRYPTION_KEY' | 'FILE_LINK_TTL_S'>) {
  return {
    id: m.id,
    conversation_id: m.conversation_id,
    parent_message_id: null,
    inputs: m.inputs,
    query: m.query,
    answer: m.answer,
    status: m.status === 'failed' ? 'error' : 'normal',
    turn_status: m.status,
    resumed_from_message_id: m.resumed_from_message_id,
    error: m.error,
    agent_failure: (m.metadata as { agent_failure?: unknown } | null)?.agent_failure ?? null,
    // Signed links expire (issue 17 L5): history hands out fresh ones.
    message_files: m.files.map((f) => ({
      id: f.id,
      type: f.type,
      url: f.upload_file_id ? resignFileUrl(config, f.url, f.upload_file_id) : f.url,
      belongs_to: f.belongs_to,
    })),
    feedback: m.feedbacks?.[0] ? { rating: m.feedbacks[0].rating } : null,
    retriever_resources: [],
    agent_thoughts: m.thoughts.map((t) => ({
      id: t.id,
      message_id: m.id,
      position: t.position,
      thought: t.thought,
      tool: t.tool,
      tool_labels: t.tool_labels,
      tool_input: t.tool_input,
      observation: t.observation,
      message_files: t.message_files,
      created_at: unixSeconds(t.created_at),
    })),
    metadata: { usage: m.usage ?? null },
    created_at: unixSeconds(m.created_at),
  };
}
