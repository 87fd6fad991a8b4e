/**
 * Signed execution context: lets the agent stub prove a run's scope to the inner API (issue 17 L2).
 *
 * - Signed with EXECUTION_CONTEXT_SIGNING_KEY, a key only the api and the worker hold: the agent backend
 *   (which holds the inner API key) can forward a context but cannot mint or alter one.
 * - Carries `exp` (unix seconds); an expired context is refused.
 * - Bound to its turn: the api honours it only while the context's message is in progress, and (once the
 *   api recorded it) only from that message's backend run (api/inner/agent-config.ts).
 * - The signature is exactly 64 lowercase hex characters; anything else is refused before comparing.
 */
import crypto from 'node:crypto';
import type { ExecutionContextLayerConfig } from './run.js';

type Unsigned = Omit<ExecutionContextLayerConfig, 'signature' | 'exp'>;

/** How long a context stays valid when the caller does not say (EXECUTION_CONTEXT_TTL_MS). */
export const DEFAULT_EXECUTION_CONTEXT_TTL_MS = 2 * 3_600_000;

const SIGNATURE = /^[0-9a-f]{64}$/;

function canonical(ctx: Omit<ExecutionContextLayerConfig, 'signature'>): string {
  const keys = Object.keys(ctx).sort() as (keyof typeof ctx)[];
  return JSON.stringify(keys.map((k) => [k, ctx[k] ?? null]));
}

export function signExecutionContext(
  ctx: Unsigned,
  secret: string,
  opts: { ttlMs?: number; now?: number } = {},
): ExecutionContextLayerConfig {
  const exp = Math.floor(((opts.now ?? Date.now()) + (opts.ttlMs ?? DEFAULT_EXECUTION_CONTEXT_TTL_MS)) / 1000);
  const body = { ...ctx, exp };
  const signature = crypto.createHmac('sha256', secret).update(canonical(body)).digest('hex');
  return { ...body, signature };
}

export type ContextVerdict =
  { ok: true } | { ok: false; reason: 'unsigned' | 'malformed_signature' | 'bad_signature' | 'no_expiry' | 'expired' };

export function checkExecutionContext(ctx: ExecutionContextLayerConfig, secret: string, now = Date.now()): ContextVerdict {
  if (!ctx.signature) return { ok: false, reason: 'unsigned' };
  if (!SIGNATURE.test(ctx.signature)) return { ok: false, reason: 'malformed_signature' };
  const { signature, ...rest } = ctx;
  const expected = crypto.createHmac('sha256', secret).update(canonical(rest)).digest();
  if (!crypto.timingSafeEqual(Buffer.from(signature, 'hex'), expected)) return { ok: false, reason: 'bad_signature' };
  if (typeof ctx.exp !== 'number') return { ok: false, reason: 'no_expiry' };
  if (ctx.exp * 1000 <= now) return { ok: false, reason: 'expired' };
  return { ok: true };
}

export function verifyExecutionContext(ctx: ExecutionContextLayerConfig, secret: string, now = Date.now()): boolean {
  return checkExecutionContext(ctx, secret, now).ok;
}
