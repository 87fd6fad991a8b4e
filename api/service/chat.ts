/** Chat routes: send a message (streaming or blocking), re-attach to a turn's stream, stop a turn. */
import { Router } from 'express';
import type { Client } from '@temporalio/client';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { EventNotifier } from '../../core/protocol/event-log.js';
import type { Logger } from '../../core/platform/logger.js';
import type { ErrorCode } from '../../core/protocol/error-codes.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { ChatRequest, StopRequest, Uuid, UserId } from '../schemas.js';
import { collectTurn, lastEventId, queuedFrame, streamCredential, streamTurn } from '../turns/stream.js';
import type { CredentialWatch } from '../credential-watch.js';
import { startTurn } from '../turns/start.js';
import { findOwnedMessage } from '../ownership.js';
import { requestStop } from '../turns/stop.js';

export interface ChatRouteDeps {
  db: Db;
  backend: AgentBackendClient;
  temporal: Client;
  outbox: OutboxDispatcher;
  notifier: EventNotifier;
  config: Config;
  logger: Logger;
  /** Ends a stream whose app key is revoked (absent: streams outlive their key). */
  credentials?: CredentialWatch;
}

export function chatRoutes(deps: ChatRouteDeps): Router {
  const r = Router();
  const { db } = deps;

  r.post('/chat-messages', async (req, res) => {
    const startedAtMs = performance.now();
    const app = appCtx(req);
    const body = parseOr400(ChatRequest, req.body);
    const turn = await startTurn(deps, app, body);
    if (body.response_mode === 'streaming') {
      // Queued behind the turn in flight (multitask): the stream says so first, with the message's id and place in line.
      const queued = turn.queued ? await queuedFrame(db, turn.messageId, { always: true }) : null;
      const credential = streamCredential(deps.credentials, app);
      await streamTurn(
        { db, notifier: deps.notifier, pingMs: deps.config.SSE_PING_MS, startedAtMs, credential },
        req,
        res,
        turn.messageId,
        0,
        queued,
      );
      return;
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const credential = streamCredential(deps.credentials, app);
    const events = await collectTurn({ db, notifier: deps.notifier, credential }, turn.messageId, abort.signal);
    const last = events.at(-1);
    if (last?.event === 'error') throw new HttpError(last.data.status, last.data.code as ErrorCode, last.data.message); // the turn's own error event: a registry code
    let answer = '';
    let metadata: object = {};
    for (const e of events) {
      if (e.event === 'message') answer = e.data.answer;
      else if (e.event === 'message_end') metadata = e.data.metadata;
    }
    res.json({
      event: 'message',
      task_id: turn.messageId,
      id: turn.messageId,
      message_id: turn.messageId,
      conversation_id: turn.conversationId,
      mode: 'agent',
      answer,
      metadata,
      created_at: turn.createdAt,
    });
  });

  /** Extension: re-attach to a turn's stream; honours Last-Event-ID. A message still queued starts with `message_queued` (its place now). */
  r.get('/chat-messages/:task_id/events', async (req, res) => {
    const app = appCtx(req);
    const taskId = parseOr400(Uuid, req.params.task_id, 'task_id');
    const user = parseOr400(UserId, req.query.user, 'user');
    const after = lastEventId(req);
    const msg = await findOwnedMessage(db, app.appId, user, taskId);
    const queued = msg.status === 'queued' ? await queuedFrame(db, msg.id) : null;
    const credential = streamCredential(deps.credentials, app);
    await streamTurn({ db, notifier: deps.notifier, pingMs: deps.config.SSE_PING_MS, credential }, req, res, msg.id, after, queued);
  });

  r.post('/chat-messages/:task_id/stop', async (req, res) => {
    const app = appCtx(req);
    const taskId = parseOr400(Uuid, req.params.task_id, 'task_id');
    const { user } = parseOr400(StopRequest, req.body);
    const msg = await findOwnedMessage(db, app.appId, user, taskId);
    await requestStop(deps, msg);
    res.json({ result: 'success' });
  });

  return r;
}
