-- Actors, channels, messages, history and idempotency records (issue 3).

-- Named identities a key posts, claims and acks as. Every key has one
-- default actor named after its agent label.
CREATE TABLE actors (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name              text NOT NULL,
  description       text NOT NULL DEFAULT '',
  owner_id          text NOT NULL,
  created_by_key_id text NOT NULL REFERENCES api_keys (key_id),
  metadata          jsonb NOT NULL DEFAULT '{}',
  is_default        boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX actors_one_default_per_key ON actors (created_by_key_id) WHERE is_default;
CREATE INDEX actors_by_key_and_name ON actors (created_by_key_id, name);

INSERT INTO actors (name, owner_id, created_by_key_id, is_default)
SELECT agent_label, owner_id, key_id, true FROM api_keys;

CREATE TABLE actor_aliases (
  alias    text PRIMARY KEY,
  actor_id uuid NOT NULL REFERENCES actors (id) ON DELETE CASCADE
);
CREATE INDEX actor_aliases_by_actor ON actor_aliases (actor_id);

CREATE TABLE channels (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name                  text NOT NULL,
  mode                  text NOT NULL CHECK (mode IN ('broadcast', 'claimable')),
  access                text NOT NULL CHECK (access IN ('open', 'restricted')),
  discoverable          boolean NOT NULL,
  description           text NOT NULL DEFAULT '',
  owner_id              text NOT NULL,
  created_by_key_id     text NOT NULL REFERENCES api_keys (key_id),
  metadata_schema       jsonb NOT NULL DEFAULT '{}',
  pinned_message        text,
  webhook_url           text,
  webhook_secret        text,
  ttl_seconds           integer NOT NULL,
  retention_days        integer NOT NULL,
  max_messages          integer,
  max_writes_per_minute integer,
  paused                boolean NOT NULL DEFAULT false,
  -- created_at of the newest message: the next one is stamped strictly after
  -- it, under the row lock, so created_at follows commit order (decision M1).
  last_message_at       timestamptz,
  -- rows in messages for this channel, kept exact under the same lock, so the
  -- ring buffer knows how many to drop without counting.
  stored_messages       integer NOT NULL DEFAULT 0,
  -- unique, so the discovery cursor (a created_at) never splits a tie
  created_at            timestamptz NOT NULL UNIQUE,
  updated_at            timestamptz NOT NULL
);
CREATE INDEX channels_discovery ON channels (created_at DESC) WHERE discoverable;
CREATE INDEX channels_by_owner_key ON channels (created_by_key_id);

-- One namespace for every channel alias.
CREATE TABLE channel_aliases (
  alias      text PRIMARY KEY,
  channel_id uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE
);
CREATE INDEX channel_aliases_by_channel ON channel_aliases (channel_id);

CREATE TABLE channel_links (
  channel_id         uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  related_channel_id uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  PRIMARY KEY (channel_id, related_channel_id)
);
CREATE INDEX channel_links_by_related ON channel_links (related_channel_id);

CREATE TABLE channel_members (
  id                        uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  channel_id                uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  key_id                    text NOT NULL,
  granted_at                timestamptz NOT NULL DEFAULT clock_timestamp(),
  granted_via_invitation_id text,
  PRIMARY KEY (channel_id, key_id)
);
CREATE INDEX channel_members_by_key ON channel_members (key_id);

CREATE TABLE messages (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id            uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  author_key_id         text NOT NULL,
  actor_id              uuid,
  actor_name            text,
  actor_label           text,
  content               text NOT NULL,
  metadata              jsonb NOT NULL DEFAULT '{}',
  -- [{id, name}] of the eligible mentioned actors
  mentions              jsonb NOT NULL DEFAULT '[]',
  created_at            timestamptz NOT NULL,
  expires_at            timestamptz NOT NULL,
  claimed_by_key_id     text,
  claimed_by_actor_id   uuid,
  claimed_by_actor_name text,
  claimed_at            timestamptz,
  claim_metadata        jsonb,
  lease_token           text,
  lease_expires_at      timestamptz,
  -- [{id, name, occurred_at}] in ack order
  acknowledged_by       jsonb NOT NULL DEFAULT '[]'
);
-- The cursor order of a channel; unique because M1 makes created_at strictly increasing.
CREATE UNIQUE INDEX messages_channel_order ON messages (channel_id, created_at);
-- Open work: what status=unclaimed lists and claims look for.
CREATE INDEX messages_unclaimed ON messages (channel_id, created_at) WHERE claimed_by_key_id IS NULL;
-- Leased messages, to find expired leases that make a message claimable again.
CREATE INDEX messages_leases ON messages (channel_id, lease_expires_at) WHERE lease_token IS NOT NULL;
CREATE UNIQUE INDEX messages_lease_token ON messages (lease_token) WHERE lease_token IS NOT NULL;
CREATE INDEX messages_expiry ON messages (expires_at);

-- Expired and retracted messages, readable for the channel's retention_days.
CREATE TABLE message_history (
  LIKE messages INCLUDING DEFAULTS,
  archived_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  reason      text NOT NULL CHECK (reason IN ('expired', 'retracted')),
  PRIMARY KEY (id),
  FOREIGN KEY (channel_id) REFERENCES channels (id) ON DELETE CASCADE
);
CREATE INDEX message_history_by_channel ON message_history (channel_id, created_at DESC);
CREATE INDEX message_history_archived ON message_history (archived_at);

-- Responses of state-changing requests, replayed for retries with the same
-- Idempotency-Key (decision M8). The row is written in the same transaction
-- as the change itself, so a retry can never apply a change twice.
CREATE TABLE idempotency_records (
  key_id          text NOT NULL,
  idempotency_key text NOT NULL,
  request_hash    bytea NOT NULL,
  response        bytea,
  status          integer,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (key_id, idempotency_key)
);
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at);

-- The message write path of DESIGN.md in one round trip: lock the channel,
-- refuse when paused or over its write throttle, stamp created_at after the
-- previous message, insert, trim the ring buffer, update the counters.
CREATE FUNCTION agentbus_create_message(
  p_channel_id    uuid,
  p_author_key_id text,
  p_actor_id      uuid,
  p_actor_name    text,
  p_actor_label   text,
  p_content       text,
  p_metadata      jsonb,
  p_mentions      jsonb
) RETURNS TABLE (outcome text, retry_after integer, message_id uuid, created_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  ch         channels%ROWTYPE;
  stamp      timestamptz;
  in_window  integer;
  oldest     timestamptz;
  new_id     uuid;
  excess     integer;
BEGIN
  -- NO KEY UPDATE: serialises writers of this channel without blocking
  -- inserts elsewhere that merely reference the channel row.
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'channel_not_found'::text, NULL::integer, NULL::uuid, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  IF ch.paused THEN
    RETURN QUERY SELECT 'channel_paused'::text, 30, NULL::uuid, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  stamp := greatest(clock_timestamp(), ch.last_message_at + interval '1 microsecond');
  IF ch.max_writes_per_minute IS NOT NULL THEN
    SELECT count(*), min(w.created_at) INTO in_window, oldest FROM (
      SELECT m.created_at FROM messages m
      WHERE m.channel_id = p_channel_id AND m.created_at > stamp - interval '60 seconds'
      ORDER BY m.created_at LIMIT ch.max_writes_per_minute
    ) w;
    IF in_window >= ch.max_writes_per_minute THEN
      RETURN QUERY SELECT 'channel_write_rate_exceeded'::text,
        greatest(1, ceil(60 - extract(epoch FROM stamp - oldest))::integer),
        NULL::uuid, NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
  END IF;
  INSERT INTO messages (channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions, created_at, expires_at)
  VALUES (p_channel_id, p_author_key_id, p_actor_id, p_actor_name, p_actor_label, p_content, p_metadata, p_mentions,
          stamp, stamp + make_interval(secs => ch.ttl_seconds))
  RETURNING id INTO new_id;
  excess := CASE WHEN ch.max_messages IS NULL THEN 0 ELSE ch.stored_messages + 1 - ch.max_messages END;
  IF excess > 0 THEN
    -- Ring buffer: the oldest go first; dropped rows are deleted, not archived.
    DELETE FROM messages m WHERE m.id IN (
      SELECT o.id FROM messages o WHERE o.channel_id = p_channel_id ORDER BY o.created_at LIMIT excess
    );
  ELSE
    excess := 0;
  END IF;
  UPDATE channels c SET last_message_at = stamp, stored_messages = ch.stored_messages + 1 - excess WHERE c.id = p_channel_id;
  RETURN QUERY SELECT 'created'::text, NULL::integer, new_id, stamp, stamp + make_interval(secs => ch.ttl_seconds);
END;
$$;
