-- Receive (issue 14): leasing a batch of a channel's open work, and counting
-- deliveries (docs/decisions.md#receive).
--
-- delivery_count: times a message was claimed or received. History keeps it,
-- so an archived message still tells how often it was handed out.
ALTER TABLE messages ADD COLUMN delivery_count integer NOT NULL DEFAULT 0;
ALTER TABLE message_history ADD COLUMN delivery_count integer NOT NULL DEFAULT 0;
