-- Brings a fair channel's kept heads (message_groups.head_id) up to date
-- before a receive walks them (agentbus_pick; docs/decisions.md#dispatch).
-- Called under the channel's advisory lock: only the pick writes heads.
--
-- A kept head goes wrong in two ways. Worse than it was (taken by a claim by
-- id, acknowledged, expired): the walk checks each head before it uses it.
-- Better than it was, an older or more urgent message open again: this reads
-- what can do that and reads those groups' heads again:
--   - posts since the last walk (created_at > seen_until; posts to a channel
--     are stamped in commit order under its row lock, so one not yet visible
--     is newer than every visible one);
--   - released messages (open with a delivery behind them: few);
--   - lapsed leases (the channel's leases: few);
--   - delays that ran out since the last walk (two seconds' margin, and up to
--     a second more: scanned_at moves once a second);
--   - rows marked stale (a new group; a picked message the lease passed over).
-- Every head is read again every 5 s of the service clock, when the clock
-- steps back, and when the group rule changes: whatever else might reopen a
-- message waits at most that long.
CREATE OR REPLACE FUNCTION agentbus_refresh_heads(p_channel uuid, p_now timestamptz, p_maxd integer, p_strict boolean)
RETURNS void
LANGUAGE plpgsql
-- Planned once: its statements walk their indexes whatever the values.
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  st     group_heads_read%ROWTYPE;
  whole  boolean;
  newest timestamptz;
  stale_keys text[];
BEGIN
  SELECT * INTO st FROM group_heads_read r WHERE r.channel_id = p_channel;
  whole := NOT FOUND OR st.strict_groups <> p_strict OR p_now >= st.refreshed_at + interval '5 seconds'
    OR p_now < st.scanned_at - interval '1 second';
  IF whole THEN
    SELECT max(m.created_at) INTO newest FROM messages m WHERE m.channel_id = p_channel;
    UPDATE message_groups g SET stale = true WHERE g.channel_id = p_channel AND NOT g.stale;
  ELSE
    -- In created_at order, so that the plan walks the channel's index
    -- whatever seen_until is; what is past the first 10,000 is read next time.
    WITH fresh AS (
      SELECT m.group_key, m.created_at FROM messages m WHERE m.channel_id = p_channel AND m.created_at > st.seen_until
      ORDER BY m.created_at LIMIT 10000
    ), reopened AS (
      SELECT f.group_key FROM fresh f
      UNION
      SELECT m.group_key FROM messages m WHERE m.channel_id = p_channel AND m.claimed_by_key_id IS NULL AND m.delivery_count > 0
      UNION
      SELECT m.group_key FROM messages m WHERE m.channel_id = p_channel AND m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now
      UNION
      (SELECT m.group_key FROM messages m
       WHERE m.channel_id = p_channel AND m.available_at IS NOT NULL AND m.claimed_by_key_id IS NULL
         AND m.available_at > st.scanned_at - interval '2 seconds' AND m.available_at <= p_now
       ORDER BY m.available_at LIMIT 10000)
    ), marked AS (
      -- By key through the primary key: as a join, the generic plan hashed
      -- every group of the channel on each walk, mostly to mark none.
      UPDATE message_groups g SET stale = true
      WHERE g.channel_id = p_channel AND g.group_key = ANY (ARRAY(SELECT coalesce(r.group_key, '') FROM reopened r)) AND NOT g.stale
    )
    SELECT max(f.created_at) INTO newest FROM fresh f;
  END IF;
  -- Mostly there is none: a probe of message_groups_stale, not a pass over the channel's groups.
  SELECT array_agg(g.group_key) INTO stale_keys FROM message_groups g WHERE g.channel_id = p_channel AND g.stale;
  IF stale_keys IS NOT NULL THEN
    UPDATE message_groups g SET head_id = h.id, head_priority = h.priority, stale = false
    FROM agentbus_next_heads(p_channel, stale_keys, p_now, p_maxd, p_strict, '{}') h
    WHERE g.channel_id = p_channel AND g.group_key = stale_keys[h.ord];
  END IF;
  -- What was read, written when it moved: a second's walks share one scanned_at
  -- (their windows for delays reach that much further back).
  IF whole OR newest IS NOT NULL OR p_now >= st.scanned_at + interval '1 second' OR p_now < st.scanned_at THEN
    INSERT INTO group_heads_read AS r (channel_id, seen_until, scanned_at, refreshed_at, strict_groups)
    VALUES (p_channel, coalesce(newest, st.seen_until, '-infinity'), p_now, CASE WHEN whole THEN p_now ELSE st.refreshed_at END, p_strict)
    ON CONFLICT (channel_id) DO UPDATE SET seen_until = excluded.seen_until, scanned_at = excluded.scanned_at,
      refreshed_at = excluded.refreshed_at, strict_groups = excluded.strict_groups;
  END IF;
END;
$$;
