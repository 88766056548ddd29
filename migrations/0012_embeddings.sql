-- Recall by meaning (docs/recall.md): a vector for each row recall reads,
-- written in the background by the embedding jobs and deleted with its row.
-- Every vector carries its row's group: recall filters by group before any
-- similarity is computed.
CREATE TABLE embeddings (
    kind         TEXT NOT NULL CHECK (kind IN ('passage', 'observation', 'summary', 'prompt')),
    item_id      INTEGER NOT NULL,
    group_folder TEXT NOT NULL,
    -- The model's name: vectors of another model are never compared.
    model        TEXT NOT NULL,
    -- Little-endian f32s, unit length.
    vector       BLOB NOT NULL,
    PRIMARY KEY (kind, item_id)
) STRICT;
-- The newest rowid of a group's vectors of one kind and model is one seek.
CREATE INDEX embeddings_group ON embeddings (group_folder, kind, model);

-- How many vectors of each group and kind were ever deleted: with the
-- newest rowid, what tells recall's in-memory copy (memory::vectors) that
-- it is stale, in two index seeks.
CREATE TABLE embedding_deletes (
    group_folder TEXT NOT NULL,
    kind         TEXT NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (group_folder, kind)
) STRICT, WITHOUT ROWID;
CREATE TRIGGER embeddings_deleted AFTER DELETE ON embeddings
BEGIN
    INSERT INTO embedding_deletes (group_folder, kind, n) VALUES (old.group_folder, old.kind, 1)
        ON CONFLICT (group_folder, kind) DO UPDATE SET n = n + 1;
END;

-- The jobs: rows written but not embedded yet. Triggers fill it in the
-- transaction that writes the row, so a host killed mid-way finds its work
-- where it left it; a job is deleted in the transaction that stores its
-- vector, so each row is embedded once.
CREATE TABLE embedding_jobs (
    kind    TEXT NOT NULL,
    item_id INTEGER NOT NULL,
    PRIMARY KEY (kind, item_id)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER archive_passages_embed AFTER INSERT ON archive_passages
BEGIN
    INSERT OR IGNORE INTO embedding_jobs (kind, item_id) VALUES ('passage', new.id);
END;
CREATE TRIGGER archive_passages_unembed AFTER DELETE ON archive_passages
BEGIN
    DELETE FROM embeddings WHERE kind = 'passage' AND item_id = old.id;
    DELETE FROM embedding_jobs WHERE kind = 'passage' AND item_id = old.id;
END;

CREATE TRIGGER observations_embed AFTER INSERT ON observations
BEGIN
    INSERT OR IGNORE INTO embedding_jobs (kind, item_id) VALUES ('observation', new.id);
END;
-- Forgetting empties an observation: its vector goes with its text. A
-- status change alone (superseded) keeps the vector.
CREATE TRIGGER observations_reembed AFTER UPDATE OF title, narrative, facts, status ON observations
    WHEN new.title IS NOT old.title OR new.narrative IS NOT old.narrative
      OR new.facts IS NOT old.facts OR new.status = 'forgotten'
BEGIN
    DELETE FROM embeddings WHERE kind = 'observation' AND item_id = old.id;
    INSERT OR IGNORE INTO embedding_jobs (kind, item_id)
        SELECT 'observation', new.id WHERE new.status <> 'forgotten';
    DELETE FROM embedding_jobs WHERE kind = 'observation' AND item_id = old.id AND new.status = 'forgotten';
END;
CREATE TRIGGER observations_unembed AFTER DELETE ON observations
BEGIN
    DELETE FROM embeddings WHERE kind = 'observation' AND item_id = old.id;
    DELETE FROM embedding_jobs WHERE kind = 'observation' AND item_id = old.id;
END;

CREATE TRIGGER session_summaries_embed AFTER INSERT ON session_summaries
BEGIN
    INSERT OR IGNORE INTO embedding_jobs (kind, item_id) VALUES ('summary', new.id);
END;
CREATE TRIGGER session_summaries_unembed AFTER DELETE ON session_summaries
BEGIN
    DELETE FROM embeddings WHERE kind = 'summary' AND item_id = old.id;
    DELETE FROM embedding_jobs WHERE kind = 'summary' AND item_id = old.id;
END;

-- A prompt is embedded with its reply, once it has one.
CREATE TRIGGER prompt_batches_embed AFTER UPDATE OF reply ON prompt_batches
    WHEN new.reply IS NOT NULL
BEGIN
    DELETE FROM embeddings WHERE kind = 'prompt' AND item_id = old.id;
    INSERT OR IGNORE INTO embedding_jobs (kind, item_id) VALUES ('prompt', new.id);
END;
CREATE TRIGGER prompt_batches_unembed AFTER DELETE ON prompt_batches
BEGIN
    DELETE FROM embeddings WHERE kind = 'prompt' AND item_id = old.id;
    DELETE FROM embedding_jobs WHERE kind = 'prompt' AND item_id = old.id;
END;

-- What was written before this migration is embedded too.
INSERT INTO embedding_jobs (kind, item_id) SELECT 'passage', id FROM archive_passages;
INSERT INTO embedding_jobs (kind, item_id) SELECT 'observation', id FROM observations WHERE status <> 'forgotten';
INSERT INTO embedding_jobs (kind, item_id) SELECT 'summary', id FROM session_summaries;
INSERT INTO embedding_jobs (kind, item_id) SELECT 'prompt', id FROM prompt_batches WHERE reply IS NOT NULL;
