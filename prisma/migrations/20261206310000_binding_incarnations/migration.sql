-- Bindings that are replaced, not just retired (issue 31): a binding whose workspace vanished (binding_lost) or a
-- build draft's binding retired with the draft's lifecycle is followed by the owner's next incarnation, so the owner
-- is unique per incarnation, and the retirement says why.
ALTER TABLE "agent_workspace_bindings" ADD COLUMN "retired_reason" TEXT;
ALTER TABLE "agent_workspace_bindings" ADD COLUMN "incarnation" INTEGER NOT NULL DEFAULT 1;
DROP INDEX "agent_workspace_bindings_owner_type_owner_id_key";
CREATE UNIQUE INDEX "agent_workspace_bindings_owner_type_owner_id_incarnation_key" ON "agent_workspace_bindings"("owner_type", "owner_id", "incarnation");
