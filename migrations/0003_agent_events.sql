-- Hook events the agents' Claude Code reported (SessionStart, UserPromptSubmit,
-- PostToolUse, PreCompact, Stop, SessionEnd), for the memory layer.
CREATE TABLE hook_events (
    id           INTEGER PRIMARY KEY,
    group_folder TEXT NOT NULL,
    session_id   TEXT,
    event        TEXT NOT NULL,
    -- The event's small payload (source, prompt, tool name, …) as JSON.
    data         TEXT NOT NULL,
    at           TEXT NOT NULL
) STRICT;

CREATE INDEX hook_events_group_at ON hook_events (group_folder, at);
