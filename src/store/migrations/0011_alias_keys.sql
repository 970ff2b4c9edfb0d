-- Look-alike aliases (issue 11, L6): an alias names a channel or an actor
-- for everyone, so "Deploy", "deploy" and the full-width "ｄｅｐｌｏｙ" must not
-- name three different things. Lookups stay exact (an alias is typed into
-- URLs as given); uniqueness is judged on the same normal form as agent
-- labels (0010): NFKC, lower-cased, trimmed, computed by the service for new
-- aliases and by this backfill for existing ones.
ALTER TABLE channel_aliases ADD COLUMN alias_key text;
ALTER TABLE actor_aliases ADD COLUMN alias_key text;

DO $$
DECLARE
  folded text := 'lower(%s)';
  normal text := '%s';
  expr text;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu') THEN
    folded := 'lower(%s COLLATE "und-x-icu")';
  END IF;
  IF current_setting('server_encoding') = 'UTF8' THEN
    normal := 'normalize(%s, NFKC)';
  END IF;
  expr := format('regexp_replace(%s, ''^[[:space:]]+|[[:space:]]+$'', '''', ''g'')',
                 format(normal, format(folded, format(normal, 'alias'))));
  EXECUTE format('UPDATE channel_aliases SET alias_key = %s', expr);
  EXECUTE format('UPDATE actor_aliases SET alias_key = %s', expr);
END
$$;

-- Aliases that already collide keep resolving: the first of each group (by
-- code point) holds the normal form, the others none, so only new
-- look-alikes are refused.
UPDATE channel_aliases a SET alias_key = NULL
WHERE EXISTS (SELECT 1 FROM channel_aliases o WHERE o.alias_key = a.alias_key AND o.alias COLLATE "C" < a.alias COLLATE "C");
UPDATE actor_aliases a SET alias_key = NULL
WHERE EXISTS (SELECT 1 FROM actor_aliases o WHERE o.alias_key = a.alias_key AND o.alias COLLATE "C" < a.alias COLLATE "C");

CREATE UNIQUE INDEX channel_aliases_alias_key ON channel_aliases (alias_key);
CREATE UNIQUE INDEX actor_aliases_alias_key ON actor_aliases (alias_key);
