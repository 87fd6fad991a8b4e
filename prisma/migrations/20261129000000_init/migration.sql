-- Initial schema: every table of ARCHITECTURE.md's data model.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- CreateEnum
CREATE TYPE "AgentConfigDraftType" AS ENUM ('DRAFT', 'DEBUG_BUILD', 'BUILD_DRAFT');

-- CreateEnum
CREATE TYPE "MessageStatus" AS ENUM ('pending', 'running', 'paused', 'succeeded', 'failed', 'stopped');

-- CreateEnum
CREATE TYPE "BindingOwnerType" AS ENUM ('CONVERSATION', 'BUILD_DRAFT');

-- CreateEnum
CREATE TYPE "HumanInputFormStatus" AS ENUM ('waiting', 'submitted', 'expired', 'cancelled');

-- CreateTable
CREATE TABLE "tenants" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "tenants_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "accounts" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "email" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "apps" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "mode" TEXT NOT NULL DEFAULT 'agent',
    "description" TEXT NOT NULL DEFAULT '',
    "icon" TEXT NOT NULL DEFAULT '🤖',
    "annotation_reply_enabled" BOOLEAN NOT NULL DEFAULT false,
    "annotation_score_threshold" DOUBLE PRECISION NOT NULL DEFAULT 0.8,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "apps_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_tokens" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "token_prefix" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT 'default',
    "last_used_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "api_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "console_tokens" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "revoked_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "console_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "end_users" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "session_id" TEXT NOT NULL,
    "type" TEXT NOT NULL DEFAULT 'service_api',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "end_users_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agents" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "active_config_snapshot_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agents_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_config_versions" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "version" INTEGER NOT NULL,
    "config_snapshot" JSONB NOT NULL,
    "created_by" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_config_versions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_config_drafts" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "draft_type" "AgentConfigDraftType" NOT NULL,
    "account_id" UUID,
    "config" JSONB NOT NULL,
    "base_version_id" UUID,
    "agent_workspace_binding_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_config_drafts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "conversations" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "end_user_id" UUID,
    "account_id" UUID,
    "name" TEXT NOT NULL DEFAULT 'New conversation',
    "inputs" JSONB NOT NULL DEFAULT '{}',
    "invoke_from" TEXT NOT NULL DEFAULT 'service-api',
    "status" TEXT NOT NULL DEFAULT 'normal',
    "agent_workspace_binding_id" UUID,
    "active_message_id" UUID,
    "dialogue_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),
    CONSTRAINT "conversations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "messages" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "conversation_id" UUID NOT NULL,
    "end_user_id" UUID,
    "account_id" UUID,
    "invoke_from" TEXT NOT NULL DEFAULT 'service-api',
    "query" TEXT NOT NULL,
    "inputs" JSONB NOT NULL DEFAULT '{}',
    "answer" TEXT NOT NULL DEFAULT '',
    "status" "MessageStatus" NOT NULL DEFAULT 'pending',
    "error" TEXT,
    "error_code" TEXT,
    "message_tokens" INTEGER NOT NULL DEFAULT 0,
    "answer_tokens" INTEGER NOT NULL DEFAULT 0,
    "total_tokens" INTEGER NOT NULL DEFAULT 0,
    "message_unit_price" DECIMAL(12,7) NOT NULL DEFAULT 0,
    "message_price_unit" DECIMAL(10,7) NOT NULL DEFAULT 0.000001,
    "answer_unit_price" DECIMAL(12,7) NOT NULL DEFAULT 0,
    "answer_price_unit" DECIMAL(10,7) NOT NULL DEFAULT 0.000001,
    "total_price" DECIMAL(14,7) NOT NULL DEFAULT 0,
    "currency" TEXT NOT NULL DEFAULT 'USD',
    "provider_response_latency" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "time_to_first_token" DOUBLE PRECISION,
    "usage" JSONB,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "workflow_id" TEXT NOT NULL,
    "agent_config_version_id" UUID,
    "resumed_from_message_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "message_agent_thoughts" (
    "id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "position" INTEGER NOT NULL,
    "kind" TEXT NOT NULL,
    "thought" TEXT NOT NULL DEFAULT '',
    "tool" TEXT NOT NULL DEFAULT '',
    "tool_labels" JSONB NOT NULL DEFAULT '{}',
    "tool_input" TEXT NOT NULL DEFAULT '',
    "observation" TEXT NOT NULL DEFAULT '',
    "tool_call_id" TEXT,
    "part_index" INTEGER,
    "message_files" JSONB NOT NULL DEFAULT '[]',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "message_agent_thoughts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "upload_files" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID,
    "end_user_id" UUID,
    "name" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "extension" TEXT NOT NULL,
    "mime_type" TEXT NOT NULL,
    "storage_key" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "upload_files_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "message_files" (
    "id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "type" TEXT NOT NULL,
    "transfer_method" TEXT NOT NULL,
    "url" TEXT,
    "upload_file_id" UUID,
    "belongs_to" TEXT NOT NULL DEFAULT 'user',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "message_files_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "message_feedbacks" (
    "id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "conversation_id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "rating" TEXT NOT NULL,
    "content" TEXT,
    "from_end_user_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "message_feedbacks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_workspaces" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "home_snapshot_id" TEXT NOT NULL DEFAULT 'home-v1',
    "backend_workspace_ref" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_workspaces_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_workspace_bindings" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "owner_type" "BindingOwnerType" NOT NULL,
    "owner_id" UUID NOT NULL,
    "scope_key" TEXT NOT NULL,
    "agent_config_version_id" UUID,
    "session_scope_config_version_id" UUID NOT NULL,
    "config_kind" TEXT NOT NULL,
    "home_snapshot_id" TEXT NOT NULL,
    "generation" INTEGER NOT NULL DEFAULT 1,
    "backend_binding_ref" TEXT NOT NULL,
    "session_snapshot" JSONB,
    "pending_form_id" UUID,
    "pending_tool_call_id" TEXT,
    "pending_message_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_workspace_bindings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "human_input_forms" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "conversation_id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "end_user_id" UUID,
    "node_id" TEXT NOT NULL,
    "token" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "question" TEXT NOT NULL,
    "markdown" TEXT NOT NULL DEFAULT '',
    "fields" JSONB NOT NULL,
    "actions" JSONB NOT NULL,
    "urgency" TEXT NOT NULL DEFAULT 'normal',
    "status" "HumanInputFormStatus" NOT NULL DEFAULT 'waiting',
    "workflow_id" TEXT NOT NULL,
    "tool_call_id" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "submission" JSONB,
    "submitted_action" TEXT,
    "submitted_at" TIMESTAMPTZ(3),
    "resume_message_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "human_input_forms_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "app_annotations" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "app_id" UUID NOT NULL,
    "question" TEXT NOT NULL,
    "content" TEXT NOT NULL,
    "hit_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "app_annotations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "model_provider_credentials" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "provider" TEXT NOT NULL,
    "encrypted_config" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "model_provider_credentials_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "credit_pools" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "quota_limit" BIGINT NOT NULL,
    "quota_used" BIGINT NOT NULL DEFAULT '0',
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "credit_pools_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "credit_ledger" (
    "id" UUID NOT NULL,
    "tenant_id" UUID NOT NULL,
    "pool_id" UUID,
    "billing_request_id" TEXT NOT NULL,
    "agent_run_id" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "prompt_tokens" INTEGER NOT NULL,
    "completion_tokens" INTEGER NOT NULL,
    "credits" BIGINT NOT NULL,
    "total_price" DECIMAL(14,7) NOT NULL,
    "currency" TEXT NOT NULL,
    "billable" BOOLEAN NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "credit_ledger_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_backend_runs" (
    "message_id" UUID NOT NULL,
    "backend_run_id" TEXT,
    "request" JSONB NOT NULL,
    "binding_id" UUID,
    "output_moderation" JSONB,
    "cursor" TEXT,
    "status" TEXT NOT NULL DEFAULT 'created',
    "terminal_type" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_backend_runs_pkey" PRIMARY KEY ("message_id")
);

-- CreateTable
CREATE TABLE "message_events" (
    "id" BIGSERIAL NOT NULL,
    "message_id" UUID NOT NULL,
    "seq" INTEGER NOT NULL,
    "event" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "source_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "message_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "accounts_email_key" ON "accounts"("email");

CREATE INDEX "accounts_tenant_id_idx" ON "accounts"("tenant_id");

CREATE INDEX "apps_tenant_id_idx" ON "apps"("tenant_id");

CREATE UNIQUE INDEX "api_tokens_token_hash_key" ON "api_tokens"("token_hash");

CREATE INDEX "api_tokens_app_id_idx" ON "api_tokens"("app_id");

CREATE UNIQUE INDEX "console_tokens_token_hash_key" ON "console_tokens"("token_hash");

CREATE INDEX "console_tokens_account_id_idx" ON "console_tokens"("account_id");

CREATE UNIQUE INDEX "end_users_app_id_session_id_key" ON "end_users"("app_id", "session_id");

CREATE UNIQUE INDEX "agents_app_id_key" ON "agents"("app_id");

CREATE UNIQUE INDEX "agents_active_config_snapshot_id_key" ON "agents"("active_config_snapshot_id");

CREATE UNIQUE INDEX "agent_config_versions_agent_id_version_key" ON "agent_config_versions"("agent_id", "version");

CREATE UNIQUE INDEX "agent_config_drafts_agent_workspace_binding_id_key" ON "agent_config_drafts"("agent_workspace_binding_id");

CREATE UNIQUE INDEX "agent_config_drafts_agent_id_draft_type_account_id_key" ON "agent_config_drafts"("agent_id", "draft_type", "account_id");

CREATE UNIQUE INDEX "conversations_agent_workspace_binding_id_key" ON "conversations"("agent_workspace_binding_id");

CREATE UNIQUE INDEX "conversations_active_message_id_key" ON "conversations"("active_message_id");

CREATE INDEX "conversations_app_id_end_user_id_updated_at_idx" ON "conversations"("app_id", "end_user_id", "updated_at");

CREATE UNIQUE INDEX "messages_resumed_from_message_id_key" ON "messages"("resumed_from_message_id");

CREATE INDEX "messages_conversation_id_created_at_idx" ON "messages"("conversation_id", "created_at");

CREATE INDEX "messages_workflow_id_idx" ON "messages"("workflow_id");

CREATE UNIQUE INDEX "message_agent_thoughts_message_id_position_key" ON "message_agent_thoughts"("message_id", "position");

CREATE INDEX "message_agent_thoughts_message_id_tool_call_id_idx" ON "message_agent_thoughts"("message_id", "tool_call_id");

CREATE UNIQUE INDEX "upload_files_storage_key_key" ON "upload_files"("storage_key");

CREATE INDEX "upload_files_tenant_id_idx" ON "upload_files"("tenant_id");

CREATE INDEX "message_files_message_id_idx" ON "message_files"("message_id");

CREATE UNIQUE INDEX "message_feedbacks_message_id_from_end_user_id_key" ON "message_feedbacks"("message_id", "from_end_user_id");

CREATE INDEX "agent_workspaces_agent_id_idx" ON "agent_workspaces"("agent_id");

CREATE UNIQUE INDEX "agent_workspace_bindings_scope_key_key" ON "agent_workspace_bindings"("scope_key");

CREATE UNIQUE INDEX "agent_workspace_bindings_pending_form_id_key" ON "agent_workspace_bindings"("pending_form_id");

CREATE UNIQUE INDEX "agent_workspace_bindings_owner_type_owner_id_key" ON "agent_workspace_bindings"("owner_type", "owner_id");

CREATE UNIQUE INDEX "human_input_forms_message_id_key" ON "human_input_forms"("message_id");

CREATE UNIQUE INDEX "human_input_forms_token_key" ON "human_input_forms"("token");

CREATE UNIQUE INDEX "human_input_forms_resume_message_id_key" ON "human_input_forms"("resume_message_id");

CREATE INDEX "human_input_forms_conversation_id_idx" ON "human_input_forms"("conversation_id");

CREATE INDEX "app_annotations_question_idx" ON "app_annotations" USING GIN ("question" gin_trgm_ops);

CREATE INDEX "app_annotations_app_id_idx" ON "app_annotations"("app_id");

CREATE UNIQUE INDEX "model_provider_credentials_tenant_id_provider_key" ON "model_provider_credentials"("tenant_id", "provider");

CREATE UNIQUE INDEX "credit_pools_tenant_id_key" ON "credit_pools"("tenant_id");

CREATE UNIQUE INDEX "credit_ledger_billing_request_id_key" ON "credit_ledger"("billing_request_id");

CREATE INDEX "credit_ledger_tenant_id_created_at_idx" ON "credit_ledger"("tenant_id", "created_at");

CREATE UNIQUE INDEX "agent_backend_runs_backend_run_id_key" ON "agent_backend_runs"("backend_run_id");

CREATE UNIQUE INDEX "message_events_message_id_seq_key" ON "message_events"("message_id", "seq");

CREATE UNIQUE INDEX "message_events_message_id_source_key_key" ON "message_events"("message_id", "source_key");

-- AddForeignKey
ALTER TABLE "accounts" ADD CONSTRAINT "accounts_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "apps" ADD CONSTRAINT "apps_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "console_tokens" ADD CONSTRAINT "console_tokens_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "end_users" ADD CONSTRAINT "end_users_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "agents" ADD CONSTRAINT "agents_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "agents" ADD CONSTRAINT "agents_active_config_snapshot_id_fkey" FOREIGN KEY ("active_config_snapshot_id") REFERENCES "agent_config_versions"("id") ON DELETE SET NULL ON UPDATE CASCADE;

ALTER TABLE "agent_config_versions" ADD CONSTRAINT "agent_config_versions_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "agent_config_drafts" ADD CONSTRAINT "agent_config_drafts_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "messages" ADD CONSTRAINT "messages_conversation_id_fkey" FOREIGN KEY ("conversation_id") REFERENCES "conversations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "message_agent_thoughts" ADD CONSTRAINT "message_agent_thoughts_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "message_files" ADD CONSTRAINT "message_files_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "message_files" ADD CONSTRAINT "message_files_upload_file_id_fkey" FOREIGN KEY ("upload_file_id") REFERENCES "upload_files"("id") ON DELETE SET NULL ON UPDATE CASCADE;

ALTER TABLE "message_feedbacks" ADD CONSTRAINT "message_feedbacks_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "agent_workspaces" ADD CONSTRAINT "agent_workspaces_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "agent_workspace_bindings" ADD CONSTRAINT "agent_workspace_bindings_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "agent_workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "app_annotations" ADD CONSTRAINT "app_annotations_app_id_fkey" FOREIGN KEY ("app_id") REFERENCES "apps"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "model_provider_credentials" ADD CONSTRAINT "model_provider_credentials_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "credit_pools" ADD CONSTRAINT "credit_pools_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "credit_ledger" ADD CONSTRAINT "credit_ledger_pool_id_fkey" FOREIGN KEY ("pool_id") REFERENCES "credit_pools"("id") ON DELETE SET NULL ON UPDATE CASCADE;

ALTER TABLE "agent_backend_runs" ADD CONSTRAINT "agent_backend_runs_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "message_events" ADD CONSTRAINT "message_events_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Wake up SSE readers on any api replica: NOTIFY carries the message id; rows stay the source of truth.
CREATE FUNCTION "notify_message_event"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('message_events', NEW."message_id"::text);
  RETURN NULL;
END;
$$;

CREATE TRIGGER "message_events_notify" AFTER INSERT ON "message_events"
  FOR EACH ROW EXECUTE FUNCTION "notify_message_event"();
