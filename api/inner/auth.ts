/** `X-Inner-Api-Key` check for every inner API route (agent backend → api callbacks). */
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

export const INNER_API_KEY_HEADER = 'x-inner-api-key';

/** Constant-time comparison of two secrets of any length (both are hashed to 32 bytes first). */
export function secretsEqual(given: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b) && given.length === expected.length;
}

export function requireInnerApiKey(expected: string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const given = req.get(INNER_API_KEY_HEADER);
    if (typeof given !== 'string' || !secretsEqual(given, expected)) {
      res.status(401).json({ code: 'unauthorized', message: 'missing or invalid X-Inner-Api-Key', status: 401 });
      return;
    }
    next();
  };
}
