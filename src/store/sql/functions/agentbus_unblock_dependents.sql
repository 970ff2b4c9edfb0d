-- A parent was acknowledged (docs/decisions.md#dependencies): each of its
-- dependents waits for one parent fewer, and one that waits for none is
-- available from now (available_at NULL: open since it was posted, in its
-- place). Its group's kept head is read again by the next fair walk. The
-- edges stay until the dependent is archived: the service reads them after
-- the acknowledgement to wake the dependents' channels.
CREATE OR REPLACE FUNCTION agentbus_unblock_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  WITH freed AS (
    UPDATE messages m SET blocked_by = m.blocked_by - 1,
      available_at = CASE WHEN m.blocked_by = 1 THEN NULL ELSE m.available_at END
    FROM message_dependencies d
    WHERE d.parent_id = NEW.id AND m.id = d.message_id AND m.blocked_by > 0
    RETURNING m.channel_id, m.group_key, m.blocked_by
  )
  UPDATE message_groups g SET stale = true
  FROM freed f WHERE f.blocked_by = 0 AND g.channel_id = f.channel_id AND g.group_key = coalesce(f.group_key, '');
  RETURN NULL;
END;
$$;
