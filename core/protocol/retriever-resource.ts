/**
 * Dify's RetrieverResource, its "citation and attribution" of a knowledge answer, in Dify's field names: the chunks the
 * answer was given, in message_end `metadata.retriever_resources` and in GET /v1/messages `retriever_resources`
 * (docs/knowledge.md "Citations"). One schema for the event, the history and the OpenAPI document.
 */
import { z } from 'zod';

export const RetrieverResource = z
  .object({
    /** 1, 2, …: the number the model was told to cite the passage by ("[1]"). */
    position: z.number().int().min(1),
    dataset_id: z.uuid(),
    dataset_name: z.string(),
    document_id: z.uuid(),
    document_name: z.string(),
    segment_id: z.uuid(),
    /** The combined 0–1 score of docs/knowledge.md. */
    score: z.number(),
    /** The chunk's text as the model got it. */
    content: z.string(),
  })
  .meta({ description: "One chunk a knowledge answer was given (Dify's retriever resource), when the app's retriever_resource is on." });
export type RetrieverResource = z.infer<typeof RetrieverResource>;
