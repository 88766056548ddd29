-- Several hosts on one store (docs/cluster.md). `cluster_hosts`: every host
-- that heartbeats, with the database's clock in milliseconds. `leases`: who
-- owns a group (named by its folder) or a channel's connection
-- (`channel:telegram`, …) until when; the generation grows with every new
-- holder and fences the old one's writes. A released lease keeps its row
-- (expired), so generations never restart.
CREATE TABLE cluster_hosts (
    host_id    TEXT PRIMARY KEY,
    api        TEXT NOT NULL DEFAULT '',
    started_ms INTEGER NOT NULL,
    seen_ms    INTEGER NOT NULL,
    stopping   INTEGER NOT NULL DEFAULT 0 CHECK (stopping IN (0, 1))
);

CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    host_id     TEXT NOT NULL,
    generation  INTEGER NOT NULL CHECK (generation > 0),
    acquired_ms INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL
);
CREATE INDEX leases_by_host ON leases (host_id, expires_ms);
