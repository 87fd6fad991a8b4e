-- Issue 42, Dify's suggested questions after an answer: the questions of a message, kept so that a repeated or
-- concurrent GET /v1/messages/{id}/suggested is answered from here (one row per message: the primary key makes the
-- concurrent writers agree on one) and the model call behind them is made and billed once.
CREATE TABLE "message_suggested_questions" (
    "message_id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "questions" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "message_suggested_questions_pkey" PRIMARY KEY ("message_id")
);

CREATE INDEX "message_suggested_questions_tenant_id_idx" ON "message_suggested_questions"("tenant_id");

ALTER TABLE "message_suggested_questions" ADD CONSTRAINT "message_suggested_questions_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;
