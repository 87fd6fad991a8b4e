-- The outputs/ byte quota (issue 27, core/output-quota.ts) sums a tenant's agent-output uploads of the last 24 hours
-- on every turn with a shell: a tenant's uploads by time, and the message file that marks one as a tool_file.
CREATE INDEX "upload_files_tenant_id_created_at_idx" ON "upload_files"("tenant_id", "created_at");
CREATE INDEX "message_files_upload_file_id_idx" ON "message_files"("upload_file_id");
