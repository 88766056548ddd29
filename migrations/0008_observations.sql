-- Memory that works: what the processor extracted from captured batches
-- (observations) and sessions (summaries), and the state of its jobs.
-- Every row carries its group.

-- One typed record of something learned. `superseded` when a later one
-- restates it (`superseded_by`); `forgotten` keeps only a tombstone: its
-- text is emptied and it leaves recall and injection.
CREATE TABLE observations (
    id            INTEGER PRIMARY KEY,
    group_folder  TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('decision', 'discovery', 'fact', 'preference', 'change', 'bugfix', 'todo', 'person')),
    title         TEXT NOT NULL,
    narrative     TEXT NOT NULL DEFAULT '',
    -- JSON arrays of strings.
    facts         TEXT NOT NULL DEFAULT '[]',
    files         TEXT NOT NULL DEFAULT '[]',
    concerns      TEXT NOT NULL DEFAULT '[]',
    importance    INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 10),
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded', 'forgotten')),
    superseded_by INTEGER REFERENCES observations (id) ON DELETE SET NULL,
    -- `extracted` by the processor, `remembered` when a person or the agent asked.
    origin        TEXT NOT NULL DEFAULT 'extracted' CHECK (origin IN ('extracted', 'remembered')),
    -- Provenance.
    session_id    INTEGER REFERENCES memory_sessions (id) ON DELETE SET NULL,
    batch_id      INTEGER REFERENCES prompt_batches (id) ON DELETE SET NULL,
    created_at    TEXT NOT NULL
) STRICT;
CREATE INDEX observations_group ON observations (group_folder, status, importance);
CREATE INDEX observations_batch ON observations (batch_id);

CREATE VIRTUAL TABLE observations_fts USING fts5 (
    title,
    narrative,
    facts,
    content = 'observations',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER observations_fts_insert AFTER INSERT ON observations
BEGIN
    INSERT INTO observations_fts (rowid, title, narrative, facts) VALUES (new.id, new.title, new.narrative, new.facts);
END;
CREATE TRIGGER observations_fts_delete AFTER DELETE ON observations
BEGIN
    INSERT INTO observations_fts (observations_fts, rowid, title, narrative, facts) VALUES ('delete', old.id, old.title, old.narrative, old.facts);
END;
CREATE TRIGGER observations_fts_update AFTER UPDATE OF title, narrative, facts ON observations
BEGIN
    INSERT INTO observations_fts (observations_fts, rowid, title, narrative, facts) VALUES ('delete', old.id, old.title, old.narrative, old.facts);
    INSERT INTO observations_fts (rowid, title, narrative, facts) VALUES (new.id, new.title, new.narrative, new.facts);
END;

-- What a session did: one per session, written when it completed, was
-- cleared or compacted.
CREATE TABLE session_summaries (
    id           INTEGER PRIMARY KEY,
    session_id   INTEGER NOT NULL UNIQUE REFERENCES memory_sessions (id) ON DELETE CASCADE,
    group_folder TEXT NOT NULL,
    title        TEXT NOT NULL,
    request      TEXT NOT NULL,
    investigated TEXT NOT NULL,
    learned      TEXT NOT NULL,
    completed    TEXT NOT NULL,
    next_steps   TEXT NOT NULL,
    created_at   TEXT NOT NULL
) STRICT;
CREATE INDEX session_summaries_group ON session_summaries (group_folder, created_at);

CREATE VIRTUAL TABLE summaries_fts USING fts5 (
    title,
    body,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER session_summaries_fts_insert AFTER INSERT ON session_summaries
BEGIN
    INSERT INTO summaries_fts (rowid, title, body) VALUES (new.id, new.title,
        new.request || char(10) || new.investigated || char(10) || new.learned || char(10) || new.completed || char(10) || new.next_steps);
END;
CREATE TRIGGER session_summaries_fts_delete AFTER DELETE ON session_summaries
BEGIN
    DELETE FROM summaries_fts WHERE rowid = old.id;
END;

-- The processor's jobs: a batch to extract (memory_queue, filled by the
-- recovery jobs) and a session to summarise. `processing` left behind by a
-- killed host goes back to `pending` at start; a failure is retried with
-- backoff (`next_attempt_at`), then kept as `failed` with its reason.
ALTER TABLE memory_queue ADD COLUMN state TEXT NOT NULL DEFAULT 'pending'
    CHECK (state IN ('pending', 'processing', 'done', 'failed'));
ALTER TABLE memory_queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_queue ADD COLUMN next_attempt_at TEXT;
ALTER TABLE memory_queue ADD COLUMN error TEXT;
CREATE INDEX memory_queue_pending ON memory_queue (state, next_attempt_at);

CREATE TABLE summary_queue (
    session_id      INTEGER PRIMARY KEY REFERENCES memory_sessions (id) ON DELETE CASCADE,
    queued_at       TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'processing', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    error           TEXT
) STRICT;
