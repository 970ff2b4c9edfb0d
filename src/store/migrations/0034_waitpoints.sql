-- Waitpoints (docs/decisions.md#waitpoints). A waitpoint belongs to the key
-- that created it; token_hash is SHA-256 of its token's secret part (the
-- token itself is never stored). completed_at/data: its completion; it is
-- timed out when expires_at passes first.
CREATE TABLE waitpoints (
  id              uuid PRIMARY KEY,
  owner_key_id    text NOT NULL,
  token_hash      bytea NOT NULL,
  description     text,
  idempotency_key text,
  data            jsonb,
  completed_at    timestamptz,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX waitpoints_idempotency ON waitpoints (owner_key_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX waitpoints_owner ON waitpoints (owner_key_id, created_at DESC, id DESC);
CREATE INDEX waitpoints_purge ON waitpoints ((coalesce(completed_at, expires_at)));

-- A message released to wait for a waitpoint: waitpoint_id names it, and
-- available_at is the waitpoint's expires_at (its timeout makes the message
-- open work again with no further write) until a completion sets it to the
-- completion's time and waitpoint_outcome to {"data": ...}.
ALTER TABLE messages
  ADD COLUMN waitpoint_id uuid,
  ADD COLUMN waitpoint_outcome jsonb;
CREATE INDEX messages_waitpoint ON messages (waitpoint_id) WHERE waitpoint_id IS NOT NULL;
-- History keeps them: an archived copy shows the waitpoint its task waited for.
ALTER TABLE message_history
  ADD COLUMN waitpoint_id uuid,
  ADD COLUMN waitpoint_outcome jsonb;
