-- Which host claimed a memory job while it is `processing` (its
-- `cluster.host_id`): a starting host releases only its own earlier
-- claims, the others release those of a host whose process is gone, and a
-- job's outcome is stored only while its claim stands (docs/cluster.md).
-- NULL: claimed before claims were named; any host releases those.
ALTER TABLE memory_queue ADD COLUMN claimed_by TEXT;
ALTER TABLE summary_queue ADD COLUMN claimed_by TEXT;
