-- One row per model request that passed through the gateway.
-- caller: the group folder the request's socket belongs to, or `@local` for
-- the loopback TCP listener (never a valid folder name, so never a group).
CREATE TABLE model_usage (
    id            INTEGER PRIMARY KEY,
    caller        TEXT    NOT NULL,
    provider      TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    duration_ms   INTEGER NOT NULL,
    -- HTTP status sent to the caller.
    status        INTEGER NOT NULL,
    -- ok | error | refused | cancelled
    outcome       TEXT    NOT NULL,
    streamed      INTEGER NOT NULL,
    started_at    TEXT    NOT NULL,
    -- UTC day (YYYY-MM-DD) the daily budget counts against.
    day           TEXT    NOT NULL
) STRICT;

CREATE INDEX model_usage_caller_day ON model_usage (caller, day);
