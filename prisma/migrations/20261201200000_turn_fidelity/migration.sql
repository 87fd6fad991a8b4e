-- Issue 18: a cut model call (a user's stop) is recorded with estimated token counts; the call completed
-- later under the same billing id (a replay after a transport failure) replaces the estimate, once.
ALTER TABLE "credit_ledger" ADD COLUMN "estimated" BOOLEAN NOT NULL DEFAULT false;
