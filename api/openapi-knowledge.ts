/**
 * The console's knowledge routes in the OpenAPI document (api/openapi.ts merges them): datasets, documents and the
 * hit test, under the console key (README "Knowledge"; routes in api/routes/knowledge.ts).
 */
import { z } from 'zod';
import { RetrievedChunk } from '../core/protocol/knowledge.js';
import { CreateDatasetBody, HitTestBody, TextDocumentBody } from './routes/knowledge.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const Dataset = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  language: z.string().describe('PostgreSQL text search configuration of its chunks (stemming, stop words).'),
  embedding: z.object({ provider: z.string(), model: z.string() }).nullable(),
  document_count: z.number().int(),
  created_at: z.number().int(),
});
const Document = z.object({
  id: z.string(),
  dataset_id: z.string(),
  name: z.string(),
  mime_type: z.enum(['text/plain', 'text/markdown', 'text/html', 'application/pdf']),
  size: z.number().int(),
  sha256: z.string(),
  status: z.enum(['indexing', 'completed', 'error']),
  error: z.string().nullable(),
  chunk_count: z.number().int(),
  created_at: z.number().int(),
});

export const KNOWLEDGE_REQUESTS = {
  CreateDatasetRequest: CreateDatasetBody,
  TextDocumentRequest: TextDocumentBody,
  DocumentUploadForm: z.object({ file: z.string().describe('The document: .txt, .md, .html or .pdf, at most 15 MB.') }),
  HitTestRequest: HitTestBody,
};

export const KNOWLEDGE_RESPONSES = {
  DatasetResponse: Dataset,
  DatasetListResponse: z.object({ data: z.array(Dataset) }),
  DocumentResponse: Document,
  DocumentListResponse: z.object({ data: z.array(Document) }),
  HitTestResponse: z.object({ query: z.string(), chunks: z.array(RetrievedChunk) }),
};

export function knowledgePaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const id = (name: string, what: string) => ({
    name,
    in: 'path',
    required: true,
    description: what,
    schema: { type: 'string', format: 'uuid' },
  });
  const security = [{ ConsoleKey: [] }];
  const op = (o: JsonSchema, parameters: JsonSchema[] = []): JsonSchema => ({ tags: ['knowledge'], security, parameters, ...o });
  const ds = id('dataset_id', 'Dataset id.');
  const ok = (description: string, schema: string, status = '200') => ({ [status]: { description, content: json(ref(schema)) } });
  const gone = { '204': { description: 'Deleted, with its chunks.' } };
  return {
    '/console/api/datasets': {
      post: op({
        operationId: 'createDataset',
        summary: 'Create a dataset. With `embedding`, its chunks also get vectors from that provider model (probed once here).',
        requestBody: { required: true, content: json(ref('CreateDatasetRequest')) },
        responses: { ...ok('The dataset.', 'DatasetResponse', '201'), ...errors() },
      }),
      get: op({
        operationId: 'listDatasets',
        summary: "The tenant's datasets.",
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
            'Upload and index a document (synchronously): multipart `file` (≤ 15 MB) or JSON `{name, text}` (≤ 1 MB). ' +
            'The same content again answers 200 with the existing document.',
          requestBody: {
            required: true,
            content: { 'multipart/form-data': { schema: ref('DocumentUploadForm') }, ...json(ref('TextDocumentRequest')) },
          },
          responses: {
            ...ok('Indexed now.', 'DocumentResponse', '201'),
            ...ok('Already indexed (same content).', 'DocumentResponse'),
            ...errors(413, 415),
            '422': { description: '`document_empty`: no text to index.', content: json(ref('ErrorResponse')) },
            '502': { description: '`embedding_failed`: the embedding provider failed.', content: json(ref('ErrorResponse')) },
          },
        },
        [ds],
      ),
      get: op(
        {
          operationId: 'listDocuments',
          summary: "The dataset's documents.",
          responses: { ...ok('Documents.', 'DocumentListResponse'), ...errors() },
        },
        [ds],
      ),
    },
    '/console/api/datasets/{dataset_id}/documents/{document_id}': {
      delete: op({ operationId: 'deleteDocument', summary: 'Delete a document and its chunks.', responses: { ...gone, ...errors() } }, [
        ds,
        id('document_id', 'Document id.'),
      ]),
    },
    '/console/api/datasets/{dataset_id}/retrieve': {
      post: op(
        {
          operationId: 'hitTestDataset',
          summary: 'Hit test: what retrieval returns for a query (the same scoring a turn uses, README "Knowledge").',
          requestBody: { required: true, content: json(ref('HitTestRequest')) },
          responses: { ...ok('Chunks, best first.', 'HitTestResponse'), ...errors() },
        },
        [ds],
      ),
    },
  };
}
