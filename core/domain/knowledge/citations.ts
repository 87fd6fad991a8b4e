/**
 * Citations of a knowledge answer (issue 42 problem 6). Every retrieval a turn is served is recorded in its message's
 * metadata (`retriever_resources`, api/inner/knowledge.ts, with the chunk's text); when the turn's config had the
 * `retriever_resource` feature on (with knowledge), its preparation marked the message so (`retriever_resource:
 * {enabled: true}`, activities/prepare/build-request.ts), and the answer's citations are those records in Dify's
 * shape: once per chunk, in the order the model got them, numbered from 1 (the eager passages keep the numbers the
 * model was told to cite them by).
 */
import { z } from 'zod';
import { RetrieverResource } from '../../protocol/retriever-resource.js';

/** What the api records per chunk served (api/inner/knowledge.ts recordRetrieval): Dify's fields, unnumbered, with its source. */
const Recorded = RetrieverResource.omit({ position: true, content: true }).extend({
  source: z.string(),
  content: z.string().optional(),
});

const Marked = z.object({ retriever_resource: z.object({ enabled: z.literal(true) }) });

/** The metadata mark that this message's answer cites what it was given. */
export const CITATIONS_MARK = { retriever_resource: { enabled: true } } as const;

/** Whether a message's metadata says its answer carries citations. */
export function citationsOn(metadata: unknown): boolean {
  return Marked.safeParse(metadata).success;
}

/** The message's citations in Dify's shape; null when its config did not ask for them. */
export function retrieverResources(metadata: unknown): RetrieverResource[] | null {
  if (!citationsOn(metadata)) return null;
  const raw = (metadata as { retriever_resources?: unknown }).retriever_resources;
  const out: RetrieverResource[] = [];
  const seen = new Set<string>();
  for (const entry of Array.isArray(raw) ? raw : []) {
    const r = Recorded.safeParse(entry);
    if (!r.success || seen.has(r.data.segment_id)) continue;
    seen.add(r.data.segment_id);
    const { source: _source, content, ...fields } = r.data;
    out.push({ position: out.length + 1, ...fields, content: content ?? '' });
  }
  return out;
}
