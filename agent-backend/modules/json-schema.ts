/**
 * A tool's parameters as JSON Schema, from its zod schema: converted once per schema object and shared (the
 * conversion walks the whole schema; tools are listed on every model request of every run). Callers treat the
 * result as read-only.
 */
import { z } from 'zod';

const cache = new WeakMap<z.ZodType, Record<string, unknown>>();

export function toolParameters(schema: z.ZodType, opts: { io?: 'input' | 'output' } = {}): Record<string, unknown> {
  let s = cache.get(schema);
  if (!s) {
    s = z.toJSONSchema(schema, opts.io ? { io: opts.io } : undefined) as Record<string, unknown>;
    delete s.$schema;
    cache.set(schema, s);
  }
  return s;
}
