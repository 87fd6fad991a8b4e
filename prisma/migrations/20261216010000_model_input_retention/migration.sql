-- Issue 42: the inspector's model inputs are kept MODEL_INPUT_RETENTION_DAYS; the worker's sweeper deletes older rows
-- by creation time in batches (core/domain/llm/model-input-retention.ts), which this index serves.
CREATE INDEX "message_model_inputs_created_at_idx" ON "message_model_inputs"("created_at");
