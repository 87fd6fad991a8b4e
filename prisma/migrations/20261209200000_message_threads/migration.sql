-- Regenerate and fork (issue 35 item 2). A message names the message it follows in its thread (Dify's
-- parent_message_id): a regenerated answer is a sibling under the same parent. Rows written before this migration keep
-- null, read as linear (their parent is the conversation's previous message); a thread's root is stored as Dify's
-- UUID_NIL (00000000-0000-0000-0000-000000000000), so no new row is ever null. No foreign key: the sentinel is no row.
ALTER TABLE "messages" ADD COLUMN "parent_message_id" UUID;
CREATE INDEX "messages_conversation_id_parent_message_id_idx" ON "messages"("conversation_id", "parent_message_id");

-- The session snapshot each turn ended with (its terminal's, when it had one), beside the binding's latest: what a
-- regenerate or a fork starts from. Pruned by rule (core/session-snapshots.ts): the row stays with its snapshot removed.
CREATE TABLE "message_session_snapshots" (
    "message_id" UUID NOT NULL,
    "conversation_id" UUID NOT NULL,
    "binding_id" UUID NOT NULL,
    "snapshot" JSONB,
    "size_bytes" INTEGER NOT NULL DEFAULT 0,
    "pending_tool_call_id" TEXT,
    "pruned_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "message_session_snapshots_pkey" PRIMARY KEY ("message_id")
);
CREATE INDEX "message_session_snapshots_conversation_id_idx" ON "message_session_snapshots"("conversation_id");
ALTER TABLE "message_session_snapshots" ADD CONSTRAINT "message_session_snapshots_message_id_fkey"
  FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;
