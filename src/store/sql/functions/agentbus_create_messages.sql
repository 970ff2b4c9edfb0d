-- The message write path for a batch of messages to one channel, in one
-- round trip and one commit: lock the channel row, refuse when paused or over
-- its write throttle, stamp each message strictly after the previous one (so
-- created_at follows commit order), insert, enqueue the webhook outbox rows,
-- trim the ring buffer once, update the channel's counters.
--
-- Each message is judged on its own (pause, throttle), in order, exactly as
-- if they had arrived one after another. After each inserted message: a
-- message.created outbox row when the channel has a webhook, and a mention
-- row per mentioned actor with a webhook unless that (channel, actor) had a
-- push within the last 60 seconds (then a rate_limited log row instead).
--
-- In SQL because every rule here reads or writes under the channel's row
-- lock: done from the service it would hold that lock across several round
-- trips per message. Called by store/messages.ts.
-- The signature before delays (p_delays): a new signature is a new function
-- beside the old one, which would make a call without p_delays ambiguous.
DROP FUNCTION IF EXISTS agentbus_create_messages(uuid, text[], uuid[], text[], text[], text[], jsonb[], jsonb[]);
-- And the one before groups, priorities, per-message TTLs and limits.
DROP FUNCTION IF EXISTS agentbus_create_messages(uuid, text[], uuid[], text[], text[], text[], jsonb[], jsonb[], double precision[]);
-- And the one before trace contexts.
DROP FUNCTION IF EXISTS agentbus_create_messages(uuid, text[], uuid[], text[], text[], text[], jsonb[], jsonb[], double precision[], text[], smallint[], integer[], jsonb[]);
CREATE OR REPLACE FUNCTION agentbus_create_messages(
  p_channel_id     uuid,
  p_author_key_ids text[],
  p_actor_ids      uuid[],
  p_actor_names    text[],
  p_actor_labels   text[],
  p_contents       text[],
  p_metadata       jsonb[],
  p_mentions       jsonb[],
  p_delays         double precision[] DEFAULT NULL,
  -- Per message: its group (NULL: none), priority (NULL: 3), TTL in seconds
  -- (NULL: the channel's; checked by the service against it) and the ids of
  -- the limits it adds (a JSON array; NULL: none).
  p_group_keys     text[] DEFAULT NULL,
  p_priorities     smallint[] DEFAULT NULL,
  p_ttls           integer[] DEFAULT NULL,
  p_limit_ids      jsonb[] DEFAULT NULL,
  -- Per message: its W3C traceparent and tracestate (docs/decisions.md#trace-context).
  p_trace_parents  text[] DEFAULT NULL,
  p_trace_states   text[] DEFAULT NULL
) RETURNS TABLE (ord integer, outcome text, retry_after integer, message_id uuid, created_at timestamptz, expires_at timestamptz,
                 available_at timestamptz)
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
  ttl       integer;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT g::integer, 'channel_not_found'::text, NULL::integer, NULL::uuid, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz
      FROM generate_series(1, cardinality(p_contents)) g;
    RETURN;
  END IF;
  IF ch.paused THEN
    RETURN QUERY SELECT g::integer, 'channel_paused'::text, 30, NULL::uuid, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz
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
          NULL::uuid, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz;
        CONTINUE;
      END IF;
    END IF;
    -- A delay (seconds, checked by the service against the channel's TTL)
    -- makes the message open work only from stamp + delay; none leaves NULL.
    ttl := least(ch.ttl_seconds, coalesce(p_ttls[i], ch.ttl_seconds));
    INSERT INTO messages (channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions, created_at, expires_at,
                          available_at, group_key, priority, limit_ids, trace_parent, trace_state)
    VALUES (p_channel_id, p_author_key_ids[i], p_actor_ids[i], p_actor_names[i], p_actor_labels[i], p_contents[i],
            p_metadata[i], p_mentions[i], stamp, stamp + make_interval(secs => ttl),
            CASE WHEN coalesce(p_delays[i], 0) > 0 THEN stamp + make_interval(secs => p_delays[i]) END,
            p_group_keys[i], coalesce(p_priorities[i], 3),
            coalesce(ARRAY(SELECT jsonb_array_elements_text(p_limit_ids[i])::uuid), '{}'), p_trace_parents[i], p_trace_states[i])
    RETURNING id INTO new_id;
    -- A group's first message gives it its turn in fair dispatch (never
    -- served yet, so it goes before the groups that were). posted_at keeps
    -- the row from the purge of idle groups (0029_group_rows_end.sql): it is
    -- written at most once a minute, and the row is locked either way, so a
    -- purge deleting it waits for this post and then finds it recent; a
    -- purge that deleted it first makes this insert a new row.
    IF p_group_keys[i] IS NOT NULL THEN
      INSERT INTO message_groups (channel_id, group_key, posted_at) VALUES (p_channel_id, p_group_keys[i], stamp)
      ON CONFLICT (channel_id, group_key) DO UPDATE SET posted_at = excluded.posted_at
        WHERE message_groups.posted_at IS NULL OR message_groups.posted_at < excluded.posted_at - interval '1 minute';
    END IF;
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

    RETURN QUERY SELECT i, 'created'::text, NULL::integer, new_id, stamp, stamp + make_interval(secs => ttl),
      CASE WHEN coalesce(p_delays[i], 0) > 0 THEN stamp + make_interval(secs => p_delays[i]) ELSE stamp END;
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
  UPDATE channels c SET last_message_at = last_at, stored_messages = ch.stored_messages + inserted - excess,
    limited_messages = c.limited_messages OR EXISTS (SELECT 1 FROM unnest(p_limit_ids) x WHERE x IS NOT NULL)
  WHERE c.id = p_channel_id;
END;
$$;
