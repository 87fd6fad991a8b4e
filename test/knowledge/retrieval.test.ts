/**
 * Retrieval on real PostgreSQL (docs/knowledge.md): full text ranks the chunk that answers first, pg_trgm finds a
 * misspelt word, the demo embeddings add the vector half of the hybrid score, thresholds and top_k hold, and
 * datasets of another tenant are never searched. Indexing is idempotent and deleting a document removes its chunks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../core/platform/db.js';
import { createEmbedder } from '../../core/domain/knowledge/embed.js';
import { ingestDocument } from '../../core/domain/knowledge/ingest.js';
import { retrieveChunks } from '../../core/domain/knowledge/retrieve.js';
import { demoEmbedding } from '../../core/domain/llm/providers/demo.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { freshDatabase } from '../support/db.js';

let db: Db;
const embed = createEmbedder(
  createDefaultProviders({
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: undefined,
    OPENAI_COMPATIBLE_API_KEY: undefined,
    OPENAI_COMPATIBLE_MODEL: undefined,
  }),
);
let tenantId: string;
let otherTenantId: string;

const DOCS = {
  zephyr: 'Project Zephyr is our glider programme. The launch code of project Zephyr is 7-ALPHA-42 and changes every spring.',
  canteen: 'The canteen opens at eight. Lunch is served from noon; the canteen closes at three in the afternoon.',
  parking: 'Parking permits are issued by the facilities desk. Bicycles go to the basement racks.',
};

async function dataset(tenant: string, name: string, opts: { embeddings?: boolean; language?: string } = {}) {
  return db.dataset.create({
    data: {
      tenant_id: tenant,
      name,
      language: opts.language ?? 'english',
      ...(opts.embeddings ? { embedding_provider: 'demo', embedding_model: 'demo-embedding' } : {}),
    },
  });
}

async function fill(ds: Awaited<ReturnType<typeof dataset>>) {
  for (const [name, text] of Object.entries(DOCS))
    await ingestDocument({ db, embed }, ds, { name: `${name}.txt`, bytes: Buffer.from(text) });
}

beforeAll(async () => {
  db = createDb(await freshDatabase('knowledge_retrieval'));
  tenantId = (await db.tenant.create({ data: { name: 'kb' } })).id;
  otherTenantId = (await db.tenant.create({ data: { name: 'other' } })).id;
});
afterAll(async () => db?.$disconnect());

describe('knowledge retrieval', () => {
  it('ranks the chunk that answers first, with a 0–1 score and its source', async () => {
    const ds = await dataset(tenantId, 'text only');
    await fill(ds);
    const chunks = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [ds.id], query: 'What is the launch code of Zephyr?', topK: 3, scoreThreshold: 0 },
    );
    expect(chunks[0]).toMatchObject({ dataset_id: ds.id, dataset_name: 'text only', document_name: 'zephyr.txt', position: 0 });
    expect(chunks[0]!.content).toContain('7-ALPHA-42');
    for (const c of chunks) expect(c.score).toBeGreaterThanOrEqual(0);
    expect(chunks[0]!.score).toBeLessThanOrEqual(1);
    expect(chunks.map((c) => c.score)).toEqual([...chunks.map((c) => c.score)].sort((a, b) => b - a));
  });

  it('uses the dataset language: stemming matches other word forms', async () => {
    const ds = await dataset(tenantId, 'stems');
    await fill(ds);
    const [best] = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [ds.id], query: 'permit issuing', topK: 1, scoreThreshold: 0 },
    );
    expect(best?.document_name).toBe('parking.txt');
  });

  it('finds a misspelt word by trigram similarity', async () => {
    const ds = await dataset(tenantId, 'fuzzy');
    await fill(ds);
    const [best] = await retrieveChunks({ db, embed }, { tenantId, datasetIds: [ds.id], query: 'Zephir', topK: 1, scoreThreshold: 0 });
    expect(best?.document_name).toBe('zephyr.txt');
    expect(best!.score).toBeGreaterThan(0.3);
  });

  it('combines text and vector scores where the dataset has embeddings (hybrid)', async () => {
    const plain = await dataset(tenantId, 'plain');
    const hybrid = await dataset(tenantId, 'hybrid', { embeddings: true });
    await fill(plain);
    await fill(hybrid);
    const stored = await db.$queryRaw<
      { n: bigint }[]
    >`select count(*) as n from document_segments where dataset_id = ${hybrid.id}::uuid and cardinality(embedding) = 256`;
    expect(Number(stored[0]!.n)).toBe(3);
    const query = 'canteen lunch noon';
    const [p] = await retrieveChunks({ db, embed }, { tenantId, datasetIds: [plain.id], query, topK: 1, scoreThreshold: 0 });
    const [h] = await retrieveChunks({ db, embed }, { tenantId, datasetIds: [hybrid.id], query, topK: 1, scoreThreshold: 0 });
    expect(p?.document_name).toBe('canteen.txt');
    expect(h?.document_name).toBe('canteen.txt');
    // Same lexical part; the hybrid score is its mean with the cosine of the demo embeddings (docs/knowledge.md).
    const cosine = demoEmbedding(query).reduce((sum, x, i) => sum + x * demoEmbedding(h!.content)[i]!, 0);
    expect(h!.score).toBeCloseTo((p!.score + Math.max(0, cosine)) / 2, 3);
    expect(h!.score).not.toBeCloseTo(p!.score, 3);
  });

  it('drops chunks under the threshold and returns at most top_k', async () => {
    const ds = await dataset(tenantId, 'limits');
    await fill(ds);
    const all = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [ds.id], query: 'the canteen and the parking desk', topK: 10, scoreThreshold: 0 },
    );
    expect(all.length).toBeGreaterThanOrEqual(2);
    const one = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [ds.id], query: 'the canteen and the parking desk', topK: 1, scoreThreshold: 0 },
    );
    expect(one).toHaveLength(1);
    const strict = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [ds.id], query: 'the canteen and the parking desk', topK: 10, scoreThreshold: all[0]!.score },
    );
    expect(strict.every((c) => c.score >= all[0]!.score)).toBe(true);
    expect(strict.length).toBeLessThan(all.length);
  });

  it('never searches a dataset of another tenant', async () => {
    const foreign = await dataset(otherTenantId, 'foreign');
    await fill(foreign);
    const chunks = await retrieveChunks(
      { db, embed },
      { tenantId, datasetIds: [foreign.id], query: 'Zephyr launch code', topK: 3, scoreThreshold: 0 },
    );
    expect(chunks).toEqual([]);
  });

  it('indexes the same content once, and a deleted document takes its chunks along', async () => {
    const ds = await dataset(tenantId, 'idempotent');
    const a = await ingestDocument({ db, embed }, ds, { name: 'z.txt', bytes: Buffer.from(DOCS.zephyr) });
    const b = await ingestDocument({ db, embed }, ds, { name: 'z-again.txt', bytes: Buffer.from(DOCS.zephyr) });
    expect(a.created).toBe(true);
    expect(b).toMatchObject({ created: false, document: { id: a.document.id, name: 'z.txt', status: 'completed', chunk_count: 1 } });
    expect(await db.documentSegment.count({ where: { dataset_id: ds.id } })).toBe(1);
    await db.datasetDocument.delete({ where: { id: a.document.id } });
    expect(await db.documentSegment.count({ where: { dataset_id: ds.id } })).toBe(0);
  });
});
