-- Issue 47: the per-tenant schedule and webhook limits count a tenant's rows under its lock (core/domain/automation-quota.ts).
CREATE INDEX "app_schedules_tenant_id_idx" ON "app_schedules"("tenant_id");
CREATE INDEX "app_webhooks_tenant_id_idx" ON "app_webhooks"("tenant_id");
