-- Recall: each archive split into passages of one exchange (the people's
-- messages and the assistant's answer), with their place in the archive, so
-- a question is answered by the turn that holds the answer, not only by the
-- archive. Filled when an archive is recorded and by `g2 memory reindex`
-- (for archives recorded before this migration).
CREATE TABLE archive_passages (
    id           INTEGER PRIMARY KEY,
    archive_id   INTEGER NOT NULL REFERENCES conversation_archives (id) ON DELETE CASCADE,
    group_folder TEXT NOT NULL,
    -- The passage's number in its archive, from 0.
    ordinal      INTEGER NOT NULL,
    -- The messages it holds, by their index in the archive (from 0), inclusive.
    turn_start   INTEGER NOT NULL,
    turn_end     INTEGER NOT NULL,
    text         TEXT NOT NULL,
    -- When it was said: the archive's time (RFC 3339, UTC).
    at           TEXT NOT NULL,
    UNIQUE (archive_id, ordinal)
) STRICT;
CREATE INDEX archive_passages_group ON archive_passages (group_folder, at);

CREATE VIRTUAL TABLE passages_fts USING fts5 (
    text,
    content = 'archive_passages',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER archive_passages_fts_insert AFTER INSERT ON archive_passages
BEGIN
    INSERT INTO passages_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER archive_passages_fts_delete AFTER DELETE ON archive_passages
BEGIN
    INSERT INTO passages_fts (passages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- How many passages hold each term: the weight of a question's word.
CREATE VIRTUAL TABLE passages_vocab USING fts5vocab (passages_fts, 'row');
