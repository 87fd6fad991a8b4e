-- Multitask (double-texting) strategies (issue 35 item 1): a message sent while a turn runs may wait in the
-- conversation's queue (status `queued`, ordered by `queue_position`), interrupt the running turn, or roll it back
-- (`rolled_back_at`: hidden from the history, its usage kept in the ledger). The app's default strategy is a column.
CREATE TYPE "MultitaskStrategy" AS ENUM ('reject', 'enqueue', 'interrupt', 'rollback');
ALTER TYPE "MessageStatus" ADD VALUE 'queued';
ALTER TABLE "apps" ADD COLUMN "multitask_strategy" "MultitaskStrategy" NOT NULL DEFAULT 'reject';
ALTER TABLE "messages" ADD COLUMN "queue_position" BIGINT;
ALTER TABLE "messages" ADD COLUMN "rolled_back_at" TIMESTAMPTZ(3);
CREATE INDEX "messages_conversation_id_queue_position_idx" ON "messages"("conversation_id", "queue_position");
