-- Draft lifecycle (issue 19): the shared draft's edit counter, and a build draft's base on it, so merging a build
-- draft into the shared draft can tell whether the shared draft moved since the build draft was forked.
ALTER TABLE "agent_config_drafts" ADD COLUMN "revision" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "agent_config_drafts" ADD COLUMN "base_draft_revision" INTEGER;
