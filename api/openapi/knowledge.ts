/**
 * The console's knowledge routes in the OpenAPI document (api/openapi/index.ts merges them): datasets, documents and the
 * hit test, under the console key (docs/knowledge.md; routes in api/console/knowledge.ts).
 */
import { z } from 'zod';
import { RetrievedChunk } from '../../core/protocol/knowledge.js';
import { PAGE_PARAMETERS, pageSchema } from '../pagination.js';
import { ChunkSettingsBody, CreateDatasetBody, HitTestBody, SegmentUpdateBody, TextDocumentBody } from '../console/knowledge.js';
import { pathParam } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const Dataset = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  language: z.string().describe('PostgreSQL text search configuration of its chunks (stemming, stop words).'),
  embedding: z.object({ provider: z.string(), model: z.string() }).nullable(),
  chunk_settings: z
    .object({ max_chars: z.number().int(), overlap_chars: z.number().int(), separators: z.array(z.string()) })
    .describe('How documents indexed from now on are cut (the defaults unless set).'),
  document_count: z.number().int(),
  created_at: z.number().int(),
});
const IndexingStatus = z
  .enum(['waiting', 'parsing', 'indexing', 'completed', 'error'])
  .describe("Dify's indexing_status: the job goes waiting → parsing → indexing → completed, or error.");
const Document = z.object({
  id: z.string(),
  dataset_id: z.string(),
  name: z.string(),
  mime_type: z.enum(['text/plain', 'text/markdown', 'text/html', 'application/pdf']),
  size: z.number().int(),
  sha256: z.string(),
  status: IndexingStatus.describe('Same as indexing_status.'),
  indexing_status: IndexingStatus,
  error: z.string().nullable(),
  error_code: z
    .string()
    .nullable()
    .describe(
      'Why indexing ended in `error`: `document_unreadable`, `document_empty`, `document_too_large`, `embedding_failed`, `indexing_failed`.',
    ),
  chunk_count: z.number().int(),
  created_at: z.number().int(),
  completed_at: z.number().int().nullable(),
});
const IndexingProgress = z.object({
  id: z.string(),
  indexing_status: IndexingStatus,
  processing_started_at: z.number().int().nullable(),
  parsing_completed_at: z.number().int().nullable(),
  completed_at: z.number().int().nullable(),
  error: z.string().nullable(),
  error_code: z.string().nullable(),
  completed_segments: z.number().int(),
  total_segments: z.number().int(),
});

const Segment = z.object({
  id: z.string(),
  document_id: z.string(),
  position: z.number().int(),
  content: z.string(),
  char_count: z.number().int(),
  token_count: z.number().int(),
  enabled: z.boolean().describe('Off: never retrieved.'),
});

export const KNOWLEDGE_REQUESTS = {
  ChunkSettingsRequest: ChunkSettingsBody,
  SegmentUpdateRequest: SegmentUpdateBody,
  CreateDatasetRequest: CreateDatasetBody,
  TextDocumentRequest: TextDocumentBody,
  DocumentUploadForm: z.object({ file: z.string().describe('The document: .txt, .md, .html or .pdf, at most 15 MB.') }),
  HitTestRequest: HitTestBody,
};

export const KNOWLEDGE_RESPONSES = {
  DatasetResponse: Dataset,
  DatasetListResponse: pageSchema(Dataset),
  DocumentResponse: Document,
  DocumentUploadResponse: Document.extend({
    batch: z.string().describe('The upload batch (here the document id) of GET …/documents/{batch}/indexing-status.'),
  }),
  DocumentListResponse: pageSchema(Document),
  IndexingStatusResponse: z.object({ data: z.array(IndexingProgress) }),
  SegmentResponse: Segment,
  SegmentListResponse: pageSchema(Segment),
  HitTestResponse: z.object({ query: z.string(), chunks: z.array(RetrievedChunk) }),
};

export function knowledgePaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const id = pathParam;
  const security = [{ ConsoleKey: [] }];
  const op = (o: JsonSchema, parameters: JsonSchema[] = []): JsonSchema => ({ tags: ['knowledge'], security, parameters, ...o });
  const ds = id('dataset_id', 'Dataset id.');
  const ok = (description: string, schema: string, status = '200') => ({ [status]: { description, content: json(ref(schema)) } });
  const gone = { '204': { description: 'Deleted, with its chunks.' } };
  return {
    '/console/api/datasets': {
      post: op({
        operationId: 'createDataset',
        summary:
          'Create a dataset. With `embedding`, its chunks also get vectors from that provider model (probed once here). ' +
          'At most TENANT_MAX_DATASETS per tenant (403 `dataset_quota_exceeded`).',
        requestBody: { required: true, content: json(ref('CreateDatasetRequest')) },
        responses: { ...ok('The dataset.', 'DatasetResponse', '201'), ...errors(403) },
      }),
      get: op({
        operationId: 'listDatasets',
        summary: "The tenant's datasets, newest first, a page at a time.",
        parameters: PAGE_PARAMETERS,
        responses: { ...ok('Datasets.', 'DatasetListResponse'), ...errors() },
      }),
    },
    '/console/api/datasets/{dataset_id}': {
      get: op(
        { operationId: 'getDataset', summary: 'One dataset.', responses: { ...ok('The dataset.', 'DatasetResponse'), ...errors() } },
        [ds],
      ),
      delete: op(
        { operationId: 'deleteDataset', summary: 'Delete a dataset, its documents and chunks.', responses: { ...gone, ...errors() } },
        [ds],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents': {
      post: op(
        {
          operationId: 'uploadDocument',
          summary:
            'Upload a document for indexing: multipart `file` (≤ 15 MB) or JSON `{name, text}` (≤ 1 MB). Indexing is a job ' +
            '(parsing in a child process with limits); the upload waits for it up to KNOWLEDGE_INDEX_WAIT_MS: 201 indexed, or ' +
            'the refusal (nothing kept), else 202 with the document still indexing (follow `batch`). The same content again ' +
            'answers 200 with the existing document. Per-tenant quotas: documents (403 `document_quota_exceeded`) and bytes ' +
            '(413 `storage_quota_exceeded`).',
          requestBody: {
            required: true,
            content: { 'multipart/form-data': { schema: ref('DocumentUploadForm') }, ...json(ref('TextDocumentRequest')) },
          },
          responses: {
            ...ok('Indexed now.', 'DocumentUploadResponse', '201'),
            ...ok('Already there (same content), indexed or still indexing.', 'DocumentUploadResponse'),
            ...ok('Accepted: still indexing (`indexing_status` waiting, parsing or indexing).', 'DocumentUploadResponse', '202'),
            ...errors(403, 413, 415),
            '422': { description: '`document_empty`: no text to index.', content: json(ref('ErrorResponse')) },
            '502': { description: '`embedding_failed`: the embedding provider failed.', content: json(ref('ErrorResponse')) },
          },
        },
        [ds],
      ),
      get: op(
        {
          operationId: 'listDocuments',
          summary: "The dataset's documents, newest first, a page at a time.",
          responses: { ...ok('Documents.', 'DocumentListResponse'), ...errors() },
        },
        [ds, ...PAGE_PARAMETERS],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents/{batch}/indexing-status': {
      get: op(
        {
          operationId: 'getIndexingStatus',
          summary: "Dify's indexing progress of an upload batch (one document per batch here: the batch is the document id).",
          responses: { ...ok('Progress.', 'IndexingStatusResponse'), ...errors() },
        },
        [ds, id('batch', 'The upload batch (the `batch` of the upload answer).')],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents/{document_id}': {
      get: op(
        { operationId: 'getDocument', summary: 'One document.', responses: { ...ok('The document.', 'DocumentResponse'), ...errors() } },
        [ds, id('document_id', 'Document id.')],
      ),
      delete: op({ operationId: 'deleteDocument', summary: 'Delete a document and its chunks.', responses: { ...gone, ...errors() } }, [
        ds,
        id('document_id', 'Document id.'),
      ]),
    },
    '/console/api/datasets/{dataset_id}/chunk-settings': {
      put: op(
        {
          operationId: 'putChunkSettings',
          summary:
            'How the dataset cuts documents indexed from now on (Dify’s segment settings): `max_chars` (100–4000), ' +
            '`overlap_chars` (at most half of it) and `separators` cut at first (no chunk spans one). Documents already ' +
            'indexed keep their chunks (their bytes are not kept once indexed).',
          requestBody: { required: true, content: json(ref('ChunkSettingsRequest')) },
          responses: { ...ok('The dataset.', 'DatasetResponse'), ...errors() },
        },
        [ds],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents/{document_id}/segments': {
      get: op(
        {
          operationId: 'listSegments',
          summary: "A document's segments (chunks) in order, with their text, token count and switch, a page at a time.",
          responses: { ...ok('Segments.', 'SegmentListResponse'), ...errors() },
        },
        [ds, id('document_id', 'Document id.'), ...PAGE_PARAMETERS],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}': {
      patch: op(
        {
          operationId: 'updateSegment',
          summary:
            'Switch a segment on or off (`enabled`; off: retrieval never returns it) and/or replace its `content`: token count, ' +
            'full-text and trigram indexes follow, and a dataset with an embedding model embeds the new text (502 ' +
            '`embedding_failed`: nothing changed). 404 `segment_not_found`.',
          requestBody: { required: true, content: json(ref('SegmentUpdateRequest')) },
          responses: {
            ...ok('The segment.', 'SegmentResponse'),
            ...errors(),
            '502': { description: '`embedding_failed`.', content: json(ref('ErrorResponse')) },
          },
        },
        [ds, id('document_id', 'Document id.'), id('segment_id', 'Segment id.')],
      ),
    },
    '/console/api/datasets/{dataset_id}/retrieve': {
      post: op(
        {
          operationId: 'hitTestDataset',
          summary: 'Hit test: what retrieval returns for a query (the same scoring a turn uses, docs/knowledge.md).',
          requestBody: { required: true, content: json(ref('HitTestRequest')) },
          responses: { ...ok('Chunks, best first.', 'HitTestResponse'), ...errors() },
        },
        [ds],
      ),
    },
  };
}
