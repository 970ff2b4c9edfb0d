-- Dependencies between messages (docs/decisions.md#dependencies). A message
-- lists its parents (depends_on) and is blocked while blocked_by, the number
-- of its parents not yet acknowledged, is above 0: its available_at is then
-- far ahead, which every delivery path already honours, and the last
-- parent's acknowledgement makes it available (trigger
-- messages_unblock_dependents). message_dependencies holds the edges still
-- waiting, by parent, for that and for cancelling a failed parent's
-- descendants; dependents_count counts a parent's dependents.
CREATE TABLE message_dependencies (
  message_id uuid NOT NULL,
  parent_id  uuid NOT NULL,
  PRIMARY KEY (message_id, parent_id)
);
CREATE INDEX message_dependencies_parent ON message_dependencies (parent_id);
ALTER TABLE messages
  ADD COLUMN depends_on uuid[],
  ADD COLUMN blocked_by integer NOT NULL DEFAULT 0,
  ADD COLUMN dependents_count integer NOT NULL DEFAULT 0;
ALTER TABLE message_history
  ADD COLUMN depends_on uuid[],
  ADD COLUMN blocked_by integer NOT NULL DEFAULT 0,
  ADD COLUMN dependents_count integer NOT NULL DEFAULT 0;
