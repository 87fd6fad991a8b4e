/**
 * Page-numbered lists in Dify's shape (its console and knowledge API: `?page=&limit=` → `{data, has_more, limit, total,
 * page}`), for every list route without a cursor of its own (issue 28 item 6). Defaults keep a client that never
 * paged working on small lists: page 1, limit 20; limit at most 100.
 */
import { z } from 'zod';
import { parseOr400 } from './errors.js';

export const PageQuery = z.object({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export type PageQuery = z.output<typeof PageQuery>;

/** `page` and `limit` from the query string (other parameters are the route's own), 400 naming the bad one. */
export function pageOf(query: unknown): PageQuery & { skip: number; take: number } {
  const q = (query ?? {}) as Record<string, unknown>;
  const p = parseOr400(PageQuery, { page: q.page, limit: q.limit }, 'query');
  return { ...p, skip: (p.page - 1) * p.limit, take: p.limit };
}

export function pageJson<T>(p: PageQuery, total: number, data: T[]) {
  return { data, has_more: p.page * p.limit < total, limit: p.limit, total, page: p.page };
}

/** The OpenAPI pieces of a paginated list: its two query parameters and the envelope around `item`. */
export const PAGE_PARAMETERS = [
  {
    name: 'page',
    in: 'query',
    required: false,
    description: 'Page number, from 1 (default 1).',
    schema: { type: 'integer', minimum: 1, default: 1 },
  },
  {
    name: 'limit',
    in: 'query',
    required: false,
    description: 'Items per page, 1–100 (default 20).',
    schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  },
];

export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), has_more: z.boolean(), limit: z.number().int(), total: z.number().int(), page: z.number().int() });
}
