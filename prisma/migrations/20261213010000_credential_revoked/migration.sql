-- Issue 47, "revoking a key ends its open streams": which app API key started a turn (null for the console's
-- debugger, scheduled turns and rows older than this column), so a revoke can find its streams' turns and, with
-- ?stop_turns=true, stop them (api/console/admin.ts). A plain reference: keys are never deleted but with their app.
ALTER TABLE "messages" ADD COLUMN "api_token_id" UUID;

CREATE INDEX "messages_api_token_id_status_idx" ON "messages"("api_token_id", "status");

-- Every api replica ends the streams of a revoked key (api/credential-watch.ts LISTENs on api_token_revoked),
-- whoever revoked it: the console route on any replica, the admin CLI or plain SQL. The payload is the key's id;
-- '*' (a TRUNCATE) makes each replica check every key it holds a stream for.
CREATE FUNCTION "notify_api_token_revoked"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    PERFORM pg_notify('api_token_revoked', '*');
  ELSE
    PERFORM pg_notify('api_token_revoked', OLD."id"::text);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER "api_tokens_revoked" AFTER UPDATE OF "revoked_at" ON "api_tokens"
  FOR EACH ROW WHEN (OLD."revoked_at" IS NULL AND NEW."revoked_at" IS NOT NULL)
  EXECUTE FUNCTION "notify_api_token_revoked"();

CREATE TRIGGER "api_tokens_deleted" AFTER DELETE ON "api_tokens"
  FOR EACH ROW EXECUTE FUNCTION "notify_api_token_revoked"();

CREATE TRIGGER "api_tokens_truncated" AFTER TRUNCATE ON "api_tokens"
  FOR EACH STATEMENT EXECUTE FUNCTION "notify_api_token_revoked"();
