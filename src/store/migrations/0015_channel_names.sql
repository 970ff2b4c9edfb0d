-- A channel's {identifier} may be a name its caller's key owns
-- (docs/decisions.md#channel-names): looked up by (created_by_key_id, name),
-- so an index on both answers it in one probe however many channels a key
-- has. It also serves every look-up by key alone, which the old index did.
CREATE INDEX channels_by_owner_key_and_name ON channels (created_by_key_id, name);
DROP INDEX channels_by_owner_key;
