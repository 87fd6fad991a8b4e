/**
 * Dify's GET /v1/messages/{message_id}/suggested?user= (docs/PROTOCOL.md §1): `{result: "success", data: [three
 * questions]}` after a message's answer, when the agent's active config has `features.suggested_questions_after_answer`
 * on (what GET /v1/parameters reports). The questions come from core/domain/suggested-questions.ts (the agent's model
 * through the api's gateway, billed once per message, kept per message).
 *
 * Refusals: 404 `message_not_exists` for a message that is not this user's (another user's, app's, a deleted
 * conversation's or a rolled-back one: never 403, so ids cannot be probed), 403
 * `app_suggested_questions_after_answer_disabled` (Dify's), 409 `message_not_finished` while its turn is in flight,
 * 400 `provider_quota_exceeded` / `completion_request_error` when the gateway refuses the call.
 */
import { Router } from 'express';
import type { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { Message } from '../../core/generated/prisma/client.js';
import type { Logger } from '../../core/platform/logger.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { parseEncryptionKey } from '../../core/domain/llm/credentials.js';
import { createLlmInvoker } from '../../core/domain/llm/invoke.js';
import type { ProviderRegistry } from '../../core/domain/llm/provider.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { suggestedQuestions, SuggestionRefused } from '../../core/domain/suggested-questions.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { UserQuery, Uuid, type SuggestedQuestionsResponse } from '../schemas.js';

/** A turn still producing its answer (or waiting its turn, or for a human): nothing to follow up yet. */
const IN_FLIGHT = new Set(['pending', 'running', 'paused', 'queued']);

export interface SuggestedDeps {
  db: Db;
  config: Config;
  logger: Logger;
  /** The deployment's model providers (default: from `config`). */
  providers?: ProviderRegistry;
}

/**
 * The checks and answer both doors share (this route and the studio debugger's, api/console/debugger.ts): the config's
 * flag (403), a turn in flight (409), then the questions, a gateway refusal as its registry code.
 */
export function suggestionAnswerer(deps: SuggestedDeps): (message: Message, soul: AgentSoulConfig) => Promise<string[]> {
  const log = deps.logger.child({ component: 'suggested-questions' });
  // Without the gateway cache: one read of credentials and pool per call, which this rare request can afford.
  const llm = createLlmInvoker({
    db: deps.db,
    providers: deps.providers ?? createDefaultProviders(deps.config),
    encryptionKey: parseEncryptionKey(deps.config.ENCRYPTION_KEY),
    logger: log,
  });
  return async (message, soul) => {
    if (!soul.features.suggested_questions_after_answer.enabled)
      throw new HttpError(403, 'app_suggested_questions_after_answer_disabled', 'Function Suggested questions after answer disabled.');
    if (IN_FLIGHT.has(message.status))
      throw new HttpError(
        409,
        'message_not_finished',
        'The message has not finished its turn yet: ask for its suggestions after its answer.',
      );
    try {
      return await suggestedQuestions({ db: deps.db, llm, logger: log }, message, soul);
    } catch (err) {
      if (!(err instanceof SuggestionRefused)) throw err;
      if (err.kind === 'quota') throw new HttpError(400, 'provider_quota_exceeded', "Your quota for the app's model has been used up.");
      throw new HttpError(400, 'completion_request_error', err.message);
    }
  };
}

export function suggestedRoutes(deps: SuggestedDeps): Router {
  const r = Router();
  const { db } = deps;
  const answer = suggestionAnswerer(deps);

  r.get('/messages/:message_id/suggested', async (req, res) => {
    const app = appCtx(req);
    const messageId = parseOr400(Uuid, req.params.message_id, 'message_id');
    const { user } = parseOr400(UserQuery.required({ user: true }), req.query, 'query');
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: user } } });
    const message = endUser
      ? await db.message.findFirst({
          where: { id: messageId, app_id: app.appId, end_user_id: endUser.id, rolled_back_at: null, conversation: { deleted_at: null } },
        })
      : null;
    if (!message) throw new HttpError(404, 'message_not_exists', 'Message Not Exists.');

    const agent = app.agentId ? await db.agent.findUnique({ where: { id: app.agentId }, include: { active_config_snapshot: true } }) : null;
    const soul = AgentSoulConfig.safeParse(agent?.active_config_snapshot?.config_snapshot ?? null);
    if (!soul.success) throw new HttpError(400, 'app_unavailable', 'App unavailable, please check your app configurations.');
    const body: z.input<typeof SuggestedQuestionsResponse> = { result: 'success', data: await answer(message, soul.data) };
    res.json(body);
  });

  return r;
}
