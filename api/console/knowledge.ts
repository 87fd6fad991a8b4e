/**
 * Console knowledge API (`/console/api/datasets…`, docs/knowledge.md): datasets of the caller's tenant, their
 * documents (multipart `file` or JSON `{name, text}`; text, Markdown, HTML, PDF) and a hit test. Indexing is a job
 * (core/domain/knowledge/indexer.ts, issue 28): the upload writes the document and waits at most KNOWLEDGE_INDEX_WAIT_MS for
 * it — 201 indexed, or the refusal (400/413/422/502) with nothing kept — else answers 202 with the document still
 * `waiting|parsing|indexing`; its progress is `GET …/documents/{batch}/indexing-status` (Dify's; batch = document id).
 * Idempotent: the same content in a dataset is one document. Lists are paginated (`page`, `limit`); datasets,
 * documents and their bytes have per-tenant quotas (TENANT_MAX_*).
 */
import busboy from 'busboy';
import { Router, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import { KnowledgeError } from '../../core/domain/knowledge/errors.js';
import {
  acceptDocument,
  documentFailure,
  DOCUMENT_MAX_BYTES,
  isInProgress,
  type DocumentInput,
} from '../../core/domain/knowledge/ingest.js';
import { DocumentIndexer } from '../../core/domain/knowledge/indexer.js';
import type { Embedder } from '../../core/domain/knowledge/embed.js';
import type { Logger } from '../../core/platform/logger.js';
import { pageJson, pageOf } from '../pagination.js';
import { retrieveChunks } from '../../core/domain/knowledge/retrieve.js';
import type { Dataset, DatasetDocument } from '../../core/generated/prisma/client.js';
import { unixSeconds } from '../../core/platform/time.js';
import { ChunkSettings, chunkSettingsJson } from '../../core/domain/knowledge/chunk-settings.js';
import { vectorLiteral } from '../../core/domain/knowledge/embed.js';
import { countTokens } from '../../core/domain/llm/tokens.js';
import { consoleAuth, consoleCaller } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { truncated } from '../service/files.js';

const Name = z.string().trim().min(1).max(255);
/** A PostgreSQL text search configuration name; that it exists is checked against pg_ts_config. */
const Language = z.string().regex(/^[a-z_]{1,63}$/, 'a text search configuration name such as english or simple');

export const CreateDatasetBody = z
  .object({
    name: Name,
    description: z.string().max(2000).default(''),
    language: Language.default('english'),
    embedding: z
      .object({ provider: z.string().min(1).max(100), model: z.string().min(1).max(200) })
      .strict()
      .nullable()
      .default(null),
    /** How its documents are cut (issue 42); absent: the chunker's defaults. */
    chunk_settings: ChunkSettings.optional(),
  })
  .strict();
export const ChunkSettingsBody = ChunkSettings;
export const SegmentUpdateBody = z
  .object({
    enabled: z.boolean().optional(),
    /** New text: re-tokenised, re-indexed for full text and trigrams, and re-embedded with the dataset's model. */
    content: z.string().trim().min(1).max(20_000).optional(),
  })
  .strict()
  .refine((b) => b.enabled !== undefined || b.content !== undefined, { message: 'name enabled or content' });
export const TextDocumentBody = z.object({ name: Name, text: z.string().min(1).max(1_000_000) }).strict();
export const HitTestBody = z
  .object({
    query: z.string().trim().min(1).max(4000),
    top_k: z.number().int().min(1).max(20).default(4),
    score_threshold: z.number().min(0).max(1).default(0),
  })
  .strict();

export type KnowledgeConfig = Pick<
  Config,
  | 'JSON_MAX_DEPTH'
  | 'KNOWLEDGE_PARSE_TIMEOUT_MS'
  | 'KNOWLEDGE_PARSE_MEMORY_MB'
  | 'KNOWLEDGE_PARSE_MAX_PAGES'
  | 'KNOWLEDGE_PARSE_MAX_TEXT_BYTES'
  | 'KNOWLEDGE_INDEX_WAIT_MS'
  | 'KNOWLEDGE_INDEX_CONCURRENCY'
  | 'TENANT_MAX_DATASETS'
  | 'TENANT_MAX_DOCUMENTS'
  | 'TENANT_MAX_DOCUMENT_BYTES'
>;

export interface KnowledgeRouteDeps {
  db: Db;
  embed: Embedder;
  config: KnowledgeConfig;
  logger?: Logger;
  /** Default: one of this process's own, started here. */
  indexer?: DocumentIndexer;
}

/** This process's indexer, from the configuration (one per api app). */
export function createIndexer(deps: { db: Db; embed: Embedder; config: KnowledgeConfig; logger?: Logger }): DocumentIndexer {
  const c = deps.config;
  return new DocumentIndexer({
    db: deps.db,
    embed: deps.embed,
    logger: deps.logger,
    concurrency: c.KNOWLEDGE_INDEX_CONCURRENCY,
    limits: {
      timeoutMs: c.KNOWLEDGE_PARSE_TIMEOUT_MS,
      memoryMb: c.KNOWLEDGE_PARSE_MEMORY_MB,
      maxPages: c.KNOWLEDGE_PARSE_MAX_PAGES,
      maxTextBytes: c.KNOWLEDGE_PARSE_MAX_TEXT_BYTES,
    },
  });
}

const knowledgeHttpError = (err: unknown) => (err instanceof KnowledgeError ? new HttpError(err.status, err.code, err.message) : err);

export function knowledgeRoutes(deps: KnowledgeRouteDeps): Router {
  const { db, config } = deps;
  const indexer = deps.indexer ?? createIndexer(deps).start();
  const quotas = { maxDocuments: config.TENANT_MAX_DOCUMENTS, maxDocumentBytes: config.TENANT_MAX_DOCUMENT_BYTES };
  const r = Router();
  // Only /datasets… is this router's: anything else passes through untouched to the other console routes.
  r.use('/datasets', consoleAuth(db));
  // Bodies are read only once the console key is known (JSON: 1 MB; multipart documents: DOCUMENT_MAX_BYTES).
  r.use('/datasets', jsonBody({ limit: '1mb', maxDepth: deps.config.JSON_MAX_DEPTH, rejectNul: true }));

  /** A dataset of the caller's tenant; another tenant's reads as missing. */
  async function datasetOf(req: Request, tenantId: string): Promise<Dataset> {
    const id = parseOr400(Uuid, req.params.dataset_id, 'dataset_id');
    const ds = await db.dataset.findFirst({ where: { id, tenant_id: tenantId } });
    if (!ds) throw new HttpError(404, 'dataset_not_found', 'Dataset not found.');
    return ds;
  }

  r.post('/datasets', async (req, res) => {
    const { tenantId, accountId } = consoleCaller(req);
    const body = parseOr400(CreateDatasetBody, req.body ?? {});
    const known = await db.$queryRaw<{ n: bigint }[]>`select count(*) as n from pg_ts_config where cfgname = ${body.language}`;
    if (Number(known[0]?.n ?? 0) === 0)
      throw new HttpError(400, 'invalid_param', `language: ${body.language} is not a text search configuration of this database.`);
    if (body.embedding) {
      // Probe once: a dataset whose chunks cannot be embedded is refused now, not at its first upload.
      await deps.embed(body.embedding, ['probe']).catch((err: unknown) => {
        throw new HttpError(400, 'embedding_unavailable', `embedding: ${(err as Error)?.message ?? err}`);
      });
    }
    const ds = await db.$transaction(async (tx) => {
      // Counted and created under the tenant's lock: concurrent creates cannot pass the quota together.
      await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`knowledge-quota:${tenantId}`}, 0))`;
      if (config.TENANT_MAX_DATASETS) {
        const n = await tx.dataset.count({ where: { tenant_id: tenantId } });
        if (n >= config.TENANT_MAX_DATASETS)
          throw new HttpError(
            403,
            'dataset_quota_exceeded',
            `The workspace has ${n} datasets; at most ${config.TENANT_MAX_DATASETS} are allowed.`,
          );
      }
      return tx.dataset.create({
        data: {
          tenant_id: tenantId,
          name: body.name,
          description: body.description,
          language: body.language,
          embedding_provider: body.embedding?.provider ?? null,
          embedding_model: body.embedding?.model ?? null,
          ...(body.chunk_settings ? { chunk_settings: body.chunk_settings } : {}),
          created_by: accountId,
        },
      });
    });
    res.status(201).json(datasetJson(ds, 0));
  });

  r.get('/datasets', async (req, res) => {
    const { tenantId } = consoleCaller(req);
    const page = pageOf(req.query);
    const [total, rows] = await Promise.all([
      db.dataset.count({ where: { tenant_id: tenantId } }),
      db.dataset.findMany({
        where: { tenant_id: tenantId },
        orderBy: [{ created_at: 'desc' }, { id: 'desc' }],
        skip: page.skip,
        take: page.take,
        include: { _count: { select: { documents: true } } },
      }),
    ]);
    res.json(
      pageJson(
        page,
        total,
        rows.map((d) => datasetJson(d, d._count.documents)),
      ),
    );
  });

  r.get('/datasets/:dataset_id', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    res.json(datasetJson(ds, await db.datasetDocument.count({ where: { dataset_id: ds.id } })));
  });

  r.delete('/datasets/:dataset_id', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    // Documents and chunks go with it (foreign keys cascade).
    await db.dataset.deleteMany({ where: { id: ds.id } });
    res.status(204).end();
  });

  r.post('/datasets/:dataset_id/documents', async (req, res) => {
    const { tenantId, accountId } = consoleCaller(req);
    const ds = await datasetOf(req, tenantId);
    const input = req.is('multipart/form-data') ? await receiveDocument(req) : textDocument(req.body);
    const accepted = await acceptDocument(db, ds, { ...input, createdBy: accountId }, quotas);
    if (accepted.queued) indexer.kick();
    let doc = accepted.document;
    if (isInProgress(doc.status) && config.KNOWLEDGE_INDEX_WAIT_MS > 0)
      doc =
        (await indexer.waitFor(doc.id, config.KNOWLEDGE_INDEX_WAIT_MS)) ??
        (await db.datasetDocument.findUnique({ where: { id: doc.id } })) ??
        doc;
    if (doc.status === 'error' && accepted.queued) {
      // Refused within the wait: the client gets the refusal, as before indexing was a job; a new document is not kept.
      if (accepted.created) await db.datasetDocument.deleteMany({ where: { id: doc.id, status: 'error' } });
      throw documentFailure(doc);
    }
    const status = isInProgress(doc.status) ? 202 : accepted.created ? 201 : 200;
    res.status(status).json({ ...documentJson(doc), batch: doc.id });
  });

  r.get('/datasets/:dataset_id/documents', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const page = pageOf(req.query);
    const [total, docs] = await Promise.all([
      db.datasetDocument.count({ where: { dataset_id: ds.id } }),
      db.datasetDocument.findMany({
        where: { dataset_id: ds.id },
        orderBy: [{ created_at: 'desc' }, { id: 'desc' }],
        skip: page.skip,
        take: page.take,
      }),
    ]);
    res.json(pageJson(page, total, docs.map(documentJson)));
  });

  r.get('/datasets/:dataset_id/documents/:document_id', async (req, res) => {
    res.json(documentJson(await documentOf(req)));
  });

  /** Dify's indexing progress of an upload batch (here one document per batch: the batch is the document id). */
  r.get('/datasets/:dataset_id/documents/:batch/indexing-status', async (req, res) => {
    const doc = await documentOf(req, 'batch');
    res.json({ data: [indexingStatusJson(doc)] });
  });

  async function documentOf(req: Request, param = 'document_id') {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const id = parseOr400(Uuid, req.params[param], param);
    const doc = await db.datasetDocument.findFirst({ where: { id, dataset_id: ds.id } });
    if (!doc) throw new HttpError(404, 'document_not_found', 'Document not found.');
    return doc;
  }

  r.delete('/datasets/:dataset_id/documents/:document_id', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const id = parseOr400(Uuid, req.params.document_id, 'document_id');
    const { count } = await db.datasetDocument.deleteMany({ where: { id, dataset_id: ds.id } });
    if (count === 0) throw new HttpError(404, 'document_not_found', 'Document not found.');
    res.status(204).end();
  });

  /** A dataset's chunk settings (issue 42): used for the documents indexed from now on. */
  r.put('/datasets/:dataset_id/chunk-settings', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const body = parseOr400(ChunkSettingsBody, req.body ?? {});
    const saved = await db.dataset.update({ where: { id: ds.id }, data: { chunk_settings: body } });
    res.json(datasetJson(saved, await db.datasetDocument.count({ where: { dataset_id: ds.id } })));
  });

  /** A document's segments in order, a page at a time, with their text (the studio previews and edits them). */
  r.get('/datasets/:dataset_id/documents/:document_id/segments', async (req, res) => {
    const doc = await documentOf(req);
    const page = pageOf(req.query);
    const [total, rows] = await Promise.all([
      db.documentSegment.count({ where: { document_id: doc.id } }),
      db.documentSegment.findMany({
        where: { document_id: doc.id },
        orderBy: { position: 'asc' },
        skip: page.skip,
        take: page.take,
        select: SEGMENT_FIELDS,
      }),
    ]);
    res.json(pageJson(page, total, rows.map(segmentJson)));
  });

  /**
   * Switch a segment on or off (off: never retrieved) and/or replace its text: token count, full-text vector (the
   * dataset's language) and trigram index follow in the same update, and a dataset with an embedding model has the
   * new text embedded first (a failed embedding changes nothing: 502 `embedding_failed`).
   */
  r.patch('/datasets/:dataset_id/documents/:document_id/segments/:segment_id', async (req, res) => {
    const doc = await documentOf(req);
    const segmentId = parseOr400(Uuid, req.params.segment_id, 'segment_id');
    const body = parseOr400(SegmentUpdateBody, req.body ?? {});
    const seg = await db.documentSegment.findFirst({ where: { id: segmentId, document_id: doc.id }, select: { id: true } });
    if (!seg) throw new HttpError(404, 'segment_not_found', 'Segment not found.');
    if (body.content !== undefined) {
      const ds = await db.dataset.findUniqueOrThrow({ where: { id: doc.dataset_id } });
      let vector: string | null = null;
      if (ds.embedding_provider && ds.embedding_model) {
        const [v] = await deps
          .embed({ provider: ds.embedding_provider, model: ds.embedding_model }, [body.content])
          .catch((err: unknown) => {
            throw new HttpError(502, 'embedding_failed', `embedding: ${(err as Error)?.message ?? err}`);
          });
        vector = vectorLiteral(v);
      }
      await db.$executeRaw`
        update document_segments
           set content = ${body.content}, char_count = char_length(${body.content}), token_count = ${countTokens(body.content)},
               content_tsv = to_tsvector(${ds.language}::regconfig, ${body.content}), embedding = ${vector}::real[]
         where id = ${seg.id}::uuid`;
    }
    if (body.enabled !== undefined) await db.documentSegment.update({ where: { id: seg.id }, data: { enabled: body.enabled } });
    res.json(segmentJson(await db.documentSegment.findUniqueOrThrow({ where: { id: seg.id }, select: SEGMENT_FIELDS })));
  });

  /** Hit testing (Dify's): what retrieval returns for a query, with scores — the same path a turn uses. */
  r.post('/datasets/:dataset_id/retrieve', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const body = parseOr400(HitTestBody, req.body ?? {});
    const chunks = await retrieveChunks(
      { db, embed: deps.embed },
      { tenantId: ds.tenant_id, datasetIds: [ds.id], query: body.query, topK: body.top_k, scoreThreshold: body.score_threshold },
    );
    res.json({ query: body.query, chunks });
  });

  // Refusals of core/knowledge (unsupported type, unreadable, too large, embedding failed) as {code, message, status}.
  r.use('/datasets', (err: unknown, _req: Request, _res: Response, next: NextFunction) => next(knowledgeHttpError(err)));
  return r;
}

function textDocument(body: unknown): DocumentInput {
  const { name, text } = parseOr400(TextDocumentBody, body ?? {});
  // A JSON text document is plain text unless its name says Markdown or HTML.
  const mimeType = /\.(md|markdown|html?)$/i.test(name) ? null : 'text/plain';
  return { name, mimeType, bytes: Buffer.from(text, 'utf8') };
}

/** The one multipart `file` part, in memory (at most DOCUMENT_MAX_BYTES). */
function receiveDocument(req: Request): Promise<DocumentInput> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fileSize: DOCUMENT_MAX_BYTES, fields: 5, fieldSize: 4096, parts: 10 } });
    } catch {
      reject(new HttpError(400, 'no_file_uploaded', 'Upload the document as multipart/form-data with a `file` part.'));
      return;
    }
    let settled = false;
    let found: Promise<DocumentInput> | null = null;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.unpipe(bb);
      req.resume();
      reject(err);
    };
    bb.on('file', (field, stream, info) => {
      // A body ending inside this part destroys its stream (`Unexpected end of form`): without this listener that
      // error event would end the process (issue 28). Skipped parts too.
      stream.on('error', () => fail(truncated()));
      if (field !== 'file' || found) {
        stream.resume();
        return;
      }
      const parts: Buffer[] = [];
      found = new Promise<DocumentInput>((done) => {
        stream.on('data', (c: Buffer) => parts.push(c));
        stream.on('limit', () =>
          fail(new HttpError(413, 'document_too_large', `Documents may be at most ${DOCUMENT_MAX_BYTES / 1024 / 1024} MB.`)),
        );
        stream.on('end', () => {
          const name = (info.filename ?? '')
            .replace(/^.*[\\/]/, '')
            .replace(/[\u0000-\u001f\u007f]/g, '')
            .trim()
            .slice(0, 255);
          done({ name: name || 'document', mimeType: info.mimeType, bytes: Buffer.concat(parts) });
        });
      });
    });
    bb.on('error', (err: Error) =>
      fail(
        /end of form/i.test(err?.message ?? '') ? truncated() : new HttpError(400, 'invalid_multipart', 'The multipart body is malformed.'),
      ),
    );
    req.on('error', () => fail(new HttpError(400, 'request_aborted', 'The upload was interrupted.')));
    bb.on('close', () => {
      if (settled) return;
      if (!found) return fail(new HttpError(400, 'no_file_uploaded', 'Upload the document as multipart/form-data with a `file` part.'));
      found.then((doc) => {
        if (settled) return;
        settled = true;
        resolve(doc);
      }, fail);
    });
    req.pipe(bb);
  });
}

const SEGMENT_FIELDS = {
  id: true,
  document_id: true,
  position: true,
  content: true,
  char_count: true,
  token_count: true,
  enabled: true,
} as const;
function segmentJson(s: {
  id: string;
  document_id: string;
  position: number;
  content: string;
  char_count: number;
  token_count: number;
  enabled: boolean;
}) {
  return { ...s };
}

function datasetJson(d: Dataset, documentCount: number) {
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    language: d.language,
    embedding: d.embedding_provider && d.embedding_model ? { provider: d.embedding_provider, model: d.embedding_model } : null,
    chunk_settings: chunkSettingsJson(d.chunk_settings),
    document_count: documentCount,
    created_at: unixSeconds(d.created_at),
  };
}

function documentJson(d: DatasetDocument) {
  return {
    id: d.id,
    dataset_id: d.dataset_id,
    name: d.name,
    mime_type: d.mime_type,
    size: d.size,
    sha256: d.sha256,
    /** Same as indexing_status (kept for clients of the synchronous upload). */
    status: d.status,
    indexing_status: d.status,
    error: d.error,
    error_code: d.error_code,
    chunk_count: d.chunk_count,
    created_at: unixSeconds(d.created_at),
    completed_at: d.completed_at ? unixSeconds(d.completed_at) : null,
  };
}

const seconds = (d: Date | null) => (d ? unixSeconds(d) : null);

function indexingStatusJson(d: DatasetDocument) {
  return {
    id: d.id,
    indexing_status: d.status,
    processing_started_at: seconds(d.processing_started_at),
    parsing_completed_at: seconds(d.parsing_completed_at),
    completed_at: seconds(d.completed_at),
    error: d.error,
    error_code: d.error_code,
    completed_segments: d.status === 'completed' ? d.chunk_count : 0,
    total_segments: d.chunk_count,
  };
}
