-- Each group's head kept with its turn (issue 28, item 9; docs/decisions.md#dispatch):
-- a receive on a fair channel walks message_groups_heads to the next head
-- instead of reading every group's head. Only agentbus_pick writes these
-- columns, under the channel's advisory lock; what else changes a head
-- (posts, releases, lapses, delays running out) the pick finds by its own
-- reads (agentbus_refresh_heads) before it walks.
ALTER TABLE message_groups
  -- The group's next message as last read (the oldest open one, or with
  -- group_concurrency 1 the oldest unfinished one; for '' the most urgent
  -- open message without a group), NULL when it has none.
  ADD COLUMN head_id uuid,
  ADD COLUMN head_priority smallint,
  -- To be read again before the next walk.
  ADD COLUMN stale boolean NOT NULL DEFAULT true;
CREATE INDEX message_groups_heads ON message_groups (channel_id, head_priority, last_served_at NULLS FIRST, group_key) WHERE head_id IS NOT NULL;
-- Turn order is read through the heads now; the turns alone were one more
-- index to write on every service.
DROP INDEX message_groups_turns;
CREATE INDEX message_groups_stale ON message_groups (channel_id) WHERE stale;

-- What the last walk of a channel read up to.
CREATE TABLE group_heads_read (
  channel_id  uuid PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
  -- The newest message seen: later posts are read by the next walk.
  seen_until  timestamptz NOT NULL,
  -- The now of the last walk: delays that ran out after it are read by the next.
  scanned_at  timestamptz NOT NULL,
  -- When every head was last read in full, and for which rule.
  refreshed_at timestamptz NOT NULL,
  strict_groups boolean NOT NULL
);

-- The open messages without a group, by urgency: the head of a fair
-- channel's '' turn.
CREATE INDEX messages_open_loose ON messages (channel_id, priority, created_at) WHERE claimed_by_key_id IS NULL AND group_key IS NULL;

-- The messages holding limits, by channel: what a receive on a limited
-- channel counts for each limit, over its owner's channels. It
-- replaces a GIN index on held_limit_ids, which keeps the entries of every
-- delivery until a vacuum and cannot mark them dead as a B-tree does: each
-- count read them all (bench/dispatch.ts: the pick's time grew with every
-- delivery since the last vacuum).
CREATE INDEX messages_holding ON messages (channel_id) WHERE held_limit_ids IS NOT NULL;
DROP INDEX messages_held_limits;
