-- Tokens that let a user's own MCP clients read one group's memory
-- (`/mcp`, docs/mcp.md). Only the token's SHA-256 is kept (`hash`, hex);
-- `prefix` is its first characters, to tell tokens apart in a list. The
-- group is the token's: a client's arguments never choose it.
CREATE TABLE mcp_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    hash         TEXT    NOT NULL UNIQUE,
    prefix       TEXT    NOT NULL,
    scope        TEXT    NOT NULL CHECK (scope IN ('read', 'write')),
    created_at   TEXT    NOT NULL,
    expires_at   TEXT,
    revoked_at   TEXT,
    last_used_at TEXT
) STRICT;
CREATE INDEX mcp_tokens_group ON mcp_tokens (group_folder, id);

-- Every tool call made with a token: the group's usage of its memory from
-- outside (`g2 usage`), by the token's name.
CREATE TABLE mcp_calls (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder TEXT    NOT NULL,
    token_id     INTEGER NOT NULL,
    token_name   TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    outcome      TEXT    NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
    duration_ms  INTEGER NOT NULL,
    at           TEXT    NOT NULL
) STRICT;
CREATE INDEX mcp_calls_group ON mcp_calls (group_folder, at);
