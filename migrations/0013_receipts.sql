-- What a platform said became of a part after it was sent (WhatsApp's
-- status webhooks: delivered, read, failed), beside what the outbox knows.
ALTER TABLE deliveries ADD COLUMN receipt TEXT;
ALTER TABLE deliveries ADD COLUMN receipt_at TEXT;
-- Receipts name the part by the platform's id.
CREATE INDEX deliveries_external ON deliveries (external_id) WHERE external_id IS NOT NULL;
