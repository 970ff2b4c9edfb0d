-- A lease only matters until someone acknowledges the message, so an ack now
-- drops it: the set of leased messages stays as small as the work in flight,
-- and the index over it is ordered like the read path (by created_at), so the
-- lapsed-lease branch of status=unclaimed stays an index range scan even
-- under a generic (prepared) plan.
UPDATE messages SET lease_token = NULL, lease_expires_at = NULL WHERE acknowledged_by <> '[]'::jsonb AND lease_token IS NOT NULL;
DROP INDEX messages_leases;
CREATE INDEX messages_leases ON messages (channel_id, created_at) WHERE lease_token IS NOT NULL;
