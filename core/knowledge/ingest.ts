/**
 * Indexing a document into a dataset (README "Knowledge"): extract its text, chunk it with overlap, embed the chunks
 * when the dataset names an embedding model, and write the chunks with their tsvector (the dataset's language) in one
 * transaction. Synchronous in the upload request for now. Idempotent: the same content in the same dataset is one
 * document (unique dataset_id + sha256); uploading it again returns the indexed document, and a document whose
 * indexing failed is indexed again from scratch.
 */
import crypto from 'node:crypto';
import type { Db } from '../db.js';
import type { Dataset, DatasetDocument } from '../generated/prisma/client.js';
import { countTokens } from '../llm/tokens.js';
import { chunkText } from './chunk.js';
import { vectorLiteral, type Embedder } from './embed.js';
import { KnowledgeError } from './errors.js';
import { documentKind, extractDocumentText, KIND_MIME } from './parse.js';

/** Largest document accepted (bytes), and most chunks one document may become. */
export const DOCUMENT_MAX_BYTES = 15 * 1024 * 1024;
export const DOCUMENT_MAX_CHUNKS = 5000;

export interface DocumentInput {
  name: string;
  mimeType?: string | null;
  bytes: Uint8Array;
  createdBy?: string | null;
}

export async function ingestDocument(
  deps: { db: Db; embed: Embedder },
  dataset: Dataset,
  input: DocumentInput,
): Promise<{ document: DatasetDocument; created: boolean }> {
  const { db } = deps;
  if (input.bytes.byteLength > DOCUMENT_MAX_BYTES)
    throw new KnowledgeError(413, 'document_too_large', `Documents may be at most ${DOCUMENT_MAX_BYTES / 1024 / 1024} MB.`);
  const kind = documentKind(input.name, input.mimeType);
  if (!kind) throw new KnowledgeError(415, 'unsupported_document_type', 'Documents must be plain text, Markdown, HTML or PDF.');
  const sha256 = crypto.createHash('sha256').update(input.bytes).digest('hex');
  const existing = await db.datasetDocument.findUnique({ where: { dataset_id_sha256: { dataset_id: dataset.id, sha256 } } });
  if (existing?.status === 'completed') return { document: existing, created: false };

  const text = await extractDocumentText(kind, input.bytes);
  const chunks = chunkText(text);
  if (chunks.length === 0) throw new KnowledgeError(422, 'document_empty', 'The document has no text to index.');
  if (chunks.length > DOCUMENT_MAX_CHUNKS)
    throw new KnowledgeError(413, 'document_too_large', `The document makes more than ${DOCUMENT_MAX_CHUNKS} chunks.`);
  const embeddings =
    dataset.embedding_provider && dataset.embedding_model
      ? await deps.embed({ provider: dataset.embedding_provider, model: dataset.embedding_model }, chunks)
      : null;

  const fields = {
    name: input.name,
    mime_type: KIND_MIME[kind],
    size: input.bytes.byteLength,
    status: 'completed',
    error: null,
    chunk_count: chunks.length,
  };
  try {
    const document = await db.$transaction(
      async (tx) => {
        const doc = existing
          ? await tx.datasetDocument.update({ where: { id: existing.id }, data: fields })
          : await tx.datasetDocument.create({
              data: { ...fields, tenant_id: dataset.tenant_id, dataset_id: dataset.id, sha256, created_by: input.createdBy ?? null },
            });
        await tx.documentSegment.deleteMany({ where: { document_id: doc.id } });
        const positions = chunks.map((_, i) => i);
        const tokens = chunks.map((c) => countTokens(c));
        const vectors = chunks.map((_, i) => vectorLiteral(embeddings?.[i]));
        await tx.$executeRaw`
        insert into document_segments (id, tenant_id, dataset_id, document_id, position, content, char_count, token_count, content_tsv, embedding)
        select gen_random_uuid(), ${dataset.tenant_id}::uuid, ${dataset.id}::uuid, ${doc.id}::uuid, t.position, t.content,
               char_length(t.content), t.tokens, to_tsvector(${dataset.language}::regconfig, t.content), t.embedding::real[]
          from unnest(${positions}::int[], ${chunks}::text[], ${tokens}::int[], ${vectors}::text[]) as t(position, content, tokens, embedding)`;
        return doc;
      },
      { timeout: 60_000 },
    );
    return { document, created: !existing };
  } catch (err) {
    // The same content uploaded twice at once: the other request indexed it.
    if ((err as { code?: string }).code === 'P2002') {
      const winner = await db.datasetDocument.findUnique({ where: { dataset_id_sha256: { dataset_id: dataset.id, sha256 } } });
      if (winner) return { document: winner, created: false };
    }
    throw err;
  }
}
