CREATE TABLE api_keys (
  key_id      text PRIMARY KEY,
  secret_hash bytea NOT NULL,           -- sha256 of the secret; the secret itself is never stored
  agent_label text NOT NULL,
  owner_id    text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  revoked_at  timestamptz
);
-- labels are unique among active keys only: a revoked key frees its label
CREATE UNIQUE INDEX api_keys_active_label ON api_keys (agent_label) WHERE revoked_at IS NULL;
