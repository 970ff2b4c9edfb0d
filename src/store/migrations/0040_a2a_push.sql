-- A2A push-notification configs (docs/decisions.md#a2a): where a task's
-- changes are POSTed, through the webhook outbox and its dispatcher. A
-- message with a config carries a2a_push, so the trigger that queues its
-- notifications costs every other message only its WHEN.
CREATE TABLE a2a_push_configs (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  message_id       uuid NOT NULL,
  channel_id       uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  -- The key that set it: whose share of the dispatcher's slots it takes.
  key_id           text NOT NULL,
  -- The client's name for it (A2A's config id), unique per task.
  config_id        text NOT NULL,
  url              text NOT NULL,
  token            text,
  auth_scheme      text,
  auth_credentials text,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (message_id, config_id)
);
CREATE INDEX a2a_push_configs_age ON a2a_push_configs (created_at);
ALTER TABLE messages ADD COLUMN a2a_push boolean NOT NULL DEFAULT false;
-- History keeps every column of a message (docs/decisions.md#expiry-and-history).
ALTER TABLE message_history ADD COLUMN a2a_push boolean NOT NULL DEFAULT false;
ALTER TABLE webhook_outbox ADD COLUMN push_config_id uuid REFERENCES a2a_push_configs (id) ON DELETE CASCADE;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check
  CHECK (event IN ('message.created', 'mention', 'member_added', 'a2a.task'));
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_push_config CHECK ((event = 'a2a.task') = (push_config_id IS NOT NULL));
