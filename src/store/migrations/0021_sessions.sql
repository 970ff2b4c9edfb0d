-- Shared sessions (issue 17, docs/decisions.md#sessions): a JSON state with a
-- version for compare-and-set, owned by the key that created it and shared
-- with other keys. owner_id is that key's label, shown; the key decides, as
-- for channels: a label freed by revocation does not bring its sessions along.
CREATE TABLE sessions (
  id           uuid PRIMARY KEY,
  owner_key_id text NOT NULL,
  owner_id     text NOT NULL,
  name         text NOT NULL,
  state        jsonb NOT NULL,
  version      integer NOT NULL,
  ttl_seconds  integer NOT NULL,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL
);
-- The owner's listing, newest first, and the purge.
CREATE INDEX sessions_by_owner ON sessions (owner_key_id, created_at DESC, id DESC);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

CREATE TABLE session_members (
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  key_id     text NOT NULL,
  added_at   timestamptz NOT NULL,
  PRIMARY KEY (session_id, key_id)
);
CREATE INDEX session_members_by_key ON session_members (key_id);
