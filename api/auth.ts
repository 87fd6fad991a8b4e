/** `Authorization: Bearer <app api key>` → the app the key belongs to (revoked keys refused). */
import type { NextFunction, Request, Response } from 'express';
import { hashApiKey } from '../core/domain/api-keys.js';
import type { Db } from '../core/platform/db.js';
import { HttpError } from './errors.js';

export interface AppContext {
  tenantId: string;
  appId: string;
  agentId: string | null;
  appName: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    appCtx?: AppContext;
  }
}

/** Every appKeyAuth's 5 s cache in this process, so a revoke here takes effect at once (other replicas: within 5 s). */
const caches = new Set<Map<string, unknown>>();
export function evictAppKey(tokenHash: string): void {
  for (const c of caches) c.delete(tokenHash);
}

export function appKeyAuth(db: Db) {
  const cache = new Map<string, { ctx: AppContext; at: number }>();
  caches.add(cache);
  return async (req: Request, _res: Response, next: NextFunction) => {
    try {
      const header = req.headers.authorization ?? '';
      const m = /^Bearer\s+(\S+)$/i.exec(header);
      if (!m) throw new HttpError(401, 'unauthorized', 'Authorization header must be "Bearer <app api key>".');
      const hash = hashApiKey(m[1]!);
      const hit = cache.get(hash);
      if (hit && Date.now() - hit.at < 5000) {
        req.appCtx = hit.ctx;
        return next();
      }
      const token = await db.apiToken.findUnique({ where: { token_hash: hash }, include: { app: { include: { agent: true } } } });
      if (!token || token.revoked_at) throw new HttpError(401, 'unauthorized', 'Access token is invalid.');
      const ctx: AppContext = {
        tenantId: token.tenant_id,
        appId: token.app_id,
        agentId: token.app.agent?.id ?? null,
        appName: token.app.name,
      };
      cache.set(hash, { ctx, at: Date.now() });
      req.appCtx = ctx;
      next();
    } catch (err) {
      next(err);
    }
  };
}

export function appCtx(req: Request): AppContext {
  if (!req.appCtx) throw new HttpError(401, 'unauthorized', 'Missing app credentials.');
  return req.appCtx;
}
