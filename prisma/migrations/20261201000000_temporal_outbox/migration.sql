-- The transactional outbox of what the api owes Temporal (a form's `formSubmitted` signal, a stop's or a
-- deleted conversation's workflow cancel): written in the same transaction as the state change it
-- announces, delivered by a dispatcher in every api and worker process until Temporal acknowledges.
CREATE TABLE "temporal_outbox" (
    "id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "workflow_id" TEXT NOT NULL,
    "signal_name" TEXT,
    "payload" JSONB NOT NULL DEFAULT '{}',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "delivered_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "temporal_outbox_pkey" PRIMARY KEY ("id")
);

-- The dispatchers' claim: undelivered rows that are due.
CREATE INDEX "temporal_outbox_delivered_at_next_attempt_at_idx" ON "temporal_outbox"("delivered_at", "next_attempt_at");
