-- Agent workspaces are real directories now (issue 13): one per binding, created on first use, kept across
-- the conversation's turns, and retired (status + retired_at, files removed, binding marked) when the
-- conversation is deleted or the binding's generation no longer matches its workspace.
ALTER TABLE "agent_workspaces" ADD COLUMN "status" TEXT NOT NULL DEFAULT 'active';
ALTER TABLE "agent_workspaces" ADD COLUMN "generation" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "agent_workspaces" ADD COLUMN "retired_at" TIMESTAMPTZ(3);
ALTER TABLE "agent_workspace_bindings" ADD COLUMN "retired_at" TIMESTAMPTZ(3);
