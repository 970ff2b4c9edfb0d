-- Webhooks (decisions W1–W3): actor webhooks for mention pushes, the
-- outbox of pending deliveries, the delivery log, and the message write path
-- extended to enqueue in the message's own transaction.

-- Where an actor's mention pushes go. The secret is never returned.
CREATE TABLE actor_webhooks (
  actor_id   uuid PRIMARY KEY REFERENCES actors (id) ON DELETE CASCADE,
  url        text NOT NULL,
  secret     text,
  updated_at timestamptz NOT NULL
);

-- Deliveries still to be made: written in the transaction of the event
-- (message, approval), so a committed event always has its row and a
-- rolled-back one never does; deleted when delivered or given up.
-- The id is the delivery id (X-Service-Delivery), stable across retries.
CREATE TABLE webhook_outbox (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id      uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  -- mention pushes: the mentioned actor, whose webhook receives it;
  -- NULL: the channel's webhook
  actor_id        uuid REFERENCES actors (id) ON DELETE CASCADE,
  event           text NOT NULL CHECK (event IN ('message.created', 'mention', 'member_added')),
  message_id      uuid,
  -- The exact bytes sent. member_added: written with the row; message
  -- events: rendered at the first attempt and kept, so every retry sends
  -- the same body.
  body            text,
  -- attempts claimed so far (a claim counts before the request is sent)
  attempts        integer NOT NULL DEFAULT 0,
  -- -infinity: due at once (the first attempt). While an attempt is in
  -- flight this is the end of the sender's lease: if the sender dies, the
  -- row becomes due again then.
  next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((event = 'mention') = (actor_id IS NOT NULL))
);
-- The dispatcher's claim: due rows in due order (first attempts first).
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at);

-- Committed outbox rows wake every dispatcher at once: PostgreSQL delivers a
-- NOTIFY at commit, and only on commit (collapsing repeats within one
-- transaction), so a rolled-back event never wakes anyone. Per row, not per
-- statement: an INSERT … SELECT that inserts nothing must not wake anyone.
CREATE FUNCTION agentbus_webhook_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentbus_webhooks', '');
  RETURN NULL;
END;
$$;
CREATE TRIGGER webhook_outbox_notify AFTER INSERT ON webhook_outbox
  FOR EACH ROW EXECUTE FUNCTION agentbus_webhook_outbox_notify();

-- Every attempt, kept 7 days. Channel rows (actor_id NULL) are the owner's
-- log (GET /v1/channels/{identifier}/webhook-deliveries); mention pushes
-- (actor_id set) belong to the actor's owner and are not listed there. A
-- mention push that the rate limit (W3) held back is recorded here with
-- attempt 0, status failed, error 'rate_limited'.
CREATE TABLE webhook_deliveries (
  -- also the cursor of the log: newest first is highest id first
  id              bigint GENERATED ALWAYS AS IDENTITY,
  delivery_id     uuid NOT NULL,
  channel_id      uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  actor_id        uuid,
  event           text NOT NULL,
  message_id      uuid,
  attempt         integer NOT NULL,
  status          text NOT NULL CHECK (status IN ('delivered', 'failed')),
  response_status integer,
  error           text,
  duration_ms     integer NOT NULL,
  attempted_at    timestamptz NOT NULL,
  next_attempt_at timestamptz,
  -- Keyed by channel first, with no index on id alone: "this channel's
  -- newest" can then only be read along a channel's own entries. (With an
  -- index on id, the planner may walk every channel's newest rows backwards
  -- looking for a quiet channel's few.)
  PRIMARY KEY (channel_id, id)
);
-- The owner's log: the channel webhook's rows without the mention pushes.
CREATE INDEX webhook_deliveries_channel_log ON webhook_deliveries (channel_id, id DESC) WHERE actor_id IS NULL;
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (attempted_at);

-- The last mention push per (channel, actor), for the one-per-minute limit.
-- Written under the channel's row lock (the write path holds it), so the
-- limit is exact across concurrent writers and replicas.
CREATE TABLE mention_push_windows (
  channel_id uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  actor_id   uuid NOT NULL REFERENCES actors (id) ON DELETE CASCADE,
  pushed_at  timestamptz NOT NULL,
  PRIMARY KEY (channel_id, actor_id)
);
CREATE INDEX mention_push_windows_age ON mention_push_windows (pushed_at);

-- The batched write path of 0003, plus the webhook outbox: after each
-- inserted message, a message.created row when the channel has a webhook,
-- and a mention row per mentioned actor with a webhook unless that
-- (channel, actor) had a push within the last 60 seconds (then a
-- rate_limited log row instead). Same signature, so callers are unchanged.
CREATE OR REPLACE FUNCTION agentbus_create_messages(
  p_channel_id     uuid,
  p_author_key_ids text[],
  p_actor_ids      uuid[],
  p_actor_names    text[],
  p_actor_labels   text[],
  p_contents       text[],
  p_metadata       jsonb[],
  p_mentions       jsonb[]
) RETURNS TABLE (ord integer, outcome text, retry_after integer, message_id uuid, created_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  ch        channels%ROWTYPE;
  stamp     timestamptz;
  last_at   timestamptz;
  in_window integer;
  oldest    timestamptz;
  new_id    uuid;
  inserted  integer := 0;
  excess    integer;
  i         integer;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT g::integer, 'channel_not_found'::text, NULL::integer, NULL::uuid, NULL::timestamptz, NULL::timestamptz
      FROM generate_series(1, cardinality(p_contents)) g;
    RETURN;
  END IF;
  IF ch.paused THEN
    RETURN QUERY SELECT g::integer, 'channel_paused'::text, 30, NULL::uuid, NULL::timestamptz, NULL::timestamptz
      FROM generate_series(1, cardinality(p_contents)) g;
    RETURN;
  END IF;
  last_at := ch.last_message_at;
  FOR i IN 1 .. cardinality(p_contents) LOOP
    stamp := greatest(clock_timestamp(), last_at + interval '1 microsecond');
    IF ch.max_writes_per_minute IS NOT NULL THEN
      SELECT count(*), min(w.created_at) INTO in_window, oldest FROM (
        SELECT m.created_at FROM messages m
        WHERE m.channel_id = p_channel_id AND m.created_at > stamp - interval '60 seconds'
        ORDER BY m.created_at LIMIT ch.max_writes_per_minute
      ) w;
      IF in_window >= ch.max_writes_per_minute THEN
        RETURN QUERY SELECT i, 'channel_write_rate_exceeded'::text,
          greatest(1, ceil(60 - extract(epoch FROM stamp - oldest))::integer),
          NULL::uuid, NULL::timestamptz, NULL::timestamptz;
        CONTINUE;
      END IF;
    END IF;
    INSERT INTO messages (channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions, created_at, expires_at)
    VALUES (p_channel_id, p_author_key_ids[i], p_actor_ids[i], p_actor_names[i], p_actor_labels[i], p_contents[i],
            p_metadata[i], p_mentions[i], stamp, stamp + make_interval(secs => ch.ttl_seconds))
    RETURNING id INTO new_id;
    last_at := stamp;
    inserted := inserted + 1;

    IF ch.webhook_url IS NOT NULL THEN
      INSERT INTO webhook_outbox (channel_id, event, message_id, created_at) VALUES (p_channel_id, 'message.created', new_id, stamp);
    END IF;
    IF p_mentions[i] <> '[]'::jsonb THEN
      -- Mentioned actors with a webhook, each at most once per 60 s per
      -- channel: the upsert moves the window only when it has run out, and
      -- returns a row only then.
      WITH targets AS (
        SELECT DISTINCT w.actor_id FROM jsonb_array_elements(p_mentions[i]) e
        JOIN actor_webhooks w ON w.actor_id = (e ->> 'id')::uuid
      ), pushed AS (
        INSERT INTO mention_push_windows AS win (channel_id, actor_id, pushed_at)
        SELECT p_channel_id, t.actor_id, stamp FROM targets t
        ON CONFLICT (channel_id, actor_id) DO UPDATE SET pushed_at = excluded.pushed_at
          WHERE win.pushed_at <= excluded.pushed_at - interval '60 seconds'
        RETURNING win.actor_id
      ), queued AS (
        INSERT INTO webhook_outbox (channel_id, actor_id, event, message_id, created_at)
        SELECT p_channel_id, p.actor_id, 'mention', new_id, stamp FROM pushed p
      )
      INSERT INTO webhook_deliveries (delivery_id, channel_id, actor_id, event, message_id, attempt, status, error, duration_ms, attempted_at)
      SELECT gen_random_uuid(), p_channel_id, t.actor_id, 'mention', new_id, 0, 'failed', 'rate_limited', 0, stamp
      FROM targets t WHERE t.actor_id NOT IN (SELECT p.actor_id FROM pushed p);
    END IF;

    RETURN QUERY SELECT i, 'created'::text, NULL::integer, new_id, stamp, stamp + make_interval(secs => ch.ttl_seconds);
  END LOOP;
  IF inserted = 0 THEN
    RETURN;
  END IF;
  excess := CASE WHEN ch.max_messages IS NULL THEN 0 ELSE ch.stored_messages + inserted - ch.max_messages END;
  IF excess > 0 THEN
    DELETE FROM messages m WHERE m.id IN (
      SELECT o.id FROM messages o WHERE o.channel_id = p_channel_id ORDER BY o.created_at LIMIT excess
    );
  ELSE
    excess := 0;
  END IF;
  UPDATE channels c SET last_message_at = last_at, stored_messages = ch.stored_messages + inserted - excess WHERE c.id = p_channel_id;
END;
$$;
