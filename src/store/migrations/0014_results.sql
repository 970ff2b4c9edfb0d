-- Results (issue 14, docs/decisions.md#results): the outcome of a message's
-- work, sent with the first acknowledgement that carries one. History keeps
-- it, so a producer still gets its result after the message was archived.
-- Per-acknowledgement metadata lives in the acknowledged_by entries
-- (jsonb), which history already copies.
ALTER TABLE messages ADD COLUMN result text;
ALTER TABLE message_history ADD COLUMN result text;
