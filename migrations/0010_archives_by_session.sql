-- Recall looks up a session's archives: its observations' archive (their
-- provenance) and which captured prompts no archive holds yet.
CREATE INDEX conversation_archives_session ON conversation_archives (session_id, created_at);
