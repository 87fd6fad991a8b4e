/** History route: messages with their agent thoughts, files and feedback (Dify pagination). */
import { Router } from 'express';
import type { Config } from '../../core/platform/config.js';
import type { Db, Prisma } from '../../core/platform/db.js';
import { resignFileUrl } from '../../core/domain/uploads.js';
import { retrieverResources } from '../../core/domain/knowledge/citations.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { MessagesQuery } from '../schemas.js';
import { findOwnedConversation } from '../ownership.js';
import { unixSeconds } from '../../core/platform/time.js';
import { childrenOf, effectiveParents, newestLeafBelow, threadNodes, threadTo, UUID_NIL } from '../../core/domain/message-thread.js';

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
 * One page of a conversation's history, oldest first: the thread of its current branch (issue 35 item 2), the one
 * ending at the newest message, or with `branch_id` the one through that message to its newest descendant. Dify
 * pagination: `first_id` is the oldest message the client has, the page holds the `limit` messages before it in its
 * thread. Shared by the service API and the console's debugger history. `feedbacks`: the end user's feedback to
 * include (a debugger message has none).
 */
export async function messagePage(
  db: Db,
  conversationId: string,
  q: { first_id?: string; limit: number; branch_id?: string },
  feedbacks?: { where: Prisma.MessageFeedbackWhereInput },
) {
  const nodes = await threadNodes(db, conversationId);
  const known = (id: string) => nodes.some((n) => n.id === id);
  if (q.branch_id && !known(q.branch_id)) throw new HttpError(404, 'message_not_exists', 'Message Not Exists.');
  if (q.first_id && !known(q.first_id)) throw new HttpError(404, 'first_message_not_exists', 'First Message Not Exists.');
  if (!nodes.length) return { has_more: false, page: [] as ThreadedRow[] };
  let thread = threadTo(nodes, q.branch_id ? newestLeafBelow(nodes, q.branch_id) : nodes[0]!.id);
  if (q.first_id) {
    // A first_id off this branch pages the thread it is on.
    if (!thread.includes(q.first_id)) thread = threadTo(nodes, q.first_id);
    thread = thread.slice(0, thread.indexOf(q.first_id));
  }
  const ids = thread.slice(-q.limit);
  const rows = await db.message.findMany({
    where: { id: { in: ids } },
    include: {
      thoughts: { orderBy: { position: 'asc' } },
      files: { include: { upload_file: { select: UPLOAD_FIELDS } } },
      ...(feedbacks ? { feedbacks } : {}),
    },
  });
  const byId = new Map(rows.map((r) => [r.id, r]));
  const line = rows.some((r) => r.status === 'queued') ? await queueLine(db, conversationId) : [];
  const parents = effectiveParents(nodes);
  const children = childrenOf(nodes);
  const page = ids.flatMap((id) => {
    const m = byId.get(id);
    if (!m) return [];
    const parent = parents.get(id) ?? null;
    const place = line.indexOf(id) + 1;
    return [{ ...m, thread: { parent, siblings: children.get(parent) ?? [id] }, ...(place ? { queue_place: place } : {}) } as ThreadedRow];
  });
  return { has_more: thread.length > q.limit, page };
}

/** A conversation's waiting messages, next first: a queued message's place in line is its index + 1 (1: it runs next). */
export async function queueLine(db: Db, conversationId: string): Promise<string[]> {
  const rows = await db.message.findMany({
    where: { conversation_id: conversationId, status: 'queued' },
    orderBy: { queue_position: 'asc' },
    select: { id: true },
  });
  return rows.map((r) => r.id);
}

/** What history shows of a file's upload: Dify's filename, mime_type and size (`include: { files: { include: { upload_file: … } } }`). */
export const UPLOAD_FIELDS = { name: true, mime_type: true, size: true } as const;
type FileRow = Prisma.MessageFileGetPayload<object> & { upload_file?: { name: string; mime_type: string; size: number } | null };
/** Feedback is an end user's: a debugger message is listed without it. Its files' uploads, when the query included them. */
type MessageRow = Omit<Prisma.MessageGetPayload<{ include: { thoughts: true } }>, 'files'> & {
  files: FileRow[];
  feedbacks?: { rating: string }[];
};
/**
 * A history row with its place in the thread (messagePage); without it the stored parent is shown. `queue_place`: a
 * queued message's place in its conversation's line (messagePage counts it).
 */
type ThreadedRow = MessageRow & { thread?: { parent: string | null; siblings: string[] }; queue_place?: number };

/** A remote_url file's name: the last segment of its URL's path (Dify names it so), or null. */
function remoteFileName(url: string | null): string | null {
  if (!url) return null;
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop();
    return last ? decodeURIComponent(last) : null;
  } catch {
    return null;
  }
}

/** One file of a message as history shows it (the console's logs share it). */
export function messageFileJson(f: FileRow, config: Pick<Config, 'ENCRYPTION_KEY' | 'FILE_LINK_TTL_S'>) {
  return {
    id: f.id,
    type: f.type,
    url: f.upload_file_id ? resignFileUrl(config, f.url, f.upload_file_id) : f.url,
    belongs_to: f.belongs_to,
    // Dify's fields too: what a client needs to send the files again (the chat page's regenerate from history).
    transfer_method: f.transfer_method,
    upload_file_id: f.upload_file_id,
    // Dify's: the file's name, type and bytes (from its upload; a remote_url file: the name in its URL, the rest unknown).
    filename: f.upload_file?.name ?? (f.transfer_method === 'remote_url' ? remoteFileName(f.url) : null),
    mime_type: f.upload_file?.mime_type ?? null,
    size: f.upload_file?.size ?? null,
  };
}

/** One message of the history as the service API shows it (the console's debugger history shares it). */
export function messageJson(m: ThreadedRow, config: Pick<Config, 'ENCRYPTION_KEY' | 'FILE_LINK_TTL_S'>) {
  const storedParent = m.parent_message_id === UUID_NIL ? null : m.parent_message_id;
  return {
    id: m.id,
    conversation_id: m.conversation_id,
    parent_message_id: m.thread ? m.thread.parent : storedParent,
    sibling_ids: m.thread?.siblings ?? [m.id],
    inputs: m.inputs,
    query: m.query,
    answer: m.answer,
    status: m.status === 'failed' ? 'error' : 'normal',
    turn_status: m.status,
    // Extension: a queued message's place in line (1: it runs next); null once it runs (or where not counted).
    queue_position: m.status === 'queued' ? (m.queue_place ?? null) : null,
    resumed_from_message_id: m.resumed_from_message_id,
    error: m.error,
    agent_failure: (m.metadata as { agent_failure?: unknown } | null)?.agent_failure ?? null,
    // Signed links expire (issue 17 L5): history hands out fresh ones.
    message_files: m.files.map((f) => messageFileJson(f, config)),
    feedback: m.feedbacks?.[0] ? { rating: m.feedbacks[0].rating } : null,
    // Dify's citations of a knowledge answer, when its config asked for them (issue 42 problem 6).
    retriever_resources: retrieverResources(m.metadata) ?? [],
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
