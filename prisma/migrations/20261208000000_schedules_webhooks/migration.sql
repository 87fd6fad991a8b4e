-- Scheduled turns and webhooks (issue 35 items 3 and 4).

-- A schedule of an app: its Temporal schedule is `app-schedule-<id>` (api/routes/schedules.ts).
CREATE TABLE "app_schedules" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "cron" TEXT,
    "interval_seconds" INTEGER,
    "time_zone" TEXT NOT NULL DEFAULT 'UTC',
    "query" TEXT NOT NULL,
    "inputs" JSONB NOT NULL DEFAULT '{}',
    "user" TEXT NOT NULL,
    "conversation_mode" TEXT NOT NULL DEFAULT 'new',
    "conversation_id" UUID,
    "overlap_policy" TEXT NOT NULL,
    "catchup_window_seconds" INTEGER NOT NULL DEFAULT 60,
    "paused" BOOLEAN NOT NULL DEFAULT false,
    "last_run_at" TIMESTAMPTZ(3),
    "last_run_status" TEXT,
    "last_run_message_id" UUID,
    "last_run_error" TEXT,
    "created_by" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "app_schedules_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "app_schedules_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "app_schedules_app_id_created_at_idx" ON "app_schedules"("app_id", "created_at");

-- A webhook of an app; the signing secret is AES-256-GCM encrypted with ENCRYPTION_KEY (core/webhooks/secret.ts).
CREATE TABLE "app_webhooks" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "url" TEXT NOT NULL,
    "events" TEXT[],
    "encrypted_secret" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "app_webhooks_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "app_webhooks_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "app_webhooks_app_id_idx" ON "app_webhooks"("app_id");

-- One delivery of one event to one webhook: its outbox row (dispatched_at: its deliverWebhook workflow was started)
-- and its log (status, attempts, last error, response code).
CREATE TABLE "webhook_deliveries" (
    "id" UUID NOT NULL,
    "webhook_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "event" TEXT NOT NULL,
    "event_id" UUID NOT NULL,
    "payload" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "response_code" INTEGER,
    "redelivery_of" UUID,
    "dispatch_after" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "dispatched_at" TIMESTAMPTZ(3),
    "delivered_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "webhook_deliveries_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "app_webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "webhook_deliveries_webhook_id_created_at_idx" ON "webhook_deliveries"("webhook_id", "created_at");
-- The dispatcher's claim: undispatched rows by due time.
CREATE INDEX "webhook_deliveries_dispatched_at_dispatch_after_idx" ON "webhook_deliveries"("dispatched_at", "dispatch_after");

-- One event, fanned out to every enabled webhook of the app subscribed to it, inside the caller's transaction.
CREATE FUNCTION enqueue_webhook_event(p_app_id UUID, p_event TEXT, p_data JSONB) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
  v_event_id UUID := gen_random_uuid();
  v_count INTEGER;
BEGIN
  INSERT INTO webhook_deliveries (id, webhook_id, app_id, event, event_id, payload)
  SELECT gen_random_uuid(), w.id, p_app_id, p_event, v_event_id,
         jsonb_build_object('id', v_event_id, 'event', p_event, 'app_id', p_app_id,
                            'created_at', floor(extract(epoch FROM now()))::bigint, 'data', p_data)
    FROM app_webhooks w
   WHERE w.app_id = p_app_id AND w.enabled AND p_event = ANY (w.events);
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END $$;

-- A turn's outcome is committed by whichever step ends it (runAgent, failTurn, stopTurn, the input guards, the
-- ask_human pause, the sweeper): the trigger writes its webhook deliveries in that same transaction, so an
-- outcome is never committed without its deliveries, nor a delivery without its outcome.
CREATE FUNCTION messages_webhook_outcome() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_event TEXT;
BEGIN
  v_event := CASE NEW.status::text
    WHEN 'succeeded' THEN 'turn.succeeded'
    WHEN 'failed' THEN 'turn.failed'
    WHEN 'stopped' THEN 'turn.stopped'
    WHEN 'paused' THEN 'turn.human_input_required'
    ELSE NULL END;
  IF v_event IS NULL OR NOT EXISTS (SELECT 1 FROM app_webhooks w WHERE w.app_id = NEW.app_id AND w.enabled) THEN
    RETURN NEW;
  END IF;
  PERFORM enqueue_webhook_event(NEW.app_id, v_event, jsonb_build_object(
    'message_id', NEW.id, 'conversation_id', NEW.conversation_id, 'task_id', NEW.id,
    'status', NEW.status::text, 'invoke_from', NEW.invoke_from,
    'answer', NEW.answer, 'error_code', NEW.error_code, 'error', NEW.error,
    'total_tokens', NEW.total_tokens, 'schedule_id', NEW.metadata->>'schedule_id'));
  RETURN NEW;
END $$;

CREATE TRIGGER "messages_webhook_outcome" AFTER UPDATE OF "status" ON "messages"
  FOR EACH ROW WHEN (OLD."status" IS DISTINCT FROM NEW."status") EXECUTE FUNCTION messages_webhook_outcome();
