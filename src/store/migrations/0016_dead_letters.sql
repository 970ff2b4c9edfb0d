-- Max deliveries and dead letters (issue 14, docs/decisions.md#dead-letters).
--
-- max_deliveries: how often a message of the channel may be handed out
-- (claimed or received); null = unbounded. dead_letter_channel_id: where a
-- message past it goes. A deleted dead-letter channel leaves the setting null
-- (the channel then archives such messages to history instead).
ALTER TABLE channels
  ADD COLUMN max_deliveries integer CHECK (max_deliveries BETWEEN 1 AND 1000),
  ADD COLUMN dead_letter_channel_id uuid REFERENCES channels (id) ON DELETE SET NULL,
  ADD CONSTRAINT channels_dead_letter_not_self CHECK (dead_letter_channel_id <> id);

-- dead_lettered: moved out of its channel past max_deliveries (to the dead-letter
-- channel, or archived when there is none); redriven: a dead letter moved back
-- to its origin channel.
ALTER TABLE message_history DROP CONSTRAINT message_history_reason_check;
ALTER TABLE message_history ADD CONSTRAINT message_history_reason_check
  CHECK (reason IN ('expired', 'retracted', 'dead_lettered', 'redriven'));

-- Released messages that came back as open work (delivered before, unclaimed):
-- the dead-letter sweep probes these on each receive of a channel with
-- max_deliveries, so it must not walk the whole open queue. Lapsed leases are
-- found through messages_leases.
CREATE INDEX messages_redelivered ON messages (channel_id, created_at) WHERE claimed_by_key_id IS NULL AND delivery_count > 0;
