-- The heads of the groups p_keys (by their place in it, ord), read together
-- in one statement (docs/decisions.md#dispatch): a group's oldest open
-- message, or with p_strict (group_concurrency 1) its oldest unfinished one;
-- for '' agentbus_group_head's reading. Messages in p_exclude (picked by
-- the receive in progress) are not heads; a group with none has a NULL id.
-- agentbus_refresh_heads reads its stale groups so, agentbus_pick its
-- served groups' next heads, and agentbus_group_head one group.
DROP FUNCTION IF EXISTS agentbus_next_heads(uuid, text[], timestamptz, integer, uuid[]);
CREATE OR REPLACE FUNCTION agentbus_next_heads(p_channel uuid, p_keys text[], p_now timestamptz, p_maxd integer, p_strict boolean, p_exclude uuid[])
RETURNS TABLE (ord bigint, id uuid, priority integer)
LANGUAGE sql STABLE AS $$
  SELECT p.ord, h.id, h.priority::integer FROM unnest(p_keys) WITH ORDINALITY AS p(k, ord)
  LEFT JOIN LATERAL (
    (SELECT m.id, m.priority FROM messages m
     WHERE p.k <> '' AND m.channel_id = p_channel AND m.group_key = p.k
       AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < p_maxd AND m.id <> ALL (p_exclude)
       AND (p_strict OR ((m.claimed_by_key_id IS NULL OR (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now))
         AND (m.available_at IS NULL OR m.available_at <= p_now)))
     ORDER BY m.created_at LIMIT 1)
    UNION ALL
    (SELECT x.id, x.priority FROM agentbus_group_head(p_channel, '', p_now, p_maxd, false, p_exclude) x WHERE p.k = '')
  ) h ON true
$$;
