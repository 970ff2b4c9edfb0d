-- A trace's messages (docs/decisions.md#trace-context): by the trace id
-- field of their traceparent (characters 4 to 35).
CREATE INDEX messages_trace ON messages (substr(trace_parent, 4, 32)) WHERE trace_parent IS NOT NULL;
