/**
 * Console knowledge API (`/console/api/datasets…`, README "Knowledge"): datasets of the caller's tenant, their
 * documents (multipart `file` or JSON `{name, text}`; text, Markdown, HTML, PDF) and a hit test. Indexing runs in the
 * upload request (synchronous for now) and is idempotent: the same content in a dataset is one document.
 */
import busboy from 'busboy';
import { Router, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/db.js';
import { jsonBody } from '../../core/json-guard.js';
import { KnowledgeError } from '../../core/knowledge/errors.js';
import { DOCUMENT_MAX_BYTES, ingestDocument, type DocumentInput } from '../../core/knowledge/ingest.js';
import type { Embedder } from '../../core/knowledge/embed.js';
import { retrieveChunks } from '../../core/knowledge/retrieve.js';
import type { Dataset, DatasetDocument } from '../../core/generated/prisma/client.js';
import { unixSeconds } from '../../core/time.js';
import { consoleAuth, consoleCaller } from '../console-auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { truncated } from './files.js';

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
  })
  .strict();
export const TextDocumentBody = z.object({ name: Name, text: z.string().min(1).max(1_000_000) }).strict();
export const HitTestBody = z
  .object({
    query: z.string().trim().min(1).max(4000),
    top_k: z.number().int().min(1).max(20).default(4),
    score_threshold: z.number().min(0).max(1).default(0),
  })
  .strict();

export interface KnowledgeRouteDeps {
  db: Db;
  embed: Embedder;
  config: { JSON_MAX_DEPTH: number };
}

const knowledgeHttpError = (err: unknown) => (err instanceof KnowledgeError ? new HttpError(err.status, err.code, err.message) : err);

export function knowledgeRoutes(deps: KnowledgeRouteDeps): Router {
  const { db } = deps;
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
    const ds = await db.dataset.create({
      data: {
        tenant_id: tenantId,
        name: body.name,
        description: body.description,
        language: body.language,
        embedding_provider: body.embedding?.provider ?? null,
        embedding_model: body.embedding?.model ?? null,
        created_by: accountId,
      },
    });
    res.status(201).json(datasetJson(ds, 0));
  });

  r.get('/datasets', async (req, res) => {
    const { tenantId } = consoleCaller(req);
    const rows = await db.dataset.findMany({
      where: { tenant_id: tenantId },
      orderBy: { created_at: 'desc' },
      include: { _count: { select: { documents: true } } },
    });
    res.json({ data: rows.map((d) => datasetJson(d, d._count.documents)) });
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
    const { document, created } = await ingestDocument({ db, embed: deps.embed }, ds, { ...input, createdBy: accountId });
    res.status(created ? 201 : 200).json(documentJson(document));
  });

  r.get('/datasets/:dataset_id/documents', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const docs = await db.datasetDocument.findMany({ where: { dataset_id: ds.id }, orderBy: { created_at: 'desc' } });
    res.json({ data: docs.map(documentJson) });
  });

  r.delete('/datasets/:dataset_id/documents/:document_id', async (req, res) => {
    const ds = await datasetOf(req, consoleCaller(req).tenantId);
    const id = parseOr400(Uuid, req.params.document_id, 'document_id');
    const { count } = await db.datasetDocument.deleteMany({ where: { id, dataset_id: ds.id } });
    if (count === 0) throw new HttpError(404, 'document_not_found', 'Document not found.');
    res.status(204).end();
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
      fail(/end of form/i.test(err?.message ?? '') ? truncated() : new HttpError(400, 'invalid_multipart', 'The multipart body is malformed.')),
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

function datasetJson(d: Dataset, documentCount: number) {
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    language: d.language,
    embedding: d.embedding_provider && d.embedding_model ? { provider: d.embedding_provider, model: d.embedding_model } : null,
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
    status: d.status,
    error: d.error,
    chunk_count: d.chunk_count,
    created_at: unixSeconds(d.created_at),
  };
}
