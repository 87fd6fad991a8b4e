/** Signed execution context: lets the agent stub prove a run's scope to the inner API. */
import crypto from 'node:crypto';
import type { ExecutionContextLayerConfig } from './protocol/run.js';

type Unsigned = Omit<ExecutionContextLayerConfig, 'signature'>;

function canonical(ctx: Unsigned): string {
  const keys = Object.keys(ctx).sort() as (keyof Unsigned)[];
  return JSON.stringify(keys.map((k) => [k, ctx[k] ?? null]));
}

export function signExecutionContext(ctx: Unsigned, secret: string): ExecutionContextLayerConfig {
  const signature = crypto.createHmac('sha256', secret).update(canonical(ctx)).digest('hex');
  return { ...ctx, signature };
}

export function verifyExecutionContext(ctx: ExecutionContextLayerConfig, secret: string): boolean {
  if (!ctx.signature) return false;
  const { signature, ...rest } = ctx;
  const expected = crypto.createHmac('sha256', secret).update(canonical(rest)).digest();
  const got = Buffer.from(signature, 'hex');
  return got.length === expected.length && crypto.timingSafeEqual(got, expected);
}
