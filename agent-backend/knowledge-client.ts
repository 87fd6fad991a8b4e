/**
 * The backend's side of knowledge retrieval: `POST {apiUrl}/inner/api/knowledge/retrieve` (docs/PROTOCOL.md §3) with
 * the inner API key, the run's id and its signed execution context. The api searches; the backend holds no database
 * access and no embedding credentials.
 */
import { RetrieveResponse, type RetrieveRequest, type RetrievedChunk } from '../core/protocol/knowledge.js';

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

export function createKnowledgeClient(opts: { apiUrl: string; innerApiKey: string; fetch?: typeof fetch }): KnowledgeClient {
  const doFetch = opts.fetch ?? fetch;
  const url = `${opts.apiUrl.replace(/\/+$/, '')}/inner/api/knowledge/retrieve`;
  return {
    async retrieve(req, runId, signal) {
      let last: unknown;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        try {
          const res = await doFetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-inner-api-key': opts.innerApiKey, 'x-agent-run-id': runId },
            body: JSON.stringify(req),
            signal: AbortSignal.any([signal, AbortSignal.timeout(RETRIEVE_TIMEOUT_MS)]),
          });
          const body = (await res.json().catch(() => null)) as { code?: string; message?: string } | null;
          if (res.status >= 400 && res.status < 500)
            throw new KnowledgeRefusedError(res.status, body?.code ?? 'knowledge_refused', body?.message ?? `HTTP ${res.status}`);
          if (!res.ok) throw new Error(`knowledge retrieval answered HTTP ${res.status}`);
          return RetrieveResponse.parse(body).chunks;
        } catch (err) {
          if (signal.aborted || err instanceof KnowledgeRefusedError) throw signal.aborted ? signal.reason : err;
          last = err;
          // Transport errors and 5xx: a short backoff, then again (retrieval is read-only; the api records each
          // chunk once per message and source).
          await new Promise((r) => setTimeout(r, 200 * attempt));
        }
      }
      throw new Error(`knowledge retrieval failed: ${(last as Error)?.message ?? String(last)}`);
    },
  };
}
