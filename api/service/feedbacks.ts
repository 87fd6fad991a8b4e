/**
 * Message feedback (Dify's POST /v1/messages/{message_id}/feedbacks): one like/dislike per end user and
 * message, replaced by a new rating and removed by `rating: null`. Only the message's own user may rate it.
 */
import { Router } from 'express';
import type { Db } from '../../core/platform/db.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { FeedbackRequest, Uuid } from '../schemas.js';

export function feedbackRoutes(deps: { db: Db }): Router {
  const r = Router();
  const { db } = deps;

  r.post('/messages/:message_id/feedbacks', async (req, res) => {
    const app = appCtx(req);
    const messageId = parseOr400(Uuid, req.params.message_id, 'message_id');
    const body = parseOr400(FeedbackRequest, req.body ?? {});
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: body.user } } });
    const msg = endUser
      ? await db.message.findFirst({
          where: { id: messageId, app_id: app.appId, end_user_id: endUser.id, conversation: { deleted_at: null } },
        })
      : null;
    if (!msg || !endUser) throw new HttpError(404, 'message_not_exists', 'Message Not Exists.');
    const key = { message_id_from_end_user_id: { message_id: msg.id, from_end_user_id: endUser.id } };
    if (body.rating === null) {
      await db.messageFeedback.deleteMany({ where: { message_id: msg.id, from_end_user_id: endUser.id } });
    } else {
      const content = body.content ?? null;
      await db.messageFeedback.upsert({
        where: key,
        update: { rating: body.rating, content },
        create: {
          app_id: app.appId,
          conversation_id: msg.conversation_id,
          message_id: msg.id,
          from_end_user_id: endUser.id,
          rating: body.rating,
          content,
        },
      });
    }
    res.json({ result: 'success' });
  });

  return r;
}
