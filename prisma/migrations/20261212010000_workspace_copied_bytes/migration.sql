-- Issue 47: a fork's workspace copy counts against its tenant's quota on workspace copies
-- (TENANT_MAX_WORKSPACE_COPY_BYTES, api/service/fork.ts): the bytes the copy took, null for a workspace no fork made.
-- The quota sums it over the tenant's active workspaces, under a per-tenant lock.
ALTER TABLE "agent_workspaces" ADD COLUMN "copied_bytes" BIGINT;

CREATE INDEX "agent_workspaces_tenant_id_idx" ON "agent_workspaces"("tenant_id");
