-- The same as migrations/0017_attachments.sql: a message's files as a JSON
-- array, NULL for a message without any.
ALTER TABLE messages ADD COLUMN attachments text;
