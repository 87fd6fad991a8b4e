/**
 * Knowledge retrieval (docs/PROTOCOL.md §3, docs/knowledge.md): `POST /inner/api/knowledge/retrieve`, called by the
 * agent backend's `knowledge` module with the run's signed execution context. One schema for both sides.
 */
import { z } from 'zod';
import { ExecutionContextLayerConfig } from './run.js';

export const RetrieveRequest = z
  .object({
    execution_context: ExecutionContextLayerConfig,
    dataset_ids: z.array(z.uuid()).min(1).max(20),
    query: z.string().trim().min(1).max(4000),
    top_k: z.number().int().min(1).max(20).default(4),
    score_threshold: z.number().min(0).max(1).default(0),
    /** Why the backend retrieves: `eager` (before the first model request) or `knowledge_search` (the tool). */
    source: z.enum(['eager', 'knowledge_search']),
  })
  .strict();
export type RetrieveRequest = z.input<typeof RetrieveRequest>;

/** One retrieved chunk with its source label. `score` is the combined 0–1 score of docs/knowledge.md. */
export const RetrievedChunk = z.object({
  chunk_id: z.uuid(),
  dataset_id: z.uuid(),
  dataset_name: z.string(),
  document_id: z.uuid(),
  document_name: z.string(),
  position: z.number().int().nonnegative(),
  content: z.string(),
  score: z.number().min(0).max(1),
});
export type RetrievedChunk = z.infer<typeof RetrievedChunk>;

export const RetrieveResponse = z.object({ chunks: z.array(RetrievedChunk) });
export type RetrieveResponse = z.infer<typeof RetrieveResponse>;
