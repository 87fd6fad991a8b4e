-- Tool providers (issue 14 §3–5): a tenant's API tools (an OpenAPI 3 document) and MCP servers. Secrets are
-- AES-256-GCM encrypted like model provider credentials; the tool list is cached for turn building.
CREATE TABLE "tool_providers" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "server_url" TEXT NOT NULL,
    "openapi_schema" JSONB,
    "auth" JSONB NOT NULL,
    "encrypted_credentials" TEXT,
    "tools" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "tool_providers_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "tool_providers_tenant_id_name_key" ON "tool_providers"("tenant_id", "name");

ALTER TABLE "tool_providers" ADD CONSTRAINT "tool_providers_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
