-- Every outbox row gets its owning key as it is written (function
-- agentbus_webhook_outbox_owner), whichever path queued it.
CREATE OR REPLACE TRIGGER webhook_outbox_owner BEFORE INSERT ON webhook_outbox
  FOR EACH ROW EXECUTE FUNCTION agentbus_webhook_outbox_owner();
