-- The owning key of a webhook outbox row (the trigger webhook_outbox_owner
-- calls it before each insert): the key that owns the actor for a mention
-- push to the actor's webhook, the key that set an A2A push config for its
-- notifications, else the key that owns the channel (message.created,
-- member_added).
--
-- In SQL because the claim (store/webhook-claim.ts) shares dispatch slots
-- between owners by this column, and rows are queued by the message write
-- function as well as by the service: a trigger sets it on every path,
-- without the paths knowing about it (docs/decisions.md#webhook-isolation).
CREATE OR REPLACE FUNCTION agentbus_webhook_outbox_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.push_config_id IS NOT NULL THEN
    -- An A2A push notification: the key that asked for it (docs/decisions.md#a2a).
    SELECT p.key_id INTO NEW.owner_key_id FROM a2a_push_configs p WHERE p.id = NEW.push_config_id;
  ELSIF NEW.actor_id IS NULL THEN
    SELECT c.created_by_key_id INTO NEW.owner_key_id FROM channels c WHERE c.id = NEW.channel_id;
  ELSE
    SELECT a.created_by_key_id INTO NEW.owner_key_id FROM actors a WHERE a.id = NEW.actor_id;
  END IF;
  RETURN NEW;
END;
$$;
