-- Admission control (issue 21, api/admission.ts): the deployment-wide count of turns in flight (status pending or
-- running, every app) on each turn start. Through messages(app_id, status) it read the whole index: 8–20 ms with
-- 300k messages over 5,000 apps; on this index it reads only the in-flight entries.
CREATE INDEX "messages_status_idx" ON "messages"("status");
