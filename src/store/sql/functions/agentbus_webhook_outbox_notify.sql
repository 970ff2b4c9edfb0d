-- Wakes every webhook dispatcher when an outbox row commits (the trigger
-- webhook_outbox_notify calls it per inserted row).
--
-- In SQL because PostgreSQL delivers a NOTIFY at commit and only on commit
-- (collapsing repeats within one transaction), so a rolled-back event never
-- wakes anyone, whichever code path inserted the row.
CREATE OR REPLACE FUNCTION agentbus_webhook_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentbus_webhooks', '');
  RETURN NULL;
END;
$$;
