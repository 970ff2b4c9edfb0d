-- Operator settings every replica shares and a restart keeps (issue 17): the
-- public-minting switch first. One row per setting; absent means the
-- configured default.
CREATE TABLE service_settings (
  name       text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
