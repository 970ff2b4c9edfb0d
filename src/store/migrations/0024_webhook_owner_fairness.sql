-- Webhook dispatch fair between owning keys (adversarial review, F9;
-- docs/decisions.md#webhook-isolation). The per-destination cap alone let
-- one key with many slow destinations hold every dispatch slot, and a key
-- with more than the claim's scan window of due rows at the head of the
-- outbox hide every other key's rows from the claim. The claim now walks the
-- owners with rows (a loose index scan) and takes each one's first due rows,
-- and a dispatcher gives each owner at most AGENTBUS_WEBHOOK_OWNER_CONCURRENCY
-- of its slots.
--
-- The owner of a delivery: the key that owns the actor for a mention push to
-- the actor's webhook, else the key that owns the channel (message.created,
-- member_added). Fixed when the row is written (a trigger, so every path
-- that queues a push sets it without knowing about it) and never NULL: a
-- row without an owner would be invisible to the walk over owners.
ALTER TABLE webhook_outbox ADD COLUMN owner_key_id text;
UPDATE webhook_outbox o SET owner_key_id = coalesce(
  (SELECT a.created_by_key_id FROM actors a WHERE a.id = o.actor_id),
  (SELECT c.created_by_key_id FROM channels c WHERE c.id = o.channel_id));
ALTER TABLE webhook_outbox ALTER COLUMN owner_key_id SET NOT NULL;

-- The claim's walk (store/webhook-claim.ts), one descent per step: the next
-- owner with rows, and an owner's due rows in due order, oldest first; id
-- makes each row's position unique, so a step resumes exactly after it.
CREATE INDEX webhook_outbox_owner_due ON webhook_outbox (owner_key_id, next_attempt_at, created_at, id);

-- The trigger as of this migration (the current source is
-- sql/functions/agentbus_webhook_outbox_owner.sql and
-- sql/triggers/webhook_outbox_owner.sql). Created here too, so a database
-- migrated without the sql/ step still fills the NOT NULL column.
CREATE FUNCTION agentbus_webhook_outbox_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.actor_id IS NULL THEN
    SELECT c.created_by_key_id INTO NEW.owner_key_id FROM channels c WHERE c.id = NEW.channel_id;
  ELSE
    SELECT a.created_by_key_id INTO NEW.owner_key_id FROM actors a WHERE a.id = NEW.actor_id;
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER webhook_outbox_owner BEFORE INSERT ON webhook_outbox
  FOR EACH ROW EXECUTE FUNCTION agentbus_webhook_outbox_owner();
