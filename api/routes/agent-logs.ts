/**
 * GET /console/api/apps/{app_id}/agent/logs?conversation_id=&message_id= (Dify's agent log, issue 18): a turn's
 * iterations — one per model request, with its tokens, price and latency (message_model_calls), the thought text
 * it produced and its tool calls with inputs, outputs, time cost and errors (message_agent_thoughts by call_index).
 * A continuation of a paused turn is its own message with its own log. Console key; another tenant's app, another
 * app's conversation or message read as missing (404).
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/db.js';
import type {
  MessageAgentThought as MessageAgentThoughtModel,
  MessageModelCall as MessageModelCallModel,
} from '../../core/generated/prisma/client.js';
import { consoleApp, consoleAuth } from '../console-auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';

const LogsQuery = z.object({ conversation_id: Uuid, message_id: Uuid });

export function agentLogRoutes(deps: { db: Db }): Router {
  const { db } = deps;
  const r = Router();
  r.get('/apps/:app_id/agent/logs', consoleAuth(db), async (req: Request, res) => {
    const { app } = await consoleApp(db, req);
    const q = parseOr400(LogsQuery, req.query);
    const message = await db.message.findFirst({
      where: { id: q.message_id, conversation_id: q.conversation_id, app_id: app.id },
      include: {
        thoughts: { orderBy: { position: 'asc' } },
        model_calls: { orderBy: { call_index: 'asc' } },
        files: true,
        conversation: { select: { name: true } },
      },
    });
    if (!message) throw new HttpError(404, 'message_not_found', 'Message not found.');
    const iterations = agentIterations(message.model_calls, message.thoughts);
    res.json({
      meta: {
        status: message.status === 'failed' ? 'failed' : message.status === 'succeeded' ? 'success' : message.status,
        executor: message.end_user_id ? 'end_user' : 'account',
        start_time: message.created_at.toISOString(),
        elapsed_time: message.provider_response_latency,
        total_tokens: message.total_tokens,
        agent_mode: 'function_call',
        iterations: iterations.length,
      },
      iterations,
      files: message.files.map((f) => ({ id: f.id, type: f.type, belongs_to: f.belongs_to })),
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
