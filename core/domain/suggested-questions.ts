/**
 * Dify's "suggested questions after answer" (GET /v1/messages/{id}/suggested): three questions the user may ask next,
 * from one call of the agent's model through the api's model gateway (core/domain/llm/invoke.ts: the tenant's
 * credentials or the deployment's, the credit pool, the usage ledger), never through the agent backend, which holds
 * no credential. Served from `message_suggested_questions` once made, so a repeated GET calls no model.
 *
 * Billing once: the call's billing id is fixed per message (`suggested-questions-<message id>:0`) and the ledger is
 * unique on it, so two GETs racing past an empty cache record one ledger row between them; the first questions
 * written (primary key on the message) are the ones every GET answers.
 */
import type { Logger } from '../platform/logger.js';
import type { Db } from '../platform/db.js';
import type { LlmInvoker } from './llm/invoke.js';
import { InvokeRequest } from '../protocol/inner-llm.js';
import { threadNodes, threadTo } from './message-thread.js';
import { parseSuggestedQuestions, suggestedQuestionsPrompt, SUGGESTION_HISTORY_MESSAGES } from './llm/suggested-prompt.js';
import type { AgentSoulConfig } from './soul.js';

/** The message the questions follow (already checked to be the caller's and finished). */
export interface AnsweredMessage {
  id: string;
  tenant_id: string;
  app_id: string;
  conversation_id: string;
  end_user_id: string | null;
  account_id: string | null;
  invoke_from: string;
}

export interface SuggestionDeps {
  db: Db;
  llm: LlmInvoker;
  logger: Logger;
}

/** Why no questions could be made, for the route to answer (the gateway's refusal before any model call). */
export class SuggestionRefused extends Error {
  constructor(
    readonly kind: 'quota' | 'model',
    message: string,
  ) {
    super(message);
  }
}

/** The id the call is billed under: one per message, whatever the number of GETs. */
export const suggestionInvocationId = (messageId: string) => `suggested-questions-${messageId}`;

/**
 * The settings a three-question answer needs: the agent's temperature and top_p; a reasoning model keeps a low effort
 * and room to think, any other gets at most 256 tokens (Dify's). Stop sequences and thinking budgets are the agent's
 * answer's, not this one's.
 */
function suggestionSettings(settings: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of ['temperature', 'top_p'] as const) if (typeof settings[key] === 'number') out[key] = settings[key];
  if (settings.reasoning_effort !== undefined) return { ...out, reasoning_effort: 'low', max_tokens: 4096 };
  return { ...out, max_tokens: 256 };
}

/** The questions after `message`'s answer: the stored ones, or made now (and stored unless the model gave none). */
export async function suggestedQuestions(deps: SuggestionDeps, message: AnsweredMessage, soul: AgentSoulConfig): Promise<string[]> {
  const { db } = deps;
  const stored = await db.messageSuggestedQuestion.findUnique({ where: { message_id: message.id } });
  if (stored) return stored.questions as string[];

  const nodes = await threadNodes(db, message.conversation_id);
  const ids = threadTo(nodes, message.id).slice(-SUGGESTION_HISTORY_MESSAGES);
  const rows = await db.message.findMany({ where: { id: { in: ids } }, select: { id: true, query: true, answer: true } });
  const exchanges = ids.flatMap((id) => rows.filter((r) => r.id === id));

  const invocation = suggestionInvocationId(message.id);
  const request = InvokeRequest.parse({
    caller: {
      invocation_id: invocation,
      agent_run_id: invocation,
      call_index: 0,
      tenant_id: message.tenant_id,
      user_id: message.end_user_id ?? message.account_id ?? message.id,
      user_from: message.end_user_id ? 'end-user' : 'account',
      app_id: message.app_id,
      invoke_from: message.invoke_from,
    },
    target: {
      provider: soul.model.provider,
      model: soul.model.model,
      prompt_messages: suggestedQuestionsPrompt(exchanges),
      model_parameters: suggestionSettings(soul.model.model_settings),
      stream: false,
    },
  });
  const prepared = await deps.llm.prepare(request);
  if (!prepared.ok) throw new SuggestionRefused(prepared.code === 'agent_llm_quota_exceeded' ? 'quota' : 'model', prepared.message);

  // Not cut when the client goes away: the call is billed either way, so its questions are kept for the next GET.
  let text = '';
  for await (const chunk of prepared.run(new AbortController().signal)) {
    if ('error_type' in chunk.data) {
      // As Dify: a failed model call answers no questions (and stores none, so a later GET tries again).
      const { error_type, code } = chunk.data;
      deps.logger.warn({ message_id: message.id, error_type, code }, 'suggested questions: model call failed');
      return [];
    }
    text += chunk.data.delta.message.content;
  }
  const questions = parseSuggestedQuestions(text);
  if (questions.length === 0) {
    deps.logger.warn({ message_id: message.id, chars: text.length }, 'suggested questions: the model answered no readable questions');
    return [];
  }
  // A concurrent GET may have stored its questions first: every GET answers the row that won.
  await db.messageSuggestedQuestion.createMany({
    data: [{ message_id: message.id, tenant_id: message.tenant_id, questions }],
    skipDuplicates: true,
  });
  const row = await db.messageSuggestedQuestion.findUniqueOrThrow({ where: { message_id: message.id } });
  return row.questions as string[];
}
