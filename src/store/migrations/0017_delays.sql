-- Delays (issue 14, docs/decisions.md#delays): a message posted or released
-- with delay_seconds is open work only from available_at on. NULL means
-- "since created_at" (every message written before delays, and every message
-- posted without one), so the column needs no backfill of existing rows.
ALTER TABLE messages ADD COLUMN available_at timestamptz;
ALTER TABLE message_history ADD COLUMN available_at timestamptz;
-- The next moment a channel's delayed open work falls due: waiting receives
-- and long-polls set their timers by it.
CREATE INDEX messages_delayed ON messages (channel_id, available_at) WHERE available_at IS NOT NULL AND claimed_by_key_id IS NULL;
