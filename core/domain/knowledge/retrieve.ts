/**
 * Retrieval over a tenant's datasets (docs/knowledge.md): PostgreSQL full text, pg_trgm and — where a dataset has
 * an embedding model — vector similarity, combined into one 0–1 score:
 *
 *   keyword = coverage × r / (r + 0.1)   r = ts_rank_cd of the chunk for the query's words OR-ed (stemmed with the
 *                                         dataset's language, stop words dropped); coverage = share of those words
 *                                         in the chunk. One word once ≈ 0.5 × coverage; all words, often → near 1.
 *   fuzzy   = word_similarity(query, chunk)  pg_trgm: the best-matching stretch of the chunk (typos still match).
 *   lexical = max(keyword, fuzzy)
 *   vector  = max(0, cosine(query embedding, chunk embedding))   only for datasets with an embedding model
 *   score   = (lexical + vector) / 2 with a vector, else lexical
 *
 * Candidates are chunks matching the OR-ed words (GIN on content_tsv), chunks whose word_similarity reaches
 * FUZZY_MIN (GIN trigram index) and the VECTOR_CANDIDATES nearest by cosine; chunks scoring below score_threshold are
 * dropped and the best top_k returned. A disabled segment (`enabled` off in the studio) is never a candidate.
 */
import type { Db } from '../../platform/db.js';
import type { RetrievedChunk } from '../../protocol/knowledge.js';
import { vectorLiteral, type Embedder } from './embed.js';

export const FUZZY_MIN = 0.3;
export const VECTOR_CANDIDATES = 50;

export interface RetrieveInput {
  tenantId: string;
  datasetIds: string[];
  query: string;
  topK: number;
  scoreThreshold: number;
  signal?: AbortSignal;
}

interface Row {
  chunk_id: string;
  dataset_id: string;
  dataset_name: string;
  document_id: string;
  document_name: string;
  position: number;
  content: string;
  score: number;
}

export async function retrieveChunks(deps: { db: Db; embed: Embedder }, input: RetrieveInput): Promise<RetrievedChunk[]> {
  const { db } = deps;
  const datasets = await db.dataset.findMany({
    where: { tenant_id: input.tenantId, id: { in: input.datasetIds } },
    select: { id: true, embedding_provider: true, embedding_model: true },
  });
  if (datasets.length === 0) return [];
  const vectors = await queryVectors(deps.embed, datasets, input.query, input.signal);
  const ids = datasets.map((d) => d.id);
  const vecs = datasets.map((d) => vectors.get(d.id) ?? null);
  const hasVectors = vecs.some((v) => v !== null);
  const [, rows] = await db.$transaction([
    // word_similarity's operator (<%) uses the trigram index with this threshold; local to this transaction.
    db.$queryRaw`select set_config('pg_trgm.word_similarity_threshold', ${String(FUZZY_MIN)}, true)`,
    db.$queryRaw<Row[]>`
      with ds as (
        select d.id, d.name, d.language::regconfig as cfg, v.vec::real[] as vec
          from datasets d join unnest(${ids}::uuid[], ${vecs}::text[]) as v(id, vec) on v.id = d.id
         where d.tenant_id = ${input.tenantId}::uuid
      ),
      q as (
        select ds.*, w.words,
               case when cardinality(w.words) > 0
                    then array_to_string(array(select quote_literal(x) from unnest(w.words) x), ' | ')::tsquery end as tsq
          from ds cross join lateral (select tsvector_to_array(to_tsvector(ds.cfg, ${input.query})) as words) w
      ),
      nearest as (
        select s.id from document_segments s join q on q.id = s.dataset_id
         where ${hasVectors} and q.vec is not null and s.embedding is not null and s.enabled
         order by knowledge_cosine(s.embedding, q.vec) desc nulls last
         limit ${VECTOR_CANDIDATES}
      ),
      candidates as (
        select s.id from document_segments s join q on q.id = s.dataset_id where q.tsq is not null and s.content_tsv @@ q.tsq and s.enabled
        union
        select s.id from document_segments s join q on q.id = s.dataset_id where ${input.query} <% s.content and s.enabled
        union
        select id from nearest
      ),
      scored as (
        select s.id, s.dataset_id, q.name as dataset_name, s.document_id, doc.name as document_name, s.position, s.content,
               greatest(
                 coalesce(case when q.tsq is null then 0 else
                   (select count(*) from unnest(q.words) x where s.content_tsv @@ quote_literal(x)::tsquery)::float8
                     / cardinality(q.words)
                   * ts_rank_cd(s.content_tsv, q.tsq) / (ts_rank_cd(s.content_tsv, q.tsq) + 0.1) end, 0),
                 word_similarity(${input.query}, s.content)
               ) as lexical,
               case when q.vec is not null and s.embedding is not null
                    then greatest(0, coalesce(knowledge_cosine(s.embedding, q.vec), 0)) end as vector
          from candidates c
          join document_segments s on s.id = c.id
          join q on q.id = s.dataset_id
          join dataset_documents doc on doc.id = s.document_id
      )
      select id as chunk_id, dataset_id, dataset_name, document_id, document_name, position, content,
             least(1, case when vector is null then lexical else (lexical + vector) / 2 end)::float8 as score
        from scored
       where least(1, case when vector is null then lexical else (lexical + vector) / 2 end) >= ${input.scoreThreshold}
       order by score desc, dataset_id, document_id, position
       limit ${input.topK}`,
  ]);
  return rows.map((r) => ({ ...r, position: Number(r.position), score: Math.round(Number(r.score) * 10_000) / 10_000 }));
}

/** The query's embedding per dataset that has an embedding model (one provider call per distinct model). */
async function queryVectors(
  embed: Embedder,
  datasets: { id: string; embedding_provider: string | null; embedding_model: string | null }[],
  query: string,
  signal?: AbortSignal,
): Promise<Map<string, string | null>> {
  const byModel = new Map<string, Promise<number[]>>();
  const out = new Map<string, string | null>();
  for (const d of datasets) {
    if (!d.embedding_provider || !d.embedding_model) continue;
    const key = `${d.embedding_provider}\u0000${d.embedding_model}`;
    if (!byModel.has(key)) {
      const target = { provider: d.embedding_provider, model: d.embedding_model };
      byModel.set(
        key,
        embed(target, [query], signal).then((v) => v[0]!),
      );
    }
    out.set(d.id, vectorLiteral(await byModel.get(key)!));
  }
  return out;
}
