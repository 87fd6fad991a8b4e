/**
 * Accepting a document into a dataset (docs/knowledge.md): checks its size, kind and the tenant's quotas, then writes
 * the document row (`status` waiting) and its bytes in one transaction; an indexing job (core/domain/knowledge/indexer.ts)
 * extracts the text off the event loop, chunks it, embeds the chunks when the dataset names an embedding model, and
 * writes the chunks in one transaction. Idempotent: the same content in the same dataset is one document (unique
 * dataset_id + sha256); uploading it again returns that document (indexed or still indexing), and a document whose
 * indexing failed is queued again from scratch.
 */
import crypto from 'node:crypto';
import type { Db } from '../../platform/db.js';
import type { Dataset, DatasetDocument } from '../../generated/prisma/client.js';
import { isErrorCode, type ErrorCode } from '../../protocol/error-codes.js';
import type { Embedder } from './embed.js';
import { KnowledgeError } from './errors.js';
import { DocumentIndexer, type IndexerOptions } from './indexer.js';
import { documentKind, KIND_MIME } from './parse.js';

export { DOCUMENT_MAX_CHUNKS } from './prepare.js';

/** Largest document accepted (bytes). */
export const DOCUMENT_MAX_BYTES = 15 * 1024 * 1024;

export interface DocumentInput {
  name: string;
  mimeType?: string | null;
  bytes: Uint8Array;
  createdBy?: string | null;
}

/** Per-tenant limits (TENANT_MAX_* in core/platform/config.ts); 0 = none. */
export interface TenantQuotas {
  maxDocuments: number;
  maxDocumentBytes: number;
}

export const NO_QUOTAS: TenantQuotas = { maxDocuments: 0, maxDocumentBytes: 0 };

export const IN_PROGRESS = ['waiting', 'parsing', 'indexing'] as const;
export const isInProgress = (status: string) => (IN_PROGRESS as readonly string[]).includes(status);

/** One transaction per tenant at a time counts and writes (quotas cannot be raced past). */
async function lockTenant(tx: Pick<Db, '$executeRaw'>, tenantId: string): Promise<void> {
  await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`knowledge-quota:${tenantId}`}, 0))`;
}

export async function checkDocumentQuotas(
  tx: Pick<Db, '$queryRaw'>,
  tenantId: string,
  quotas: TenantQuotas,
  adding: { documents: number; bytes: number },
): Promise<void> {
  if (!quotas.maxDocuments && !quotas.maxDocumentBytes) return;
  const [row] = await tx.$queryRaw<{ n: bigint; bytes: bigint | null }[]>`
    select count(*) as n, sum(size)::bigint as bytes from dataset_documents where tenant_id = ${tenantId}::uuid`;
  const n = Number(row?.n ?? 0);
  const bytes = Number(row?.bytes ?? 0);
  if (quotas.maxDocuments && n + adding.documents > quotas.maxDocuments)
    throw new KnowledgeError(
      403,
      'document_quota_exceeded',
      `The workspace has ${n} documents; at most ${quotas.maxDocuments} are allowed.`,
    );
  if (quotas.maxDocumentBytes && bytes + adding.bytes > quotas.maxDocumentBytes)
    throw new KnowledgeError(
      413,
      'storage_quota_exceeded',
      `The workspace's documents would take ${bytes + adding.bytes} bytes; at most ${quotas.maxDocumentBytes} are allowed.`,
    );
}

/**
 * Writes the document (status waiting) and its bytes, or finds the same content already there. `queued`: an indexing
 * job must run for it (a new document, or one whose indexing had failed).
 */
export async function acceptDocument(
  db: Db,
  dataset: Dataset,
  input: DocumentInput,
  quotas: TenantQuotas = NO_QUOTAS,
): Promise<{ document: DatasetDocument; created: boolean; queued: boolean }> {
  if (input.bytes.byteLength > DOCUMENT_MAX_BYTES)
    throw new KnowledgeError(413, 'document_too_large', `Documents may be at most ${DOCUMENT_MAX_BYTES / 1024 / 1024} MB.`);
  const kind = documentKind(input.name, input.mimeType);
  if (!kind) throw new KnowledgeError(415, 'unsupported_document_type', 'Documents must be plain text, Markdown, HTML or PDF.');
  const sha256 = crypto.createHash('sha256').update(input.bytes).digest('hex');
  const bytes = Buffer.from(input.bytes.buffer, input.bytes.byteOffset, input.bytes.byteLength) as Uint8Array<ArrayBuffer>;
  const existing = await db.datasetDocument.findUnique({ where: { dataset_id_sha256: { dataset_id: dataset.id, sha256 } } });
  if (existing && existing.status !== 'error') return { document: existing, created: false, queued: false };
  try {
    return await db.$transaction(async (tx) => {
      await lockTenant(tx, dataset.tenant_id);
      if (existing) {
        // Indexed again from scratch: the bytes again, the job from its first attempt (its size is already counted).
        const document = await tx.datasetDocument.update({
          where: { id: existing.id },
          data: {
            name: input.name,
            status: 'waiting',
            error: null,
            error_code: null,
            attempts: 0,
            lease_owner: null,
            lease_until: null,
            processing_started_at: null,
            parsing_completed_at: null,
            completed_at: null,
          },
        });
        await tx.datasetDocumentSource.upsert({
          where: { document_id: existing.id },
          create: { document_id: existing.id, bytes },
          update: { bytes },
        });
        return { document, created: false, queued: true };
      }
      await checkDocumentQuotas(tx, dataset.tenant_id, quotas, { documents: 1, bytes: input.bytes.byteLength });
      const document = await tx.datasetDocument.create({
        data: {
          tenant_id: dataset.tenant_id,
          dataset_id: dataset.id,
          name: input.name,
          mime_type: KIND_MIME[kind],
          size: input.bytes.byteLength,
          sha256,
          status: 'waiting',
          created_by: input.createdBy ?? null,
          source: { create: { bytes } },
        },
      });
      return { document, created: true, queued: true };
    });
  } catch (err) {
    // The same content uploaded twice at once: the other request has it.
    if ((err as { code?: string }).code === 'P2002') {
      const winner = await db.datasetDocument.findUnique({ where: { dataset_id_sha256: { dataset_id: dataset.id, sha256 } } });
      if (winner) return { document: winner, created: false, queued: false };
    }
    throw err;
  }
}

/**
 * Accepts and indexes a document to the end in this call (tests, seeds, scripts): what the upload route did before
 * indexing became a job. A document that cannot be indexed is removed again and its refusal thrown.
 */
export async function ingestDocument(
  deps: { db: Db; embed: Embedder; indexer?: DocumentIndexer; indexerOptions?: Partial<IndexerOptions> },
  dataset: Dataset,
  input: DocumentInput,
): Promise<{ document: DatasetDocument; created: boolean }> {
  const { db } = deps;
  const accepted = await acceptDocument(db, dataset, input);
  if (!accepted.queued && !isInProgress(accepted.document.status)) return accepted;
  const indexer = deps.indexer ?? new DocumentIndexer({ db, embed: deps.embed, ...deps.indexerOptions });
  const done = await indexer.indexNow(accepted.document.id);
  if (done.status === 'completed') return { document: done, created: accepted.created };
  if (accepted.created) await db.datasetDocument.deleteMany({ where: { id: done.id, status: 'error' } });
  throw documentFailure(done);
}

/** HTTP status of a stored indexing failure. */
const FAILURE_STATUS: Partial<Record<ErrorCode, KnowledgeError['status']>> = {
  document_unreadable: 400,
  embedding_unavailable: 400,
  document_too_large: 413,
  unsupported_document_type: 415,
  document_empty: 422,
  embedding_failed: 502,
};

/** A document whose indexing ended in `error`, as the refusal the upload would have answered. */
export function documentFailure(doc: Pick<DatasetDocument, 'error' | 'error_code'>): KnowledgeError | Error {
  const code = doc.error_code;
  const status = isErrorCode(code) ? FAILURE_STATUS[code] : undefined;
  if (!isErrorCode(code) || !status) return new Error(doc.error ?? 'indexing failed');
  return new KnowledgeError(status, code, doc.error ?? code);
}
