-- Invitations listed to the channel owner (issue 11, M2): how many keys
-- became members through each, and the owner's newest-first pages.
ALTER TABLE channel_invitations ADD COLUMN uses int NOT NULL DEFAULT 0;
CREATE INDEX channel_invitations_by_channel_created ON channel_invitations (channel_id, created_at DESC, id DESC);
DROP INDEX channel_invitations_by_channel;
