-- A key's live messages and stored bytes follow its rows of messages
-- (docs/decisions.md#quotas): one statement's inserted or deleted rows are
-- added up per author, in key order (so concurrent statements lock the
-- usage rows in one order), into the row of this connection's shard.
CREATE OR REPLACE FUNCTION agentbus_key_usage_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO key_usage AS u (key_id, shard, live_messages, stored_bytes)
    SELECT n.author_key_id, (pg_backend_pid() % 16)::smallint, count(*), sum(octet_length(n.content) + octet_length(n.metadata::text))
    FROM new_rows n GROUP BY n.author_key_id ORDER BY n.author_key_id
    ON CONFLICT (key_id, shard) DO UPDATE SET live_messages = u.live_messages + excluded.live_messages,
      stored_bytes = u.stored_bytes + excluded.stored_bytes;
  ELSE
    INSERT INTO key_usage AS u (key_id, shard, live_messages, stored_bytes)
    SELECT o.author_key_id, (pg_backend_pid() % 16)::smallint, -count(*), -sum(octet_length(o.content) + octet_length(o.metadata::text))
    FROM old_rows o GROUP BY o.author_key_id ORDER BY o.author_key_id
    ON CONFLICT (key_id, shard) DO UPDATE SET live_messages = u.live_messages + excluded.live_messages,
      stored_bytes = u.stored_bytes + excluded.stored_bytes;
  END IF;
  RETURN NULL;
END;
$$;
