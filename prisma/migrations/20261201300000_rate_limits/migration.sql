-- Issue 17 L6: counters of the api's request-rate and stream limits (rate-limiter-flexible, RateLimiterPostgres).
-- CreateTable
CREATE TABLE "rate_limits" (
    "key" TEXT NOT NULL,
    "points" INTEGER NOT NULL DEFAULT 0,
    "expire" BIGINT,

    CONSTRAINT "rate_limits_pkey" PRIMARY KEY ("key")
);
