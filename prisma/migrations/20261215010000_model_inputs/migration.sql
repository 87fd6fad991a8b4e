-- Issue 42, the inspector's context view: what each model request of a turn was sent, part by part with token counts,
-- recorded by the api's inner LLM endpoint (never in Temporal history; credentials are never part of a prompt).
CREATE TABLE "message_model_inputs" (
    "message_id" UUID NOT NULL,
    "call_index" INTEGER NOT NULL,
    "tenant_id" UUID NOT NULL,
    "parts" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "message_model_inputs_pkey" PRIMARY KEY ("message_id","call_index")
);

CREATE INDEX "message_model_inputs_tenant_id_idx" ON "message_model_inputs"("tenant_id");

ALTER TABLE "message_model_inputs" ADD CONSTRAINT "message_model_inputs_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;
