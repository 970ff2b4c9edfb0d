-- Storage quotas per key (issue 26, F10; docs/decisions.md#quotas): what a
-- key's messages take (live and in history) and how many of them are live,
-- counted as they are written and removed, so that a post can be judged
-- without counting the key's rows.
--
-- One row per key and shard: a write adds to the row of its connection's
-- shard (the backend pid modulo 16), so one key's writes on many connections
-- do not queue behind one row lock until their commits; the usage is the sum
-- of a key's rows. Kept by statement-level triggers on messages and
-- message_history (sql/functions/agentbus_key_usage_*.sql), so every path
-- that writes or removes rows (posts, the ring buffer, expiry, dead letters,
-- redrive, retraction, purges, channel deletion) counts without knowing it.
CREATE TABLE key_usage (
  key_id        text NOT NULL,
  shard         smallint NOT NULL,
  live_messages bigint NOT NULL DEFAULT 0,
  -- content and metadata bytes of the key's messages, live and in history
  stored_bytes  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, shard)
);

-- What the operator granted a key beyond the service's defaults
-- (PUT /v1/admin/keys/{key_id}/quotas); NULL: the default, 0: unlimited.
ALTER TABLE api_keys
  ADD COLUMN quota_stored_bytes bigint CHECK (quota_stored_bytes >= 0),
  ADD COLUMN quota_live_messages bigint CHECK (quota_live_messages >= 0),
  ADD COLUMN quota_channels integer CHECK (quota_channels >= 0);

-- What the keys already hold.
INSERT INTO key_usage (key_id, shard, live_messages, stored_bytes)
SELECT key_id, 0, sum(live), sum(bytes) FROM (
  SELECT m.author_key_id AS key_id, count(*) AS live, sum(octet_length(m.content) + octet_length(m.metadata::text)) AS bytes
  FROM messages m GROUP BY m.author_key_id
  UNION ALL
  SELECT h.author_key_id, 0, sum(octet_length(h.content) + octet_length(h.metadata::text))
  FROM message_history h GROUP BY h.author_key_id
) u GROUP BY key_id;

-- The triggers as of this migration (the current sources are under sql/):
-- created here too, so that a database migrated without the sql/ step still
-- counts every write from now on.
CREATE FUNCTION agentbus_key_usage_messages() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE FUNCTION agentbus_key_usage_history() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER messages_key_usage_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_messages();
CREATE TRIGGER messages_key_usage_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_messages();
CREATE TRIGGER message_history_key_usage_insert AFTER INSERT ON message_history REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_history();
CREATE TRIGGER message_history_key_usage_delete AFTER DELETE ON message_history REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_history();
