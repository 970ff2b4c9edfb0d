-- Progress a lease holder reports on its message (docs/decisions.md#progress):
-- the last structured data, the text (replaced, or appended to and kept to its
-- last 64 KiB), and when it was last reported. History copies the columns.
ALTER TABLE messages
  ADD COLUMN progress_data jsonb,
  ADD COLUMN progress_text text,
  ADD COLUMN progress_updated_at timestamptz;
ALTER TABLE message_history
  ADD COLUMN progress_data jsonb,
  ADD COLUMN progress_text text,
  ADD COLUMN progress_updated_at timestamptz;
