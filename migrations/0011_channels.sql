-- Chat platforms (channels other than the HTTP API's log).
--
-- A platform's own id of an inbound message: a message fetched twice (a
-- host killed between fetching and confirming) is stored once, and replies
-- quote it.
ALTER TABLE messages ADD COLUMN external_id TEXT;
-- The platform's thread (a Telegram forum topic) an inbound message came
-- from, when its group takes the whole chat: the reply goes back there.
ALTER TABLE messages ADD COLUMN thread TEXT;
-- The channel saw the message address the assistant (a mention of the
-- bot, a reply to it, a private chat): it wakes the agent like a trigger.
ALTER TABLE messages ADD COLUMN addressed INTEGER NOT NULL DEFAULT 0 CHECK (addressed IN (0, 1));
-- An assistant message's answer to: the `seq` of the message that woke it.
ALTER TABLE messages ADD COLUMN reply_to INTEGER;
CREATE UNIQUE INDEX messages_external ON messages (chat_jid, external_id) WHERE external_id IS NOT NULL;

-- Each part of an outbound message a platform was asked to send. A part is
-- marked `sending` before the request and `sent` (with the platform's id)
-- after it; a part found `sending` at start was maybe sent by a host that
-- died before it knew, and is marked `uncertain`, never sent again.
CREATE TABLE deliveries (
    message_id  TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    part        INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('sending', 'sent', 'uncertain', 'failed')),
    external_id TEXT,
    detail      TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (message_id, part)
) STRICT, WITHOUT ROWID;

-- What the channels have not confirmed yet: read by each chat's sender,
-- and at every start.
CREATE INDEX messages_undelivered ON messages (chat_jid, seq) WHERE is_bot = 1 AND delivered_at IS NULL;
