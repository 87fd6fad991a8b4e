-- Issue 35 item 6: a queued turn's coordinator asks whether a stop (a workflow cancel through the outbox) was written for
-- its child's workflow id before the child existed (workflows/conversation-queue.ts, patched 'queue-stop-before-start').
CREATE INDEX "temporal_outbox_workflow_id_idx" ON "temporal_outbox"("workflow_id");
