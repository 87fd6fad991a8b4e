/**
 * The backend's side of knowledge retrieval: `POST {apiUrl}/inner/api/knowledge/retrieve` (docs/PROTOCOL.md §3) with
 * the inner API key, the run's id and its signed execution context. The api searches; the backend holds no database
 * access and no embedding credentials.
 */
import { RetrieveResponse, type RetrieveRequest, type RetrievedChunk } from '../core/protocol/knowledge.js';
import { postInnerApi, type InnerApiTarget } from './inner-api-call.js';

export interface KnowledgeClient {
  retrieve(req: RetrieveRequest, runId: string, signal: AbortSignal): Promise<RetrievedChunk[]>;
}

/** Refused by the api (4xx): retrying cannot help. */
export class KnowledgeRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'KnowledgeRefusedError';
  }
}

const RETRIEVE_TIMEOUT_MS = 30_000;
const ATTEMPTS = 3;

export function createKnowledgeClient(opts: InnerApiTarget): KnowledgeClient {
  return {
    retrieve: (req, runId, signal) =>
      // Transport errors and 5xx: retried (retrieval is read-only; the api records each chunk once per message and source).
      postInnerApi(opts, '/inner/api/knowledge/retrieve', req, {
        runId,
        signal,
        timeoutMs: RETRIEVE_TIMEOUT_MS,
        attempts: ATTEMPTS,
        settle: ({ status, ok, body }) => {
          const b = body as { code?: string; message?: string } | null;
          if (status >= 400) throw new KnowledgeRefusedError(status, b?.code ?? 'knowledge_refused', b?.message ?? `HTTP ${status}`);
          if (!ok) throw new Error(`knowledge retrieval answered HTTP ${status}`);
          return RetrieveResponse.parse(body).chunks;
        },
        final: (err) => err instanceof KnowledgeRefusedError,
        exhausted: (last) => new Error(`knowledge retrieval failed: ${(last as Error)?.message ?? String(last)}`),
      }),
  };
}
