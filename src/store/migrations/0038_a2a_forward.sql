-- A claimable channel's work forwarded to a remote A2A agent
-- (docs/decisions.md#a2a-forward): {url, authHeader: {name, value} | null},
-- or NULL. The header's value is write-only: never rendered. The forwarder
-- finds the channels to serve by channels_forwarding.
ALTER TABLE channels ADD COLUMN a2a_forward jsonb;
CREATE INDEX channels_forwarding ON channels (id) WHERE a2a_forward IS NOT NULL;
