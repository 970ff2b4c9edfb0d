-- Scoped keys (issue 17): NULL means every scope, including ones a later
-- version adds; otherwise the names the key holds (docs/decisions.md#scopes).
ALTER TABLE api_keys ADD COLUMN scopes text[];
