-- When memory was said, not when it was recorded. A passage's `at` is now
-- its first message's time and `at_end` its last's (a passage spanning
-- midnight, or a long session's exchange, has both); rows recorded before
-- keep the archive's time in `at` and no `at_end` until
-- `g2 memory reindex` re-dates them. A prompt batch's `said_at` is its
-- first message's time (the chat's, not the hook's); an observation's is
-- the time of what it was learned from; a summary's spans its session.
-- All RFC 3339, UTC; none: not known (read as the row's own time).
ALTER TABLE archive_passages ADD COLUMN at_end TEXT;
ALTER TABLE prompt_batches ADD COLUMN said_at TEXT;
ALTER TABLE observations ADD COLUMN said_at TEXT;
ALTER TABLE session_summaries ADD COLUMN said_from TEXT;
ALTER TABLE session_summaries ADD COLUMN said_to TEXT;
