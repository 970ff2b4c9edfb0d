-- Membership (issue 4): invitations, access requests and channel events.
-- channel_members itself exists since 0002.

-- Multi-use links that make whoever resolves them a member, for 24 hours.
-- The id is the secret of the link: url-safe random text, not a UUID.
CREATE TABLE channel_invitations (
  id                text PRIMARY KEY,
  channel_id        uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  -- owner_id of the key that created it (not necessarily the channel's)
  owner_id          text NOT NULL,
  created_by_key_id text NOT NULL,
  created_at        timestamptz NOT NULL,
  expires_at        timestamptz NOT NULL,
  revoked_at        timestamptz
);
CREATE INDEX channel_invitations_by_channel ON channel_invitations (channel_id);
-- The purge job drops expired (and revoked) invitations.
CREATE INDEX channel_invitations_expiry ON channel_invitations (expires_at);
CREATE INDEX channel_invitations_revoked ON channel_invitations (revoked_at) WHERE revoked_at IS NOT NULL;

CREATE TABLE access_requests (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id         uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  requester_key_id   text NOT NULL,
  reason             text NOT NULL DEFAULT '',
  status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
  created_at         timestamptz NOT NULL,
  resolved_at        timestamptz,
  resolved_by_key_id text,
  CHECK ((status = 'pending') = (resolved_at IS NULL))
);
-- At most one pending request per requester and channel: a repeat (even a
-- concurrent one) finds the existing request instead of filing another.
CREATE UNIQUE INDEX access_requests_one_pending ON access_requests (channel_id, requester_key_id) WHERE status = 'pending';
-- The owner's list: pending requests of a channel, oldest first.
CREATE INDEX access_requests_pending_by_channel ON access_requests (channel_id, created_at) WHERE status = 'pending';
-- Decided requests are history; a purge can drop them by age.
CREATE INDEX access_requests_resolved ON access_requests (resolved_at) WHERE resolved_at IS NOT NULL;

-- Membership and invitation events, readable by the owner for 24 hours.
CREATE TABLE channel_events (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id     uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  event_type     text NOT NULL CHECK (event_type IN ('member_added', 'member_removed', 'invitation_resolved', 'invitation_revoked')),
  actor_key_id   text NOT NULL,
  subject_key_id text,
  -- no foreign key: the event outlives a purged invitation
  invitation_id  text,
  metadata       jsonb NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL
);
-- The cursor order of a channel's events; unique because each event is
-- stamped after the channel's previous one under a per-channel lock, so a
-- cursor never splits a tie.
CREATE UNIQUE INDEX channel_events_channel_order ON channel_events (channel_id, created_at);
CREATE INDEX channel_events_expiry ON channel_events (expires_at);

-- The owner's member list, ordered by granted_at.
CREATE INDEX channel_members_by_grant ON channel_members (channel_id, granted_at);
