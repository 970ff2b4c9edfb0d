-- Queues an A2A push notification (docs/decisions.md#a2a) for each config of
-- a message whose task changed: taken by a worker, given back, progress,
-- cancel, acknowledged (UPDATE), or archived (DELETE: dead-lettered, expired,
-- retracted). The body is rendered at the first attempt from the message as
-- it then stands, so a receiver always gets the latest state.
CREATE OR REPLACE FUNCTION agentbus_a2a_push_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  changed uuid;
BEGIN
  IF TG_OP = 'DELETE' THEN
    changed := OLD.id;
  ELSE
    changed := NEW.id;
  END IF;
  INSERT INTO webhook_outbox (channel_id, event, message_id, push_config_id, created_at)
  SELECT c.channel_id, 'a2a.task', c.message_id, c.id, clock_timestamp() FROM a2a_push_configs c WHERE c.message_id = changed;
  RETURN NULL;
END;
$$;
