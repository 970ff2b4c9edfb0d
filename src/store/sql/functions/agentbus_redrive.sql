-- Moves the given dead letters of a channel back to their origin channels
-- (docs/decisions.md#dead-letters). The service chose them (it checked each
-- one's metadata against its origin's metadata_schema, as any write is
-- checked); each is re-checked here under the locks: a message the service
-- itself dead-lettered (its dead_letter column, which no client can write,
-- names the origin; its metadata is never read for that), whose origin
-- channel still exists and is owned by the dead-letter channel's owner key,
-- that nobody holds (unclaimed, or its lease lapsed unacknowledged) and
-- nobody acknowledged. It is written to its origin through the message write
-- path with its metadata as it is and a fresh delivery_count (0), and
-- archived here as 'redriven'. Messages an origin refuses (paused, over its
-- write limit) stay. Oldest first; the same lock order as the write path and
-- agentbus_dead_letter (channel rows in id order, then messages, SKIP
-- LOCKED). Returns one row per origin channel that received messages.
-- The signature before provenance (p_limit): a changed signature is a new
-- function beside the old one.
DROP FUNCTION IF EXISTS agentbus_redrive(uuid, timestamptz, integer);
CREATE OR REPLACE FUNCTION agentbus_redrive(p_channel_id uuid, p_now timestamptz, p_ids uuid[])
RETURNS TABLE (origin_channel_id uuid, moved integer)
LANGUAGE plpgsql AS $$
DECLARE
  owner_key text;
  origins   uuid[];
  origin    uuid;
  ids       uuid[];
  done      uuid[] := '{}';
  batch     uuid[];
  created   uuid[];
BEGIN
  SELECT c.created_by_key_id INTO owner_key FROM channels c WHERE c.id = p_channel_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT array_agg(DISTINCT o.id) INTO origins FROM messages m
    JOIN channels o ON o.id = (m.dead_letter ->> 'origin_channel_id')::uuid
  WHERE m.id = ANY (p_ids) AND m.channel_id = p_channel_id AND m.dead_letter IS NOT NULL
    AND o.created_by_key_id = owner_key AND o.id <> p_channel_id;
  IF origins IS NULL THEN
    RETURN;
  END IF;
  PERFORM 1 FROM channels c WHERE c.id = p_channel_id OR c.id = ANY (origins) ORDER BY c.id FOR NO KEY UPDATE;

  SELECT array_agg(t.id ORDER BY t.created_at) INTO ids FROM (
    SELECT m.id, m.created_at FROM messages m
    WHERE m.id = ANY (p_ids) AND m.channel_id = p_channel_id AND m.expires_at > p_now AND m.dead_letter IS NOT NULL
      AND (m.dead_letter ->> 'origin_channel_id')::uuid IN (
        SELECT o.id FROM channels o WHERE o.id = ANY (origins) AND o.created_by_key_id = owner_key)
      AND m.acknowledged_by = '[]'::jsonb
      AND (m.claimed_by_key_id IS NULL OR (m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now))
    ORDER BY m.created_at FOR UPDATE SKIP LOCKED
  ) t;
  IF ids IS NULL THEN
    RETURN;
  END IF;

  FOREACH origin IN ARRAY origins LOOP
    SELECT array_agg(m.id ORDER BY x.ord) INTO batch
    FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id
    WHERE (m.dead_letter ->> 'origin_channel_id')::uuid = origin;
    CONTINUE WHEN batch IS NULL;
    SELECT array_agg(batch[r.ord]) FILTER (WHERE r.outcome = 'created') INTO created
    FROM agentbus_create_messages(
      origin,
      (SELECT array_agg(m.author_key_id ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_id ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_name ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_label ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.content ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.metadata ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.mentions ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      NULL,
      -- Its group, priority and own limits go with it (docs/decisions.md#message-groups).
      (SELECT array_agg(m.group_key ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.priority ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      NULL,
      (SELECT array_agg(CASE WHEN m.limit_ids = '{}' THEN NULL ELSE to_jsonb(m.limit_ids) END ORDER BY x.ord)
         FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      -- And its trace: a dead letter is still part of the chain (docs/decisions.md#trace-context).
      (SELECT array_agg(m.trace_parent ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.trace_state ORDER BY x.ord) FROM unnest(batch) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id)
    ) r;
    CONTINUE WHEN created IS NULL;
    done := done || created;
    RETURN QUERY SELECT origin, cardinality(created);
  END LOOP;

  PERFORM agentbus_archive_messages(done, p_now, 'redriven');
  UPDATE channels c SET stored_messages = c.stored_messages - cardinality(done) WHERE c.id = p_channel_id;
END;
$$;
