/**
 * GET /console/api/apps/{app_id}/agent/logs?conversation_id=&message_id= (Dify's agent log, issue 18): a turn's
 * iterations — one per model request, with its tokens, price and latency (message_model_calls), the thought text
 * it produced and its tool calls with inputs, outputs, time cost and errors (message_agent_thoughts by call_index).
 * A continuation of a paused turn is its own message with its own log. Console key; another tenant's app, another
 * app's conversation or message read as missing (404).
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { unixSeconds } from '../../core/platform/time.js';
import type {
  MessageAgentThought as MessageAgentThoughtModel,
  MessageModelCall as MessageModelCallModel,
} from '../../core/generated/prisma/client.js';
import { consoleApp, consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { messageFileJson, messageJson, queueLine, UPLOAD_FIELDS } from '../service/messages.js';

const LogsQuery = z.object({ conversation_id: Uuid, message_id: Uuid });

const TURN_STATUSES = ['pending', 'running', 'paused', 'succeeded', 'failed', 'stopped', 'queued'] as const;
/** Filters of the app's logs (issue 34 item 4): end user, when, a turn's status, an answer's feedback, where from. */
const ConversationsQuery = z.object({
  user: z.string().min(1).max(255).optional(),
  status: z.enum(TURN_STATUSES).optional(),
  feedback: z.enum(['like', 'dislike', 'any']).optional(),
  invoke_from: z.enum(['service-api', 'debugger', 'web-app', 'explore']).optional(),
  from: z.coerce.date().optional(),
  to: z.coerce.date().optional(),
  page: z.coerce.number().int().min(1).max(10_000).default(1),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export function agentLogRoutes(deps: { db: Db; config: Pick<Config, 'ENCRYPTION_KEY' | 'FILE_LINK_TTL_S'> }): Router {
  const { db } = deps;
  const r = Router();

  /**
   * GET /console/api/apps/{app_id}/agent/conversations: every conversation of the app — end users' and the debugger's,
   * newest activity first — filtered by `user` (the end user's id as the service API names it), `from`/`to` (created,
   * ISO dates), `status` (a turn of it has that status), `feedback` (an answer of it was rated like/dislike/any),
   * `invoke_from`. Each row: its end user, message count, last turn status, failed turns, likes and dislikes.
   */
  r.get('/apps/:app_id/agent/conversations', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const q = parseOr400(ConversationsQuery, req.query, 'query');
    let endUserIds: string[] | undefined;
    if (q.user)
      endUserIds = (await db.endUser.findMany({ where: { app_id: app.id, session_id: q.user }, select: { id: true } })).map((u) => u.id);
    const messageFilters = [
      ...(q.status ? [{ messages: { some: { status: q.status } } }] : []),
      ...(q.feedback ? [{ messages: { some: { feedbacks: { some: q.feedback === 'any' ? {} : { rating: q.feedback } } } } }] : []),
    ];
    const where = {
      app_id: app.id,
      deleted_at: null,
      ...(endUserIds ? { end_user_id: { in: endUserIds } } : {}),
      ...(q.invoke_from ? { invoke_from: q.invoke_from } : {}),
      ...(q.from || q.to ? { created_at: { ...(q.from ? { gte: q.from } : {}), ...(q.to ? { lte: q.to } : {}) } } : {}),
      ...(messageFilters.length ? { AND: messageFilters } : {}),
    };
    const [total, rows] = await Promise.all([
      db.conversation.count({ where }),
      db.conversation.findMany({
        where,
        orderBy: [{ updated_at: 'desc' }, { id: 'desc' }],
        skip: (q.page - 1) * q.limit,
        take: q.limit,
        include: {
          messages: {
            orderBy: { created_at: 'asc' },
            select: { status: true, query: true, feedbacks: { select: { rating: true } } },
          },
        },
      }),
    ]);
    const userIds = [...new Set(rows.map((c) => c.end_user_id).filter((id): id is string => !!id))];
    const sessions = new Map(
      (await db.endUser.findMany({ where: { id: { in: userIds } }, select: { id: true, session_id: true } })).map((u) => [
        u.id,
        u.session_id,
      ]),
    );
    res.json({
      page: q.page,
      limit: q.limit,
      total,
      has_more: q.page * q.limit < total,
      data: rows.map((c) => {
        const ratings = c.messages.flatMap((m) => m.feedbacks.map((f) => f.rating));
        return {
          id: c.id,
          name: c.name,
          invoke_from: c.invoke_from,
          from_end_user_session_id: c.end_user_id ? (sessions.get(c.end_user_id) ?? null) : null,
          from_account_id: c.account_id,
          first_query: c.messages[0]?.query ?? null,
          message_count: c.messages.length,
          last_status: c.messages.at(-1)?.status ?? null,
          failed_count: c.messages.filter((m) => m.status === 'failed').length,
          like_count: ratings.filter((x) => x === 'like').length,
          dislike_count: ratings.filter((x) => x === 'dislike').length,
          created_at: unixSeconds(c.created_at),
          updated_at: unixSeconds(c.updated_at),
        };
      }),
    });
  });

  /**
   * GET /console/api/apps/{app_id}/agent/conversations/{conversation_id}/messages: its turns, oldest first, as the
   * service API shows them — files named and sized from their uploads, a queued message's `queue_position`.
   */
  r.get('/apps/:app_id/agent/conversations/:conversation_id/messages', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const conversationId = parseOr400(Uuid, req.params.conversation_id, 'conversation_id');
    const conversation = await db.conversation.findFirst({ where: { id: conversationId, app_id: app.id, deleted_at: null } });
    if (!conversation) throw new HttpError(404, 'conversation_not_exists', 'Conversation not found.');
    const rows = await db.message.findMany({
      where: { conversation_id: conversationId },
      orderBy: { created_at: 'asc' },
      take: 500,
      include: {
        thoughts: { orderBy: { position: 'asc' } },
        files: { include: { upload_file: { select: UPLOAD_FIELDS } } },
        feedbacks: { select: { rating: true } },
      },
    });
    const line = rows.some((m) => m.status === 'queued') ? await queueLine(db, conversationId) : [];
    const placed = (m: (typeof rows)[number]) => (line.includes(m.id) ? { ...m, queue_place: line.indexOf(m.id) + 1 } : m);
    res.json({ data: rows.map((m) => ({ ...messageJson(placed(m), deps.config), error_code: m.error_code })) });
  });

  r.get('/apps/:app_id/agent/logs', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const q = parseOr400(LogsQuery, req.query);
    const message = await db.message.findFirst({
      where: { id: q.message_id, conversation_id: q.conversation_id, app_id: app.id },
      include: {
        thoughts: { orderBy: { position: 'asc' } },
        model_calls: { orderBy: { call_index: 'asc' } },
        files: { include: { upload_file: { select: UPLOAD_FIELDS } } },
        conversation: { select: { name: true } },
      },
    });
    if (!message) throw new HttpError(404, 'message_not_found', 'Message not found.');
    const iterations = agentIterations(message.model_calls, message.thoughts);
    const place = message.status === 'queued' ? (await queueLine(db, message.conversation_id)).indexOf(message.id) + 1 : 0;
    res.json({
      meta: {
        status: message.status === 'failed' ? 'failed' : message.status === 'succeeded' ? 'success' : message.status,
        executor: message.end_user_id ? 'end_user' : 'account',
        start_time: message.created_at.toISOString(),
        elapsed_time: message.provider_response_latency,
        total_tokens: message.total_tokens,
        agent_mode: 'function_call',
        iterations: iterations.length,
        // Extension: a queued message's place in its conversation's line (1 = next); null once it runs.
        queue_position: place || null,
      },
      iterations,
      // The message's files as its history shows them (named and sized from their uploads).
      files: message.files.map((f) => messageFileJson(f, deps.config)),
    });
  });
  return r;
}

type Thought = Pick<
  MessageAgentThoughtModel,
  'kind' | 'thought' | 'tool' | 'tool_input' | 'observation' | 'call_index' | 'tool_meta' | 'tool_labels' | 'message_files' | 'created_at'
>;
type ModelCall = Pick<
  MessageModelCallModel,
  'call_index' | 'prompt_tokens' | 'completion_tokens' | 'total_price' | 'currency' | 'latency' | 'created_at'
>;

/** One iteration per recorded model request; rows of runs recorded before per-call usage (call_index null) form one. */
export function agentIterations(calls: ModelCall[], thoughts: Thought[]) {
  const indexes = [...new Set([...calls.map((c) => c.call_index), ...thoughts.map((t) => t.call_index ?? -1)])].sort((a, b) => a - b);
  return indexes.map((index) => {
    const call = calls.find((c) => c.call_index === index);
    const rows = thoughts.filter((t) => (t.call_index ?? -1) === index);
    const tools = rows.filter((t) => t.kind === 'tool');
    const meta = (t: Thought) => (t.tool_meta ?? {}) as { time_cost?: number; error?: string | null };
    return {
      call_index: index < 0 ? null : index,
      tokens: call ? call.prompt_tokens + call.completion_tokens : 0,
      prompt_tokens: call?.prompt_tokens ?? 0,
      completion_tokens: call?.completion_tokens ?? 0,
      total_price: call ? call.total_price.toString() : '0',
      currency: call?.currency ?? 'USD',
      latency: call ? Number(call.latency) : null,
      thought: rows
        .filter((t) => t.kind !== 'tool')
        .map((t) => t.thought)
        .join('\n'),
      tool_calls: tools.map((t) => ({
        status: meta(t).error ? 'error' : 'success',
        error: meta(t).error ?? null,
        time_cost: meta(t).time_cost ?? 0,
        tool_name: t.tool,
        tool_label: (t.tool_labels as Record<string, unknown>)?.[t.tool] ?? t.tool,
        tool_input: parseMaybeJson(t.tool_input),
        tool_output: parseMaybeJson(t.observation),
        tool_parameters: {},
        tool_icon: null,
      })),
      tool_raw: { inputs: tools.map((t) => t.tool_input).join('\n'), outputs: tools.map((t) => t.observation).join('\n') },
      created_at: (call?.created_at ?? rows[0]?.created_at ?? new Date(0)).toISOString(),
      files: rows.flatMap((t) => (t.message_files as string[]) ?? []),
    };
  });
}

function parseMaybeJson(s: string): unknown {
  if (!s) return null;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}
