-- The destination of a webhook URL: its lower-cased host[:port], without
-- user info. NULL for no URL.
--
-- In SQL because the dispatcher's claim (store/webhooks.ts) groups due
-- deliveries by destination inside the claiming query, and the circuit
-- breaker keys its rows (webhook_destinations) on the same value: one
-- definition, so "one receiver" means the same thing to both.
CREATE OR REPLACE FUNCTION agentbus_webhook_destination(url text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT lower(substring(url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)'))
$$;
