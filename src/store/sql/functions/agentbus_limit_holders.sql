-- A limit's holders at p_now (docs/decisions.md#shared-limits), for a
-- receive and for GET /v1/limits alike: the messages of its owner's channels
-- that hold it and are in flight (holding), and those whose lease has lapsed
-- (lapsed: no holders, but agentbus_pick records that it counted them out).
--
-- Read by a plain index scan of messages_holding, never a bitmap scan: a
-- bitmap scan visited the heap of every delivery acknowledged since the
-- last vacuum on every count, and never marks their dead index entries as
-- an index scan does (2.4 ms a count in bench/dispatch.ts; 0.15 ms as an
-- index scan once the entries it passes are marked). Only this statement:
-- turned off for all of agentbus_pick, other reads lost their plans.
CREATE OR REPLACE FUNCTION agentbus_limit_holders(p_owner text, p_limit uuid, p_now timestamptz)
RETURNS TABLE (holding bigint, lapsed bigint)
LANGUAGE sql STABLE
SET enable_bitmapscan = off AS $$
  SELECT count(*) FILTER (WHERE NOT (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now)),
         count(*) FILTER (WHERE m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now)
  FROM channels k JOIN messages m ON m.channel_id = k.id
  WHERE k.created_by_key_id = p_owner
    AND m.held_limit_ids IS NOT NULL AND m.held_limit_ids @> ARRAY[p_limit]
    AND m.claimed_by_key_id IS NOT NULL AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now
$$;
