-- Issue 28 item 3: documents are indexed by a job, off the upload request and off the event loop (core/knowledge/
-- indexer.ts). A document row is written at upload with `status` waiting; an indexer claims it (parsing → indexing →
-- completed | error) under a lease, so a job whose process died is claimed again by any api replica. The uploaded
-- bytes wait in dataset_document_sources until the job is done (a table of their own: listing documents never
-- reads them).
ALTER TABLE "dataset_documents" ALTER COLUMN "status" SET DEFAULT 'waiting';
ALTER TABLE "dataset_documents" ADD COLUMN "error_code" TEXT;
ALTER TABLE "dataset_documents" ADD COLUMN "attempts" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "dataset_documents" ADD COLUMN "lease_owner" UUID;
ALTER TABLE "dataset_documents" ADD COLUMN "lease_until" TIMESTAMPTZ(3);
ALTER TABLE "dataset_documents" ADD COLUMN "processing_started_at" TIMESTAMPTZ(3);
ALTER TABLE "dataset_documents" ADD COLUMN "parsing_completed_at" TIMESTAMPTZ(3);
ALTER TABLE "dataset_documents" ADD COLUMN "completed_at" TIMESTAMPTZ(3);

-- The indexers' claim reads only the documents still in progress.
CREATE INDEX "dataset_documents_status_idx" ON "dataset_documents"("status");
-- Per-tenant quotas (documents, stored bytes) and the paginated list.
CREATE INDEX "dataset_documents_tenant_id_idx" ON "dataset_documents"("tenant_id");
CREATE INDEX "dataset_documents_dataset_id_created_at_idx" ON "dataset_documents"("dataset_id", "created_at");

CREATE TABLE "dataset_document_sources" (
    "document_id" UUID NOT NULL,
    "bytes" BYTEA NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "dataset_document_sources_pkey" PRIMARY KEY ("document_id")
);
ALTER TABLE "dataset_document_sources" ADD CONSTRAINT "dataset_document_sources_document_id_fkey"
    FOREIGN KEY ("document_id") REFERENCES "dataset_documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;
