/**
 * POST /console/api/apps/{app_id}/agent/debug/conversations/{conversation_id}/fork (issue 35 item 2): the console's
 * fork of one of the caller's debugger conversations at any of its messages. The fork itself is the service route's
 * (api/service/fork.ts forkConversation): a copy of the thread up to that message, its own binding holding the session
 * after it, a copy of the workspace (`workspace_copy` says what it took and left out). The copy keeps the source's account and invoke_from, so the fork is a debugger
 * conversation of the same account (listed by …/agent/debug/conversations, answered by …/agent/debug/chat-messages).
 * Another account's debugger conversation, or another tenant's app, reads as missing (404). Mounted by
 * api/console/agent.ts behind the console key.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { forkConversation, type ForkConfig } from '../service/fork.js';
import { toConversation } from '../service/conversations.js';
import { consoleApp } from './auth.js';
import { DEBUGGER } from './debugger.js';

export const DebugForkRequest = z.object({ message_id: Uuid });

export interface ConsoleForkDeps {
  db: Db;
  config: ForkConfig;
  logger: Logger;
}

export function consoleForkRoutes(deps: ConsoleForkDeps): Router {
  const { db } = deps;
  const r = Router();

  r.post('/apps/:app_id/agent/debug/conversations/:conversation_id/fork', async (req, res) => {
    const { app, ctx } = await consoleApp(db, req);
    const id = parseOr400(Uuid, req.params.conversation_id, 'conversation_id');
    const body = parseOr400(DebugForkRequest, req.body ?? {});
    const conv = await db.conversation.findFirst({
      where: { id, app_id: app.id, account_id: ctx.accountId, invoke_from: DEBUGGER, deleted_at: null },
    });
    if (!conv) throw new HttpError(404, 'conversation_not_exists', 'Conversation Not Exists.');
    const fork = await forkConversation(deps, conv, body.message_id);
    res.status(201).json({
      ...toConversation(fork.conversation),
      active_message_id: fork.conversation.active_message_id,
      workspace_copy: fork.workspaceCopy,
    });
  });

  return r;
}
