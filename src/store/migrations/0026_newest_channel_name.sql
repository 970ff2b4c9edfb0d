-- A bare name resolves to the newest of the caller's channels of that name
-- (docs/decisions.md#channel-names). The index lists a key's channels of one
-- name newest first, so the look-up reads its first entry however many
-- channels share the name (Backchannel's clients create one per task).
DROP INDEX IF EXISTS channels_by_owner_key_and_name;
CREATE INDEX channels_by_owner_key_and_name ON channels (created_by_key_id, name, created_at DESC, id DESC);
