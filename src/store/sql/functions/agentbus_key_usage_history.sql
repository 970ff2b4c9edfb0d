-- A key's stored bytes follow its rows of message_history too (a live
-- message moved to history leaves its live count and keeps its bytes).
CREATE OR REPLACE FUNCTION agentbus_key_usage_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO key_usage AS u (key_id, shard, stored_bytes)
    SELECT n.author_key_id, (pg_backend_pid() % 16)::smallint, sum(octet_length(n.content) + octet_length(n.metadata::text))
    FROM new_rows n GROUP BY n.author_key_id ORDER BY n.author_key_id
    ON CONFLICT (key_id, shard) DO UPDATE SET stored_bytes = u.stored_bytes + excluded.stored_bytes;
  ELSE
    INSERT INTO key_usage AS u (key_id, shard, stored_bytes)
    SELECT o.author_key_id, (pg_backend_pid() % 16)::smallint, -sum(octet_length(o.content) + octet_length(o.metadata::text))
    FROM old_rows o GROUP BY o.author_key_id ORDER BY o.author_key_id
    ON CONFLICT (key_id, shard) DO UPDATE SET stored_bytes = u.stored_bytes + excluded.stored_bytes;
  END IF;
  RETURN NULL;
END;
$$;
