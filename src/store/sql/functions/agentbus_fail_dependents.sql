-- Parents that ended without an acknowledgement (cancelled, dead-lettered,
-- expired: docs/decisions.md#dependencies) cancel every descendant still
-- waiting, down the tree, with cancel_reason parent_failed: expired 2 s
-- back, as a cancel does (docs/decisions.md#cancel). Descendants still wait
-- for a parent, so none is in flight. Returns how many were cancelled.
CREATE OR REPLACE FUNCTION agentbus_fail_dependents(p_ids uuid[], p_now timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  IF cardinality(p_ids) = 0 THEN
    RETURN 0;
  END IF;
  WITH RECURSIVE down(id) AS (
    SELECT d.message_id FROM message_dependencies d WHERE d.parent_id = ANY (p_ids)
    UNION
    SELECT d.message_id FROM message_dependencies d JOIN down ON d.parent_id = down.id
  )
  UPDATE messages m SET cancel_requested_at = p_now, cancel_reason = 'parent_failed',
    cancel_expires_at = m.expires_at, expires_at = least(m.expires_at, p_now - interval '2 seconds')
  FROM down
  WHERE m.id = down.id AND m.acknowledged_by = '[]'::jsonb AND m.cancel_requested_at IS NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;
