/**
 * Who owns what in the public API: end users are scoped to their app, and a conversation or message is only
 * found for the end user who owns it (404 otherwise, never 403: nothing to probe).
 */
import type { Db } from '../core/platform/db.js';
import type { AppContext } from './auth.js';
import { HttpError } from './errors.js';

/** The app's end user of this session id, if it exists. */
export function findEndUser(db: Db, app: Pick<AppContext, 'appId'>, user: string) {
  return db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: user } } });
}

export async function upsertEndUser(db: Db, app: AppContext, user: string) {
  // A returning user is one read. A new one: insert-or-ignore then read (Prisma's upsert is
  // select-then-insert, which races between first requests).
  const where = { app_id_session_id: { app_id: app.appId, session_id: user } };
  const existing = await findEndUser(db, app, user);
  if (existing) return existing;
  await db.endUser.createMany({ data: [{ tenant_id: app.tenantId, app_id: app.appId, session_id: user }], skipDuplicates: true });
  return db.endUser.findUniqueOrThrow({ where });
}

/** The live conversation if it belongs to this app and end user; 404 otherwise. */
export async function findOwnedConversation(db: Db, appId: string, user: string, conversationId: string) {
  const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: appId, session_id: user } } });
  const conv = endUser
    ? await db.conversation.findFirst({ where: { id: conversationId, app_id: appId, end_user_id: endUser.id, deleted_at: null } })
    : null;
  if (!conv) throw new HttpError(404, 'conversation_not_exists', 'Conversation Not Exists.');
  return conv;
}

/** The message if it belongs to this app and this end user; 404 otherwise (never 403: no probing). */
export async function findOwnedMessage(db: Db, appId: string, user: string, messageId: string) {
  const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: appId, session_id: user } } });
  const msg = endUser ? await db.message.findFirst({ where: { id: messageId, app_id: appId, end_user_id: endUser.id } }) : null;
  if (!msg) throw new HttpError(404, 'not_found', 'Task not found.');
  return msg;
}
