-- Dead-letter provenance belongs to the service (issue 26, F2;
-- docs/decisions.md#dead-letters). It used to travel in the message's own
-- metadata (metadata.dead_letter), which any poster to an open dead-letter
-- channel could write too, naming another channel of the owner as the
-- origin: the owner's redrive then wrote the message there. From now on
-- agentbus_dead_letter records it in this column, nothing a client sends
-- reaches it, and agentbus_redrive reads only the column.
ALTER TABLE messages ADD COLUMN dead_letter jsonb;
ALTER TABLE message_history ADD COLUMN dead_letter jsonb;

-- The metadata.dead_letter of a genuine dead letter names an origin message
-- that its origin channel archived as 'dead_lettered' (no client can make
-- such a row); a forged one names none. Genuine provenance moves to the
-- column and out of the metadata; anything else stays the client's metadata,
-- trusted by nothing. Text that is not a uuid is never cast (it would fail
-- the migration); uuids are compared through the primary key.
CREATE FUNCTION pg_temp.agentbus_uuid_or_null(t text) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN t ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN t::uuid END
$$;

UPDATE messages m SET dead_letter = m.metadata -> 'dead_letter', metadata = m.metadata - 'dead_letter'
WHERE jsonb_typeof(m.metadata -> 'dead_letter') = 'object'
  AND EXISTS (
    SELECT 1 FROM message_history h
    WHERE h.id = pg_temp.agentbus_uuid_or_null(m.metadata -> 'dead_letter' ->> 'origin_message_id')
      AND h.channel_id = pg_temp.agentbus_uuid_or_null(m.metadata -> 'dead_letter' ->> 'origin_channel_id')
      AND h.reason = 'dead_lettered');

UPDATE message_history m SET dead_letter = m.metadata -> 'dead_letter', metadata = m.metadata - 'dead_letter'
WHERE jsonb_typeof(m.metadata -> 'dead_letter') = 'object'
  AND EXISTS (
    SELECT 1 FROM message_history h
    WHERE h.id = pg_temp.agentbus_uuid_or_null(m.metadata -> 'dead_letter' ->> 'origin_message_id')
      AND h.channel_id = pg_temp.agentbus_uuid_or_null(m.metadata -> 'dead_letter' ->> 'origin_channel_id')
      AND h.reason = 'dead_lettered');

DROP FUNCTION pg_temp.agentbus_uuid_or_null(text);
