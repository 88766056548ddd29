-- The same as migrations/0016_passed_over.sql: a message the routing rules
-- passed over was never shown to the group's agent.
ALTER TABLE messages ADD COLUMN passed_over bigint NOT NULL DEFAULT 0 CHECK (passed_over IN (0, 1));
