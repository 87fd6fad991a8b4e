/**
 * Embeddings through the model provider layer (core/domain/llm/provider.ts `embed`), computed by the api itself: at upload
 * for every chunk of a dataset that names an embedding model, and for the query at retrieval. System-hosted calls
 * only (the deployment's credentials); they are not metered (docs/knowledge.md).
 */
import type { ProviderRegistry } from '../llm/provider.js';
import { KnowledgeError } from './errors.js';

export type Embedder = (target: { provider: string; model: string }, texts: string[], signal?: AbortSignal) => Promise<number[][]>;

/** How many texts go into one provider call. */
const EMBED_BATCH = 64;
const EMBED_TIMEOUT_MS = 30_000;

/** Whether `provider` can embed with `model` here (checked when a dataset is created). */
export function embeddingAvailable(providers: ProviderRegistry, provider: string): boolean {
  const p = providers.get(provider);
  return Boolean(p?.embed && p.hasSystemCredentials());
}

export function createEmbedder(providers: ProviderRegistry): Embedder {
  return async ({ provider, model }, texts, signal) => {
    const p = providers.get(provider);
    if (!p?.embed || !p.hasSystemCredentials())
      throw new KnowledgeError(400, 'embedding_unavailable', `The provider ${provider} offers no embeddings in this deployment.`);
    const out: number[][] = [];
    for (let i = 0; i < texts.length; i += EMBED_BATCH) {
      const batch = texts.slice(i, i + EMBED_BATCH);
      const timeout = AbortSignal.timeout(EMBED_TIMEOUT_MS);
      const vectors = await p
        .embed({ model, texts: batch, credentials: null, signal: signal ? AbortSignal.any([signal, timeout]) : timeout })
        .catch((err: unknown) => {
          throw new KnowledgeError(
            502,
            'embedding_failed',
            `Embedding with ${provider}/${model} failed: ${(err as Error)?.message ?? err}`,
          );
        });
      if (vectors.length !== batch.length)
        throw new KnowledgeError(502, 'embedding_failed', `${provider}/${model} returned too few vectors.`);
      out.push(...vectors);
    }
    return out;
  };
}

/** A vector as a PostgreSQL array literal (`{0.1,0.2}`), for the real[] column. */
export function vectorLiteral(v: number[] | null | undefined): string | null {
  if (!v?.length) return null;
  return `{${v.map((x) => (Number.isFinite(x) ? x : 0)).join(',')}}`;
}
