-- The gateway's in-process cache (core/domain/llm/gateway-cache.ts, docs/decisions/0013-gateway-cache.md): every
-- write of a tenant's model credentials, and every change of a credit pool that can change its "used up" verdict,
-- NOTIFY gateway_cache so each api replica drops what it holds, whoever wrote (console, admin CLI, plain SQL).
-- A call's increment of quota_used that leaves the verdict as it was sends nothing.
CREATE FUNCTION "notify_gateway_credentials"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('gateway_cache', 'c:' || OLD."tenant_id"::text || ':' || OLD."provider");
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM pg_notify('gateway_cache', 'c:' || NEW."tenant_id"::text || ':' || NEW."provider");
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER "model_provider_credentials_gateway_cache" AFTER INSERT OR UPDATE OR DELETE ON "model_provider_credentials"
  FOR EACH ROW EXECUTE FUNCTION "notify_gateway_credentials"();

CREATE FUNCTION "notify_gateway_pool"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('gateway_cache', 'p:' || OLD."tenant_id"::text);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM pg_notify('gateway_cache', 'p:' || NEW."tenant_id"::text);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER "credit_pools_gateway_cache_rows" AFTER INSERT OR DELETE ON "credit_pools"
  FOR EACH ROW EXECUTE FUNCTION "notify_gateway_pool"();

CREATE TRIGGER "credit_pools_gateway_cache_verdict" AFTER UPDATE ON "credit_pools"
  FOR EACH ROW WHEN (
    OLD."tenant_id" IS DISTINCT FROM NEW."tenant_id"
    OR OLD."quota_limit" IS DISTINCT FROM NEW."quota_limit"
    OR (OLD."quota_used" >= OLD."quota_limit") IS DISTINCT FROM (NEW."quota_used" >= NEW."quota_limit")
  )
  EXECUTE FUNCTION "notify_gateway_pool"();

-- TRUNCATE fires no row trigger: drop everything.
CREATE FUNCTION "notify_gateway_all"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gateway_cache', '*');
  RETURN NULL;
END;
$$;

CREATE TRIGGER "model_provider_credentials_gateway_cache_truncate" AFTER TRUNCATE ON "model_provider_credentials"
  FOR EACH STATEMENT EXECUTE FUNCTION "notify_gateway_all"();

CREATE TRIGGER "credit_pools_gateway_cache_truncate" AFTER TRUNCATE ON "credit_pools"
  FOR EACH STATEMENT EXECUTE FUNCTION "notify_gateway_all"();
