-- A claimable channel published as an A2A agent (docs/decisions.md#a2a):
-- {enabled, name, description, skills}, or NULL when never set. Read with
-- every channel row; the agent card is rendered from it.
ALTER TABLE channels ADD COLUMN a2a jsonb;
