-- Recall's candidates are a group's newest passages that match a question
-- (store/src/recall.rs). PostgreSQL found them by joining every match to
-- archive_passages for its group, and planned that join as a walk of the
-- whole table newest first: passages_fts now carries the group itself, so
-- the match is filtered without a join.
ALTER TABLE passages_fts ADD COLUMN group_folder text;
UPDATE passages_fts f SET group_folder = p.group_folder
    FROM archive_passages p WHERE p.id = f.rowid;
ALTER TABLE passages_fts ALTER COLUMN group_folder SET NOT NULL;
CREATE INDEX passages_fts_group ON passages_fts (group_folder, rowid);

CREATE OR REPLACE FUNCTION archive_passages_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF tg_op = 'INSERT' THEN
        INSERT INTO passages_fts (rowid, text, group_folder)
            VALUES (new.id, new.text, new.group_folder);
        PERFORM embed_job('passage', new.id);
        RETURN new;
    END IF;
    DELETE FROM passages_fts WHERE rowid = old.id;
    PERFORM unembed('passage', old.id);
    RETURN old;
END $$;
