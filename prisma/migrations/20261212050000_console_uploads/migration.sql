-- Issue 43 item 1: a debugger turn takes files like a service-API turn. The studio's uploads belong to the console
-- account that made them (POST /console/api/apps/{app_id}/agent/debug/files/upload), as a service-API upload belongs
-- to its end user; a debugger turn may reference only the caller's own uploads of the app.
ALTER TABLE "upload_files" ADD COLUMN "account_id" UUID;
