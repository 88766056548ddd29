-- Every request an agent made through its IPC folder, with what the host
-- decided. `group_folder` is the folder the request was found in (the
-- caller's identity), never a name from the request.
CREATE TABLE ipc_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder TEXT NOT NULL,
    request_id   TEXT,
    action       TEXT NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
    detail       TEXT,
    at           TEXT NOT NULL
) STRICT;
CREATE INDEX ipc_log_group ON ipc_log (group_folder, id);
