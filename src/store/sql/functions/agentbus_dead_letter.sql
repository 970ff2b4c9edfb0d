-- Moves a channel's messages that were delivered max_deliveries times and
-- came back (released, or their lease lapsed, and nobody acknowledged them:
-- an acknowledged message is finished) out of the
-- channel (docs/decisions.md#dead-letters): written to the dead-letter
-- channel through the message write path (ordering, ring buffer, webhooks),
-- with where they came from in the new message's dead_letter column, and archived to
-- history as 'dead_lettered'; without a dead-letter channel only archived.
-- Messages the dead-letter channel refuses (paused, over its write limit)
-- stay where they are, still never delivered, for a later call.
--
-- Lock order is the write path's: channel rows first (origin and dead-letter
-- channel in id order, so two channels dead-lettering into each other cannot
-- deadlock), then the messages, with SKIP LOCKED so a concurrent call passes
-- over rows another is moving; the rows are re-checked when locked, so a
-- message is moved once. Called by store/messages.ts before each receive.
CREATE OR REPLACE FUNCTION agentbus_dead_letter(p_channel_id uuid, p_now timestamptz, p_limit integer)
RETURNS TABLE (moved integer, dead_letter_channel_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
  ch       channels%ROWTYPE;
  locked   uuid;
  ids      uuid[];
  keep     uuid[];
  written  uuid[];
  written_from uuid[];
  n        integer;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel_id;
  IF NOT FOUND OR ch.max_deliveries IS NULL THEN
    RETURN;
  END IF;
  -- Without locks first: nearly every receive has nothing to move.
  IF NOT EXISTS (
    SELECT 1 FROM messages m WHERE m.channel_id = p_channel_id AND m.claimed_by_key_id IS NULL AND m.delivery_count > 0
      AND m.delivery_count >= ch.max_deliveries AND m.acknowledged_by = '[]'::jsonb
  ) AND NOT EXISTS (
    SELECT 1 FROM messages m WHERE m.channel_id = p_channel_id AND m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now
      AND m.acknowledged_by = '[]'::jsonb AND m.delivery_count >= ch.max_deliveries
  ) THEN
    RETURN;
  END IF;

  locked := ch.dead_letter_channel_id;
  PERFORM 1 FROM channels c WHERE c.id IN (p_channel_id, locked) ORDER BY c.id FOR NO KEY UPDATE;
  -- The settings as they are under the lock. A dead-letter channel changed
  -- since the first read is not locked in order: leave the work to the next call.
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel_id;
  IF NOT FOUND OR ch.max_deliveries IS NULL OR ch.dead_letter_channel_id IS DISTINCT FROM locked THEN
    RETURN;
  END IF;

  -- One locking read per partial index (released: messages_redelivered;
  -- lapsed: messages_leases), as the receive statement does.
  WITH released AS (
    SELECT m.id, m.created_at FROM messages m
    WHERE m.channel_id = p_channel_id AND m.claimed_by_key_id IS NULL AND m.delivery_count > 0
      AND m.delivery_count >= ch.max_deliveries AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now
    ORDER BY m.created_at LIMIT p_limit FOR UPDATE SKIP LOCKED
  ), lapsed AS (
    SELECT m.id, m.created_at FROM messages m
    WHERE m.channel_id = p_channel_id AND m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now
      AND m.acknowledged_by = '[]'::jsonb AND m.delivery_count >= ch.max_deliveries AND m.expires_at > p_now
    ORDER BY m.created_at LIMIT p_limit FOR UPDATE SKIP LOCKED
  )
  SELECT array_agg(t.id ORDER BY t.created_at) INTO ids FROM (
    SELECT * FROM released UNION ALL SELECT * FROM lapsed ORDER BY created_at LIMIT p_limit
  ) t;
  IF ids IS NULL THEN
    RETURN;
  END IF;

  IF ch.dead_letter_channel_id IS NOT NULL THEN
    -- The dead letter is a new message of the dead-letter channel, with the
    -- metadata it had. Where it came from is recorded in its dead_letter
    -- column, which only this function writes: redrive trusts that, never
    -- the metadata a client may have written. "last_error" says how its
    -- last delivery ended (released or lease_expired).
    SELECT array_agg(ids[r.ord]) FILTER (WHERE r.outcome <> 'created'),
           array_agg(r.message_id ORDER BY r.ord) FILTER (WHERE r.outcome = 'created'),
           array_agg(ids[r.ord] ORDER BY r.ord) FILTER (WHERE r.outcome = 'created')
      INTO keep, written, written_from
    FROM agentbus_create_messages(
      ch.dead_letter_channel_id,
      (SELECT array_agg(m.author_key_id ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_id ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_name ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.actor_label ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.content ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.metadata ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.mentions ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      NULL,
      -- Its group, priority and own limits go with it (docs/decisions.md#message-groups).
      (SELECT array_agg(m.group_key ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.priority ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      NULL,
      (SELECT array_agg(CASE WHEN m.limit_ids = '{}' THEN NULL ELSE to_jsonb(m.limit_ids) END ORDER BY x.ord)
         FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      -- And its trace: a dead letter is still part of the chain (docs/decisions.md#trace-context).
      (SELECT array_agg(m.trace_parent ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id),
      (SELECT array_agg(m.trace_state ORDER BY x.ord) FROM unnest(ids) WITH ORDINALITY x(id, ord) JOIN messages m ON m.id = x.id)
    ) r;
    IF written IS NOT NULL THEN
      UPDATE messages d SET dead_letter = jsonb_build_object(
          'origin_channel_id', o.channel_id,
          'origin_message_id', o.id,
          'delivery_count', o.delivery_count,
          'last_error', CASE WHEN o.claimed_by_key_id IS NULL THEN 'released' ELSE 'lease_expired' END)
      FROM unnest(written, written_from) AS p(new_id, old_id) JOIN messages o ON o.id = p.old_id
      WHERE d.id = p.new_id;
    END IF;
    IF keep IS NOT NULL THEN
      ids := ARRAY(SELECT x FROM unnest(ids) x WHERE x <> ALL (keep));
    END IF;
  END IF;

  -- Their dependents will never run (docs/decisions.md#dependencies).
  PERFORM agentbus_fail_dependents(ids, p_now);
  n := agentbus_archive_messages(ids, p_now, 'dead_lettered');
  UPDATE channels c SET stored_messages = c.stored_messages - n WHERE c.id = p_channel_id;
  RETURN QUERY SELECT n, ch.dead_letter_channel_id;
END;
$$;
