-- Issue 35 item 4 (residuals): a `turn.human_input_required` payload carries what a receiver needs to answer the form
-- (its id, token, fields, actions, expiry and the route to submit it), and delivery rows are pruned by age.

-- The outcome trigger of 20261208000000_schedules_webhooks, plus `data.human_input` for a paused turn: the ask_human
-- pause (activities/run-agent/pause.ts) creates the form in the same transaction, before it sets the status, so the
-- form is there. `submit` names the route to POST `{inputs, action[, user]}` to: the service API's for an end user's
-- turn (an app key, and its `user`), the console debugger's for a debugger turn (a console key of its account).
CREATE OR REPLACE FUNCTION messages_webhook_outcome() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_event TEXT;
  v_data JSONB;
  v_form RECORD;
  v_user TEXT;
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
  v_data := jsonb_build_object(
    'message_id', NEW.id, 'conversation_id', NEW.conversation_id, 'task_id', NEW.id,
    'status', NEW.status::text, 'invoke_from', NEW.invoke_from,
    'answer', NEW.answer, 'error_code', NEW.error_code, 'error', NEW.error,
    'total_tokens', NEW.total_tokens, 'schedule_id', NEW.metadata->>'schedule_id');
  IF NEW.status::text = 'paused' THEN
    SELECT f.id, f.token, f.title, f.question, f.fields, f.actions, f.expires_at INTO v_form
      FROM human_input_forms f WHERE f.message_id = NEW.id;
    IF FOUND THEN
      SELECT u.session_id INTO v_user FROM end_users u WHERE u.id = NEW.end_user_id;
      v_data := v_data || jsonb_build_object('human_input', jsonb_build_object(
        'form_id', v_form.id, 'form_token', v_form.token, 'title', v_form.title, 'question', v_form.question,
        'inputs', v_form.fields, 'actions', v_form.actions,
        'expiration_time', floor(extract(epoch FROM v_form.expires_at))::bigint,
        'submit', CASE WHEN NEW.invoke_from = 'debugger' THEN jsonb_build_object(
            'method', 'POST', 'path', '/console/api/apps/' || NEW.app_id || '/agent/debug/forms/' || v_form.token,
            'auth', 'console_key', 'user', NULL)
          ELSE jsonb_build_object(
            'method', 'POST', 'path', '/v1/form/human_input/' || v_form.token, 'auth', 'app_key', 'user', v_user) END));
    END IF;
  END IF;
  PERFORM enqueue_webhook_event(NEW.app_id, v_event, v_data);
  RETURN NEW;
END $$;

-- Retention (core/domain/webhooks/retention.ts): finished deliveries older than the window are deleted by age.
CREATE INDEX "webhook_deliveries_created_at_idx" ON "webhook_deliveries"("created_at");
