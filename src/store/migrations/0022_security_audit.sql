-- The security audit (issue 17, docs/decisions.md#security-audit): append
-- only. Rows are written in the transaction of the change they describe and
-- deleted only by the purge after the retention period.
CREATE TABLE security_audit (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  occurred_at  timestamptz NOT NULL,
  kind         text NOT NULL,
  owner_key_id text,
  owner_id     text,
  actor_key_id text,
  subject      text NOT NULL,
  details      jsonb NOT NULL
);
-- An owner reads by its key (a re-minted label must not see the old key's
-- events); the operator filters by label.
CREATE INDEX security_audit_by_owner_key ON security_audit (owner_key_id, id DESC);
CREATE INDEX security_audit_by_owner ON security_audit (owner_id, id DESC);
CREATE INDEX security_audit_by_time ON security_audit (occurred_at);
