-- The client event log's per-message seq counter: an append allocates seq numbers by updating it (row
-- lock, latest committed value), so a batch of events is one statement with no advisory lock or max(seq).
ALTER TABLE "messages" ADD COLUMN "event_seq" INTEGER NOT NULL DEFAULT 0;

UPDATE "messages" AS m
   SET "event_seq" = s."max_seq"
  FROM (SELECT "message_id", max("seq") AS "max_seq" FROM "message_events" GROUP BY "message_id") AS s
 WHERE s."message_id" = m."id";
