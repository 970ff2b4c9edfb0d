-- A group's head at p_now (docs/decisions.md#dispatch): its oldest open
-- message, or with p_strict (group_concurrency 1) its oldest unfinished one,
-- open or not; for '' (the messages without a group, one turn in fair
-- dispatch) the most urgent open one, the oldest first. Messages in
-- p_exclude (picked by the receive in progress) are not heads. None: no row.
CREATE OR REPLACE FUNCTION agentbus_group_head(p_channel uuid, p_key text, p_now timestamptz, p_maxd integer, p_strict boolean, p_exclude uuid[])
RETURNS TABLE (id uuid, priority smallint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_key <> '' THEN
    RETURN QUERY
    SELECT h.id, h.priority::smallint FROM agentbus_next_heads(p_channel, ARRAY[p_key], p_now, p_maxd, p_strict, p_exclude) h
    WHERE h.id IS NOT NULL;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT h.id, h.priority FROM (
    (SELECT m.id, m.priority, m.created_at FROM messages m
     WHERE m.channel_id = p_channel AND m.group_key IS NULL AND m.claimed_by_key_id IS NULL
       AND (m.available_at IS NULL OR m.available_at <= p_now) AND m.acknowledged_by = '[]'::jsonb
       AND m.expires_at > p_now AND m.delivery_count < p_maxd AND m.id <> ALL (p_exclude)
     ORDER BY m.priority, m.created_at LIMIT 1)
    UNION ALL
    -- Lapsed: found through the channel's leases, which are few.
    (SELECT m.id, m.priority, m.created_at FROM messages m
     WHERE m.channel_id = p_channel AND m.group_key IS NULL AND m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now
       AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < p_maxd AND m.id <> ALL (p_exclude)
     ORDER BY m.priority, m.created_at LIMIT 1)
  ) h ORDER BY h.priority, h.created_at LIMIT 1;
END;
$$;
