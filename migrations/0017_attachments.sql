-- A message's files (voice notes, photos, documents): a JSON array of
-- g2_core::media::Attachment, the files themselves in the group's folder
-- (docs/media.md). NULL for a message without any.
ALTER TABLE messages ADD COLUMN attachments TEXT;
