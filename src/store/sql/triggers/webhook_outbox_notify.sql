-- Committed outbox rows wake the webhook dispatchers (function
-- agentbus_webhook_outbox_notify). Per row, not per statement: an
-- INSERT … SELECT that inserts nothing must not wake anyone.
CREATE OR REPLACE TRIGGER webhook_outbox_notify AFTER INSERT ON webhook_outbox
  FOR EACH ROW EXECUTE FUNCTION agentbus_webhook_outbox_notify();
