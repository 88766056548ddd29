-- g2 foundation schema. Applied in order by the host at start
-- (rusqlite_migration, tracked in PRAGMA user_version). Never edit a
-- migration that has shipped: add a new file.

-- Chat groups the host serves. `folder` names groups/{folder}/ and is the
-- group's identity everywhere else (sessions, archives, IPC).
CREATE TABLE registered_groups (
    jid              TEXT NOT NULL UNIQUE,
    name             TEXT NOT NULL,
    folder           TEXT NOT NULL PRIMARY KEY,
    trigger_pattern  TEXT,
    requires_trigger INTEGER NOT NULL DEFAULT 1 CHECK (requires_trigger IN (0, 1)),
    is_main          INTEGER NOT NULL DEFAULT 0 CHECK (is_main IN (0, 1)),
    container_config TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(container_config)),
    added_at         TEXT NOT NULL
) STRICT;
-- At most one main group.
CREATE UNIQUE INDEX registered_groups_one_main ON registered_groups (is_main) WHERE is_main = 1;

-- Chats seen on any channel (a group's chat and others).
CREATE TABLE chats (
    jid               TEXT PRIMARY KEY,
    name              TEXT,
    channel           TEXT NOT NULL DEFAULT 'http',
    last_message_time TEXT
) STRICT;

-- Every message in and out, in arrival order (`seq`). The router's cursor
-- is a `seq`.
CREATE TABLE messages (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    chat_jid     TEXT NOT NULL REFERENCES chats (jid) ON DELETE CASCADE,
    sender       TEXT NOT NULL,
    sender_name  TEXT,
    content      TEXT NOT NULL,
    timestamp    TEXT NOT NULL,
    is_from_me   INTEGER NOT NULL DEFAULT 0 CHECK (is_from_me IN (0, 1)),
    is_bot       INTEGER NOT NULL DEFAULT 0 CHECK (is_bot IN (0, 1)),
    delivered_at TEXT
) STRICT;
CREATE INDEX messages_chat_seq ON messages (chat_jid, seq);

-- The active session pointer of each group. The row outlives the pointer
-- (session_id NULL = no active session) so that `generation` only ever
-- grows: a writer holding an older generation is refused.
CREATE TABLE sessions (
    group_folder TEXT PRIMARY KEY,
    session_id   TEXT,
    generation   INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT,
    updated_at   TEXT NOT NULL
) STRICT;

-- Bookmarks of earlier sessions, by name.
CREATE TABLE session_history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    name         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    archived_at  TEXT NOT NULL
) STRICT;
CREATE INDEX session_history_group ON session_history (group_folder, id);

-- Markdown archives written to groups/{folder}/conversations/.
-- `path` is relative to the home directory.
CREATE TABLE conversation_archives (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder TEXT NOT NULL,
    session_id   TEXT,
    name         TEXT NOT NULL,
    path         TEXT NOT NULL UNIQUE,
    trigger      TEXT NOT NULL CHECK (trigger IN ('clear', 'precompact', 'manual')),
    created_at   TEXT NOT NULL
) STRICT;
CREATE INDEX conversation_archives_group ON conversation_archives (group_folder, created_at);

-- Full-text index over archive text; rowid = conversation_archives.id.
-- Porter stemming so "researching" finds "research".
CREATE VIRTUAL TABLE archives_fts USING fts5 (
    name,
    body,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER conversation_archives_fts_delete AFTER DELETE ON conversation_archives
BEGIN
    DELETE FROM archives_fts WHERE rowid = old.id;
END;

CREATE TABLE scheduled_tasks (
    id             TEXT PRIMARY KEY,
    group_folder   TEXT NOT NULL,
    chat_jid       TEXT NOT NULL,
    prompt         TEXT NOT NULL,
    schedule_type  TEXT NOT NULL CHECK (schedule_type IN ('cron', 'interval', 'once')),
    schedule_value TEXT NOT NULL,
    timezone       TEXT NOT NULL DEFAULT 'UTC',
    context_mode   TEXT NOT NULL DEFAULT 'isolated' CHECK (context_mode IN ('group', 'isolated')),
    next_run       TEXT,
    last_run       TEXT,
    last_result    TEXT,
    status         TEXT NOT NULL DEFAULT 'active'
                   CHECK (status IN ('active', 'paused', 'completed', 'cancelled')),
    claimed_by     TEXT,
    claimed_at     TEXT,
    created_at     TEXT NOT NULL
) STRICT;
CREATE INDEX scheduled_tasks_due ON scheduled_tasks (status, next_run);

CREATE TABLE task_run_logs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL REFERENCES scheduled_tasks (id) ON DELETE CASCADE,
    run_at      TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('success', 'error')),
    result      TEXT,
    error       TEXT
) STRICT;
CREATE INDEX task_run_logs_task ON task_run_logs (task_id, run_at);

-- Small durable key/value state of the router (per-group cursors, …).
CREATE TABLE router_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
