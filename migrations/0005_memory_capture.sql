-- Memory capture: what happened in each group's agent sessions, stored
-- faithfully and safely (private spans stripped and secrets redacted before
-- a row is written). Every row carries its group.

-- One row per Claude Code session (the content session id). The same id
-- always maps to the same row; `memory_session_id` is reserved for the
-- extractor's own model session and never resumes the user's.
CREATE TABLE memory_sessions (
    id                 INTEGER PRIMARY KEY,
    group_folder       TEXT NOT NULL,
    content_session_id TEXT NOT NULL UNIQUE,
    status             TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed')),
    start_source       TEXT CHECK (start_source IN ('startup', 'resume', 'clear', 'compact')),
    started_at         TEXT NOT NULL,
    ended_at           TEXT,
    last_activity_at   TEXT NOT NULL,
    end_reason         TEXT,
    prompt_count       INTEGER NOT NULL DEFAULT 0,
    transcript_path    TEXT,
    title              TEXT,
    memory_session_id  TEXT
) STRICT;
CREATE INDEX memory_sessions_group ON memory_sessions (group_folder, started_at);
CREATE INDEX memory_sessions_open ON memory_sessions (status, last_activity_at);

-- One row per user prompt. `prompt` is empty when the prompt was entirely
-- private; `recovered` marks a batch made to hold activities that had none.
CREATE TABLE prompt_batches (
    id            INTEGER PRIMARY KEY,
    session_id    INTEGER NOT NULL REFERENCES memory_sessions (id) ON DELETE CASCADE,
    group_folder  TEXT NOT NULL,
    prompt_number INTEGER NOT NULL,
    prompt        TEXT NOT NULL,
    senders       TEXT,
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed', 'processed')),
    started_at    TEXT NOT NULL,
    ended_at      TEXT,
    last_activity_at TEXT NOT NULL,
    reply         TEXT,
    recovered     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, prompt_number)
) STRICT;
CREATE INDEX prompt_batches_open ON prompt_batches (status, last_activity_at);

-- One row per tool call; a replayed event never duplicates one
-- (`tool_use_id` is unique). `batch_id` is NULL until recovery attaches an
-- activity that arrived without a batch.
CREATE TABLE activities (
    id             INTEGER PRIMARY KEY,
    session_id     INTEGER NOT NULL REFERENCES memory_sessions (id) ON DELETE CASCADE,
    batch_id       INTEGER REFERENCES prompt_batches (id) ON DELETE CASCADE,
    group_folder   TEXT NOT NULL,
    tool           TEXT NOT NULL,
    tool_use_id    TEXT NOT NULL UNIQUE,
    input          TEXT NOT NULL,
    output         TEXT NOT NULL,
    files_read     TEXT NOT NULL DEFAULT '[]',
    files_modified TEXT NOT NULL DEFAULT '[]',
    ok             INTEGER NOT NULL,
    subagent       INTEGER NOT NULL DEFAULT 0,
    at             TEXT NOT NULL
) STRICT;
CREATE INDEX activities_batch ON activities (batch_id, at);
CREATE INDEX activities_session ON activities (session_id, at);

-- Event files already taken in, by name: a file replayed after a crash
-- (taken in, then the host died before removing it) changes nothing.
CREATE TABLE memory_events (
    group_folder TEXT NOT NULL,
    name         TEXT NOT NULL,
    at           TEXT NOT NULL,
    PRIMARY KEY (group_folder, name)
) STRICT, WITHOUT ROWID;

-- Completed batches waiting for the memory processor.
CREATE TABLE memory_queue (
    batch_id  INTEGER PRIMARY KEY REFERENCES prompt_batches (id) ON DELETE CASCADE,
    queued_at TEXT NOT NULL
) STRICT;

-- Full-text indexes, kept in the rows' own transactions by triggers.
CREATE VIRTUAL TABLE prompts_fts USING fts5 (
    prompt,
    reply,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER prompt_batches_fts_insert AFTER INSERT ON prompt_batches
BEGIN
    INSERT INTO prompts_fts (rowid, prompt, reply) VALUES (new.id, new.prompt, coalesce(new.reply, ''));
END;
CREATE TRIGGER prompt_batches_fts_update AFTER UPDATE OF prompt, reply ON prompt_batches
BEGIN
    DELETE FROM prompts_fts WHERE rowid = old.id;
    INSERT INTO prompts_fts (rowid, prompt, reply) VALUES (new.id, new.prompt, coalesce(new.reply, ''));
END;
CREATE TRIGGER prompt_batches_fts_delete AFTER DELETE ON prompt_batches
BEGIN
    DELETE FROM prompts_fts WHERE rowid = old.id;
END;

CREATE VIRTUAL TABLE activities_fts USING fts5 (
    tool,
    input,
    output,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER activities_fts_insert AFTER INSERT ON activities
BEGIN
    INSERT INTO activities_fts (rowid, tool, input, output) VALUES (new.id, new.tool, new.input, new.output);
END;
CREATE TRIGGER activities_fts_delete AFTER DELETE ON activities
BEGIN
    DELETE FROM activities_fts WHERE rowid = old.id;
END;
