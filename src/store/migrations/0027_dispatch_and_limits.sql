-- Groups, priorities, fair dispatch and shared limits (issue 28;
-- docs/decisions.md#message-groups, #priorities, #dispatch, #shared-limits).

-- A message's group and priority, and the limits its poster added to the
-- channel's. held_limit_ids: the limits it holds while delivered (the
-- channel's and its own, as they were at the delivery), cleared when it is
-- acknowledged or released; in flight and holding L is what L's in_flight
-- counts.
ALTER TABLE messages
  ADD COLUMN group_key text,
  ADD COLUMN priority smallint NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
  ADD COLUMN limit_ids uuid[] NOT NULL DEFAULT '{}',
  ADD COLUMN held_limit_ids uuid[];
ALTER TABLE message_history
  ADD COLUMN group_key text,
  ADD COLUMN priority smallint NOT NULL DEFAULT 3,
  ADD COLUMN limit_ids uuid[] NOT NULL DEFAULT '{}',
  ADD COLUMN held_limit_ids uuid[];

ALTER TABLE channels
  ADD COLUMN group_concurrency integer CHECK (group_concurrency BETWEEN 1 AND 1000),
  ADD COLUMN dispatch text NOT NULL DEFAULT 'fifo' CHECK (dispatch IN ('fifo', 'fair')),
  ADD COLUMN priority_aging_seconds integer CHECK (priority_aging_seconds BETWEEN 1 AND 86400),
  ADD COLUMN limit_ids uuid[] NOT NULL DEFAULT '{}',
  -- Set once a message of the channel named limits of its own: from then on
  -- its receives check limits even when the channel names none.
  ADD COLUMN limited_messages boolean NOT NULL DEFAULT false;

-- Open work by priority, oldest first within a level: what a receive reads.
CREATE INDEX messages_open_by_priority ON messages (channel_id, priority, created_at) WHERE claimed_by_key_id IS NULL;
-- A group's unfinished messages in order (its head, its in-flight count):
-- acknowledged ones leave it, so reading a group's head does not step over
-- the finished work that stays live until its TTL.
CREATE INDEX messages_group_unfinished ON messages (channel_id, group_key, created_at)
  WHERE group_key IS NOT NULL AND acknowledged_by = '[]'::jsonb;
-- The delivered messages holding a limit.
CREATE INDEX messages_held_limits ON messages USING gin (held_limit_ids) WHERE held_limit_ids IS NOT NULL;

-- A channel's groups and when each was last served (fair dispatch's turn
-- order). A row is added with the group's first message and stays for the
-- channel's life.
CREATE TABLE message_groups (
  channel_id     uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  group_key      text NOT NULL,
  last_served_at timestamptz,
  PRIMARY KEY (channel_id, group_key)
);
CREATE INDEX message_groups_turns ON message_groups (channel_id, last_served_at NULLS FIRST, group_key);

CREATE TABLE limits (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  owner_key_id     text NOT NULL,
  name             text NOT NULL,
  max_in_flight    integer CHECK (max_in_flight BETWEEN 1 AND 100000),
  rate_count       integer CHECK (rate_count BETWEEN 1 AND 1000000),
  rate_per_seconds integer CHECK (rate_per_seconds BETWEEN 1 AND 86400),
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CHECK ((rate_count IS NULL) = (rate_per_seconds IS NULL)),
  CHECK (max_in_flight IS NOT NULL OR rate_count IS NOT NULL),
  UNIQUE (owner_key_id, name)
);

-- The deliveries of messages holding a limit with a rate, n per second
-- (delivered_at: the second they fall in): what the rate bounds. A receive
-- counts every second that overlaps the window ending now, the oldest in
-- full, so no window of per_seconds ever holds more than count (a sliding
-- window, at most one second conservative); a row per second keeps that sum
-- short however high the rate. Rows older than the window are removed as
-- deliveries are recorded.
CREATE TABLE limit_deliveries (
  limit_id     uuid NOT NULL REFERENCES limits (id) ON DELETE CASCADE,
  delivered_at timestamptz NOT NULL,
  n            integer NOT NULL DEFAULT 1,
  PRIMARY KEY (limit_id, delivered_at)
);
