-- Context the routing rules passed over: a message that was never shown to
-- the group's agent because the context before a message that called it
-- was over a prompt's budget (docs/channels.md, "Backlogs"). The viewer
-- shows it as such.
ALTER TABLE messages ADD COLUMN passed_over INTEGER NOT NULL DEFAULT 0 CHECK (passed_over IN (0, 1));
