/**
 * The model's memory across a lost workspace (issue 43 item 2, docs/seeds/001 `binding_lost`): when a binding is
 * retired `binding_lost`, the owner's next turn starts the next binding with a fresh workspace and no session snapshot
 * (activities/prepare/binding.ts). Its first run then starts its history from the stored messages instead of blank:
 * each earlier turn's query and answer as a user and an assistant message, the same trim to `max_messages` and the
 * same fit into the model's context window the backend applies to every call (agent-backend/modules/history.ts),
 * sent as the history layer's `initial_messages`. What the stored messages do not hold (tool calls and their results,
 * reasoning) is not rebuilt, and neither are the workspace's files: the turn's user message says so (LOST_WORKSPACE_NOTE,
 * appended like the list of attached files), so the model does not look for files its history mentions.
 *
 * Which messages: a conversation's session is its thread (core/domain/message-thread.ts), so the thread up to this
 * turn; a build draft's session spans its debugger conversations, so every turn run on the lost bindings (back through
 * each predecessor that was itself replaced for `binding_lost`). Failed turns, rolled-back ones and turns without an
 * answer are left out; a turn paused for ask_human is represented by its continuation.
 */
import { fitToContextWindow, trimHistory } from '../../agent-backend/modules/history.js';
import { whitelistModelSettings, type AgentSoulConfig } from '../../core/domain/soul.js';
import { threadNodes, threadTo } from '../../core/domain/message-thread.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import type { ActivityDeps } from '../deps.js';
import type { Binding } from '../../core/domain/turn/bindings.js';

/** What the model is told with the first turn after the loss: its files are gone, its memory of the conversation is not. */
export const LOST_WORKSPACE_NOTE =
  'Note: your workspace was lost, and this conversation continues in a fresh, empty one. Files from earlier turns are gone; ' +
  'the earlier messages were kept, your tool calls and their results were not.';

const KEPT = new Set(['succeeded', 'stopped', 'paused']);

type Db = ActivityDeps['db'];

/**
 * The history a replacement binding's first run starts from, or undefined when the binding is not one (a first
 * binding, a run with a snapshot, or one retired for another reason such as a build draft's lifecycle).
 */
export async function lostBindingHistory(
  db: Db,
  p: {
    binding: Binding;
    messageId: string;
    conversationId: string;
    soul: AgentSoulConfig;
    /** The window and output reserve the backend fits each call into (build-request.ts passes the composition's). */
    limits?: { contextWindow?: number; maxOutput?: number };
  },
): Promise<PromptMessage[] | undefined> {
  const { binding } = p;
  if (binding.session_snapshot || binding.incarnation <= 1) return undefined;
  const lost = await lostPredecessors(db, binding);
  if (!lost.length) return undefined;
  const ids =
    binding.owner_type === 'CONVERSATION'
      ? threadTo(await threadNodes(db, p.conversationId), p.messageId).filter((id) => id !== p.messageId)
      : (await db.agentBackendRun.findMany({ where: { binding_id: { in: lost } }, select: { message_id: true } })).map((r) => r.message_id);
  if (!ids.length) return undefined;
  const rows = await db.message.findMany({
    where: { id: { in: ids }, rolled_back_at: null },
    select: { id: true, query: true, answer: true, status: true, resumed_from_message_id: true, created_at: true },
    orderBy: [{ created_at: 'asc' }, { id: 'asc' }],
  });
  // A paused turn's question and the human's answer live on in its continuation (same query, the final answer).
  const continued = new Set(rows.flatMap((m) => (m.resumed_from_message_id ? [m.resumed_from_message_id] : [])));
  const turns = rows.filter((m) => KEPT.has(m.status) && m.answer.trim() && !continued.has(m.id));
  if (!turns.length) return undefined;
  const messages: PromptMessage[] = turns.flatMap((m): PromptMessage[] => [
    { role: 'user', content: m.query },
    { role: 'assistant', content: m.answer },
  ]);
  const trimmed = trimHistory(messages, p.soul.history.max_messages);
  const window = p.limits?.contextWindow;
  const fitted = window
    ? fitToContextWindow(p.soul.prompt.system_prompt || null, trimmed, {
        contextWindow: window,
        maxTokens: whitelistModelSettings(p.soul.model.model_settings).max_tokens,
        maxOutput: p.limits?.maxOutput,
      }).messages
    : trimmed;
  return fitted.length ? fitted : undefined;
}

/** The owner's bindings this one replaced for binding_lost, newest first: back while each was retired that way. */
async function lostPredecessors(db: Db, binding: Binding): Promise<string[]> {
  const out: string[] = [];
  for (let n = binding.incarnation - 1; n >= 1; n--) {
    const prev = await db.agentWorkspaceBinding.findUnique({
      where: { owner_type_owner_id_incarnation: { owner_type: binding.owner_type, owner_id: binding.owner_id, incarnation: n } },
      select: { id: true, retired_reason: true },
    });
    if (!prev || prev.retired_reason !== 'binding_lost') break;
    out.push(prev.id);
  }
  return out;
}
