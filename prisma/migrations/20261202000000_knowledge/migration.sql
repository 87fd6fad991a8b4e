-- Issue 14 §2, README "Knowledge": datasets, their documents and the documents' chunks (Dify: segments).
-- Retrieval uses PostgreSQL full text (content_tsv, GIN), pg_trgm (GIN on content; the extension is created by the
-- init migration) and, where a dataset has an embedding model, vectors.
--
-- content_tsv is written at insert with the dataset's language (to_tsvector('<language>'::regconfig, content)): a
-- generated column cannot do it, since the text -> regconfig cast is not immutable.
-- embedding is real[] because pgvector is not available on every PostgreSQL we run on (embedded PostgreSQL has no
-- pgvector). Switching to pgvector is a later migration: CREATE EXTENSION vector; ALTER COLUMN embedding TYPE
-- vector(n) USING embedding::vector; an HNSW index; cosine by `<=>` instead of knowledge_cosine below.

-- CreateTable
CREATE TABLE "datasets" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "language" TEXT NOT NULL DEFAULT 'english',
    "embedding_provider" TEXT,
    "embedding_model" TEXT,
    "created_by" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "datasets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dataset_documents" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "dataset_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "mime_type" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "sha256" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'indexing',
    "error" TEXT,
    "chunk_count" INTEGER NOT NULL DEFAULT 0,
    "created_by" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "dataset_documents_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "document_segments" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "dataset_id" UUID NOT NULL,
    "document_id" UUID NOT NULL,
    "position" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    "char_count" INTEGER NOT NULL,
    "token_count" INTEGER NOT NULL,
    "content_tsv" tsvector,
    "embedding" REAL[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "document_segments_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "datasets_tenant_id_idx" ON "datasets"("tenant_id");

-- CreateIndex
CREATE UNIQUE INDEX "dataset_documents_dataset_id_sha256_key" ON "dataset_documents"("dataset_id", "sha256");

-- CreateIndex
CREATE INDEX "document_segments_dataset_id_idx" ON "document_segments"("dataset_id");

-- CreateIndex
CREATE INDEX "document_segments_content_tsv_idx" ON "document_segments" USING GIN ("content_tsv");

-- CreateIndex
CREATE INDEX "document_segments_content_idx" ON "document_segments" USING GIN ("content" gin_trgm_ops);

-- CreateIndex
CREATE UNIQUE INDEX "document_segments_document_id_position_key" ON "document_segments"("document_id", "position");

-- AddForeignKey
ALTER TABLE "datasets" ADD CONSTRAINT "datasets_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "dataset_documents" ADD CONSTRAINT "dataset_documents_dataset_id_fkey" FOREIGN KEY ("dataset_id") REFERENCES "datasets"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "document_segments" ADD CONSTRAINT "document_segments_dataset_id_fkey" FOREIGN KEY ("dataset_id") REFERENCES "datasets"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "document_segments" ADD CONSTRAINT "document_segments_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "dataset_documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Cosine similarity of two vectors of equal length (NULL for a length mismatch or a zero vector). Scans; pgvector
-- would index it (see above).
CREATE FUNCTION knowledge_cosine(a REAL[], b REAL[]) RETURNS DOUBLE PRECISION
    LANGUAGE SQL IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cardinality(a) <> cardinality(b) THEN NULL
                ELSE (SELECT sum(x * y) / nullif(sqrt(sum(x * x)) * sqrt(sum(y * y)), 0) FROM unnest(a, b) AS t(x, y)) END
$$;
