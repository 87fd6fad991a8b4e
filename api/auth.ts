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
  /** The app API key of the request (service API); its turns are recorded with it (messages.api_token_id). */
  apiTokenId?: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    appCtx?: AppContext;
  }
}

/**
 * Every appKeyAuth's 5 s cache in this process, so a revoke here takes effect at once; other replicas evict the key
 * when its revoke's NOTIFY reaches their credential watch (api/credential-watch.ts), the 5 s being the bound without it.
 */
const caches = new Set<Map<string, { ctx: AppContext; at: number }>>();
export function evictAppKey(tokenHash: string): void {
  for (const c of caches) c.delete(tokenHash);
}
/** The same by the key's id (what a revoke's NOTIFY carries); '*' empties the caches. */
export function evictAppKeyId(tokenId: string): void {
  for (const c of caches) for (const [hash, hit] of c) if (tokenId === '*' || hit.ctx.apiTokenId === tokenId) c.delete(hash);
}

/** How fresh an app key's `last_used_at` is kept: written when older than this (so not on every request). */
const LAST_USED_RESOLUTION_MS = 60_000;

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
      // "Last used" in the studio's API keys screen (issue 42): at most once a minute per key, on a cache miss.
      if (!token.last_used_at || Date.now() - token.last_used_at.getTime() > LAST_USED_RESOLUTION_MS)
        await db.apiToken
          .updateMany({
            where: { id: token.id, OR: [{ last_used_at: null }, { last_used_at: { lt: new Date(Date.now() - LAST_USED_RESOLUTION_MS) } }] },
            data: { last_used_at: new Date() },
          })
          .catch(() => undefined);
      const ctx: AppContext = {
        tenantId: token.tenant_id,
        appId: token.app_id,
        agentId: token.app.agent?.id ?? null,
        appName: token.app.name,
        apiTokenId: token.id,
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
