/**
 * A document's bytes → its chunks and their token counts: the CPU-heavy part of indexing (text extraction, chunking,
 * tokenising). Runs in the parse child (core/domain/knowledge/parse-child.ts) for anything but small plain text.
 */
import { countTokens } from '../llm/tokens.js';
import { chunkText, type ChunkOptions } from './chunk.js';
import { KnowledgeError } from './errors.js';
import { extractDocumentText, type DocumentKind, type ParseLimits } from './parse.js';

/** Most chunks one document may become (413 `document_too_large` beyond). */
export const DOCUMENT_MAX_CHUNKS = 5000;

export interface PreparedDocument {
  chunks: string[];
  tokens: number[];
}

export async function prepareDocument(
  kind: DocumentKind,
  bytes: Uint8Array,
  limits: ParseLimits,
  chunking: ChunkOptions = {},
): Promise<PreparedDocument> {
  const text = await extractDocumentText(kind, bytes, limits);
  const chunks = chunkText(text, chunking);
  if (chunks.length === 0) throw new KnowledgeError(422, 'document_empty', 'The document has no text to index.');
  if (chunks.length > DOCUMENT_MAX_CHUNKS)
    throw new KnowledgeError(413, 'document_too_large', `The document makes more than ${DOCUMENT_MAX_CHUNKS} chunks.`);
  return { chunks, tokens: chunks.map((c) => countTokens(c)) };
}
