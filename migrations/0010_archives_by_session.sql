-- Recall looks up a session's archives: its observations' archive (their
-- provenance) and which captured prompts no archive holds yet.
CREATE INDEX conversation_archives_session ON conversation_archives (session_id, created_at);

-- A session's summary is rewritten when the session compacts again or
-- completes after it was made: its index row follows.
CREATE TRIGGER session_summaries_fts_update AFTER UPDATE ON session_summaries
BEGIN
    DELETE FROM summaries_fts WHERE rowid = old.id;
    INSERT INTO summaries_fts (rowid, title, body) VALUES (new.id, new.title,
        new.request || char(10) || new.investigated || char(10) || new.learned || char(10) || new.completed || char(10) || new.next_steps);
END;
