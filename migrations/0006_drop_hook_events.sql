-- The raw hook records of 0003 are superseded by memory capture (0005):
-- sessions, prompt batches and activities hold what they held, cleaned.
-- A compaction is recorded by its archive (`conversation_archives`,
-- trigger `precompact`). Nothing reads the old table.
DROP INDEX IF EXISTS hook_events_group_at;
DROP TABLE IF EXISTS hook_events;
