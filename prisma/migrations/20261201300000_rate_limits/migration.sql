-- Issue 17 L6: counters of the api's request-rate and stream limits (rate-limiter-flexible, RateLimiterPostgres).
-- UNLOGGED: a counter needs no WAL or fsync (each request writes one); after a crash they start from zero.
-- CreateTable
CREATE UNLOGGED TABLE "rate_limits" (
    "key" TEXT NOT NULL,
    "points" INTEGER NOT NULL DEFAULT 0,
    "expire" BIGINT,

    CONSTRAINT "rate_limits_pkey" PRIMARY KEY ("key")
);

-- The turns-in-progress limits count pending/running messages per app and per end user: without these the
-- count scanned the whole messages table on every turn start.
-- CreateIndex
CREATE INDEX "messages_app_id_status_idx" ON "messages"("app_id", "status");

-- CreateIndex
CREATE INDEX "messages_end_user_id_status_idx" ON "messages"("end_user_id", "status");
