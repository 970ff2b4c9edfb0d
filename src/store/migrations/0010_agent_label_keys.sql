-- Look-alike agent labels (issue 11, L6): "Planner", " planner " and the
-- full-width "ｐｌａｎｎｅｒ" name one owner (owner_id is the label), so
-- uniqueness among active keys is judged on a normal form: Unicode NFKC,
-- lower-cased, trimmed. The service computes it (JavaScript) for every new
-- key; this backfill computes the same with PostgreSQL's normalize() and an
-- ICU lower() where the server has them (identical for ASCII, and for the
-- compatibility forms NFKC folds), else with what it has.
ALTER TABLE api_keys ADD COLUMN label_key text;

DO $$
DECLARE
  folded text := 'lower(%s)';
  normal text := '%s';
BEGIN
  IF EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu') THEN
    folded := 'lower(%s COLLATE "und-x-icu")';
  END IF;
  IF current_setting('server_encoding') = 'UTF8' THEN
    normal := 'normalize(%s, NFKC)';
  END IF;
  EXECUTE format(
    'UPDATE api_keys SET label_key = regexp_replace(%s, ''^[[:space:]]+|[[:space:]]+$'', '''', ''g'')',
    format(normal, format(folded, format(normal, 'agent_label')))
  );
END
$$;

-- Active keys whose labels already collide keep working: the oldest of each
-- group holds the normal form (so a new look-alike is refused while it is
-- active); the others keep no normal form and are held apart only by the
-- exact-label index of 0001.
UPDATE api_keys k SET label_key = NULL
WHERE k.revoked_at IS NULL AND EXISTS (
  SELECT 1 FROM api_keys o
  WHERE o.revoked_at IS NULL AND o.label_key = k.label_key AND (o.created_at, o.key_id) < (k.created_at, k.key_id)
);

CREATE UNIQUE INDEX api_keys_active_label_key ON api_keys (label_key) WHERE revoked_at IS NULL;
