/**
 * The console key check (`Authorization: Bearer <console key>` of an account) for routers mounted under
 * /console/api with their own paths (tool providers, datasets): sets `req.consoleCtx` (declared in routes/console.ts).
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { hashApiKey } from '../../core/domain/api-keys.js';
import type { Db } from '../../core/platform/db.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';

export function consoleAuth(db: Db): RequestHandler {
  return async (req: Request, _res: Response, next: NextFunction) => {
    try {
      const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
      if (!m) throw new HttpError(401, 'unauthorized', 'Authorization header must be "Bearer <console key>".');
      const token = await db.consoleToken.findUnique({ where: { token_hash: hashApiKey(m[1]!) } });
      if (!token || token.revoked_at) throw new HttpError(401, 'unauthorized', 'Console key is invalid.');
      req.consoleCtx = { tenantId: token.tenant_id, accountId: token.account_id };
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** The authenticated caller (after consoleAuth). */
export function consoleCaller(req: Request): { tenantId: string; accountId: string } {
  if (!req.consoleCtx) throw new HttpError(401, 'unauthorized', 'Console key is required.');
  return req.consoleCtx;
}

/** The app (with its agent) at `:app_id`, in the caller's tenant only: 404 for any other, never 403. */
export async function consoleApp(db: Db, req: Request) {
  const ctx = consoleCaller(req);
  const appId = parseOr400(Uuid, req.params.app_id, 'app_id');
  const app = await db.app.findFirst({ where: { id: appId, tenant_id: ctx.tenantId }, include: { agent: true } });
  if (!app?.agent) throw new HttpError(404, 'app_not_found', 'App not found.');
  return { app, agent: app.agent, ctx };
}
