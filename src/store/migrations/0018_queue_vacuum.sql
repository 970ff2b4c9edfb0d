-- Vacuum messages sooner (docs/decisions.md#planner-statistics). It is a
-- queue: every receive, claim and ack rewrites a row and leaves the old
-- version behind, and receive and claim scan messages_unclaimed from the
-- head of the queue, where those dead versions gather. PostgreSQL's default
-- waits for 20 % of the table to be dead (200,000 rows at a million
-- messages); 2 % plus 1,000 keeps the head short.
ALTER TABLE messages SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
