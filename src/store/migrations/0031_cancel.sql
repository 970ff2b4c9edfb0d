-- Cancellation (docs/decisions.md#cancel). cancel_requested_at: when the
-- author or the channel owner cancelled the message; cancel_reason: theirs.
-- A cancelled message is expired at once, or, in flight, when its lease
-- ends: every delivery statement already passes over expired rows.
-- cancel_expires_at keeps the expiry the cancel shortened, which an
-- acknowledgement by the holder restores. History copies the columns.
ALTER TABLE messages
  ADD COLUMN cancel_requested_at timestamptz,
  ADD COLUMN cancel_reason text,
  ADD COLUMN cancel_expires_at timestamptz;
ALTER TABLE message_history
  ADD COLUMN cancel_requested_at timestamptz,
  ADD COLUMN cancel_reason text,
  ADD COLUMN cancel_expires_at timestamptz;
ALTER TABLE message_history DROP CONSTRAINT message_history_reason_check;
-- NOT VALID, then validated: the check of the existing rows does not lock writers out.
ALTER TABLE message_history ADD CONSTRAINT message_history_reason_check
  CHECK (reason IN ('expired', 'retracted', 'dead_lettered', 'redriven', 'cancelled')) NOT VALID;
ALTER TABLE message_history VALIDATE CONSTRAINT message_history_reason_check;
