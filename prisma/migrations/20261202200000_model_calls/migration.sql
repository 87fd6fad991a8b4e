-- Issue 18: per-iteration usage. Each model request of a run is recorded with its tokens, price and latency, and
-- each thought row names the model request that produced it (the agent log's iterations); tool rows keep Dify's
-- tool_meta (time cost, error).
ALTER TABLE "message_agent_thoughts" ADD COLUMN "call_index" INTEGER;
ALTER TABLE "message_agent_thoughts" ADD COLUMN "tool_meta" JSONB NOT NULL DEFAULT '{}';

CREATE TABLE "message_model_calls" (
    "id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "call_index" INTEGER NOT NULL,
    "prompt_tokens" INTEGER NOT NULL,
    "completion_tokens" INTEGER NOT NULL,
    "total_price" DECIMAL(18,7) NOT NULL,
    "currency" TEXT NOT NULL DEFAULT 'USD',
    "latency" DECIMAL(10,3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "message_model_calls_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "message_model_calls_message_id_call_index_key" ON "message_model_calls"("message_id", "call_index");

ALTER TABLE "message_model_calls" ADD CONSTRAINT "message_model_calls_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;
