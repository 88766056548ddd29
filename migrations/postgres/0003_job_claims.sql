-- The same as migrations/0015_job_claims.sql: which host claimed a memory
-- job while it is `processing`, so that a starting host releases only its
-- own earlier claims and the others those of a host whose process is gone.
ALTER TABLE memory_queue ADD COLUMN claimed_by text;
ALTER TABLE summary_queue ADD COLUMN claimed_by text;
