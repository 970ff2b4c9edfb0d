-- Fairness between keys (issue 11, M3 and M5).
--
-- Async jobs: when a worker slot frees, the next job is the one of the key
-- with the fewest jobs of that kind running, then of the key served least
-- recently (store/jobs.ts, FAIR_NEXT_JOB_SQL). dispatched_at records when
-- a job was last handed to a worker, in the same statement that locks its
-- Agenda job, so every worker process sees the same turn order.
ALTER TABLE jobs ADD COLUMN dispatched_at timestamptz;
-- "When was this key last served" (max per key and kind), read per candidate.
CREATE INDEX jobs_owner_dispatch ON jobs (kind, owner_key_id, dispatched_at);
-- The per-key cap on unfinished jobs, counted at submission.
CREATE INDEX jobs_owner_unfinished ON jobs (owner_key_id) WHERE status IN ('queued', 'processing');

-- Webhook destinations (URL origin, e.g. https://hooks.example:443): the
-- circuit breaker shared by every dispatcher. After
-- AGENTBUS_WEBHOOK_BREAKER_THRESHOLD consecutive attempts without an answer
-- (timeouts, refused or reset connections) a destination is not attempted
-- until open_until; its due deliveries are logged as deferred and wait. The
-- interval doubles with each trip (trips), up to a cap; any answer resets it.
CREATE TABLE webhook_destinations (
  destination          text PRIMARY KEY,
  consecutive_failures integer NOT NULL DEFAULT 0,
  trips                integer NOT NULL DEFAULT 0,
  open_until           timestamptz,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX webhook_destinations_age ON webhook_destinations (updated_at);

-- A deferred entry: the breaker held the delivery back; no request was made
-- and the attempt was not counted.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('delivered', 'failed', 'deferred'));

-- The destination of a webhook URL: its lower-cased host[:port], without
-- user info. NULL for no URL. The dispatcher's claim and the breaker both key
-- on it, so "one receiver" means the same thing to both.
CREATE FUNCTION agentbus_webhook_destination(url text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT lower(substring(url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)'))
$$;
