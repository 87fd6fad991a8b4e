-- Issue 42, knowledge segments: a dataset's chunk settings (size, overlap, separators; null = the defaults of
-- core/domain/knowledge/chunk.ts) and a segment's enabled switch (a disabled segment is never retrieved).
ALTER TABLE "datasets" ADD COLUMN "chunk_settings" JSONB;
ALTER TABLE "document_segments" ADD COLUMN "enabled" BOOLEAN NOT NULL DEFAULT true;
