-- The W3C trace context of each message (docs/decisions.md#trace-context):
-- the poster's traceparent and tracestate, or a new trace's. NULL only for
-- messages stored before this migration. History keeps them with the rest.
ALTER TABLE messages ADD COLUMN trace_parent text, ADD COLUMN trace_state text;
ALTER TABLE message_history ADD COLUMN trace_parent text, ADD COLUMN trace_state text;
ALTER TABLE jobs ADD COLUMN trace_parent text, ADD COLUMN trace_state text;
