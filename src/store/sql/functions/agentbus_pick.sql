-- Which open work a receive on a channel with groups, fair dispatch,
-- priority aging or shared limits leases next (docs/decisions.md#dispatch,
-- #message-groups, #priorities, #shared-limits): up to p_wanted message ids in
-- delivery order (n = 1, 2, ...), each with the limits it will hold. The
-- statement that calls it leases them and records the rated limits'
-- deliveries of what it leased (PICK_AND_LEASE_SQL in store/receive-sql.ts),
-- in the same transaction, under the locks taken here.
--
-- Order: effective priority first (a message waiting counts one level more
-- urgent per priority_aging_seconds), then the dispatch rule: fifo, the
-- oldest first; fair, the group served least recently first (its head, the
-- group's oldest open message). With group_concurrency, a group with that
-- many messages in flight gives none; with 1, a group's head is its oldest
-- unfinished message, so nothing later of the group goes while it is in
-- flight, delayed after a release, or lapsed (then it goes first).
-- A message whose limits have no room is passed over: it stays ready and
-- the next candidate is considered.
--
-- Exact under concurrency: receives on one channel take its advisory lock,
-- so group counts and turns are read and changed by one at a time; the
-- owner's limits are locked (in id order, after the channel's lock, so two
-- channels sharing limits cannot deadlock) before their use is counted, so
-- receives on every channel and process that share a limit take its room in
-- turn. The leasing statement checks each picked row again as it updates it
-- (a claim by id does not take these locks).
--
-- On a fair channel without aging a pick walks the kept heads
-- (message_groups.head_id, agentbus_refresh_heads) instead of reading every
-- group's head.
CREATE OR REPLACE FUNCTION agentbus_pick(p_channel uuid, p_now timestamptz, p_wanted integer)
RETURNS TABLE (id uuid, n integer, held uuid[])
-- A receive's worth: the planner of the leasing statement reads the rows by id.
LANGUAGE plpgsql ROWS 16
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  ch        channels%ROWTYPE;
  maxd      integer;
  grouped   boolean;
  one_at_a_time    boolean;
  picked    uuid[] := '{}';
  passed    uuid[] := '{}';
  lim_ids   uuid[] := '{}';
  lim_room  integer[] := '{}';
  lim_rate  integer[] := '{}';
  group_n   jsonb := '{}';
  c         record;
  holds     uuid[];
  ok        boolean;
  j         integer;
  k         integer;
  busy      integer;
  pass      integer := 0;
  got       integer := 0;
  progress  boolean;
  per_group integer;
  -- The same for the messages without a group, which no group bound holds.
  loose_per integer;
  ngroups   integer;
  -- Limits with no room left: their messages are not candidates.
  exhausted uuid[] := '{}';
  -- Fair walk: groups that give nothing more in this pick, the groups of the picked messages, whether the full reading takes over.
  skipped   text[] := '{}';
  picked_groups text[] := '{}';
  fallback  boolean := false;
  nx_id     uuid;
  nx_prio   integer;
  nx_ids    uuid[];
  nx_prios  integer[];
  -- Served groups whose next head is not read yet (read together, when needed).
  pend_keys text[] := '{}';
  rq_minp   integer := 99;
  -- The heads read (rd_*, the next at ri), a chunk at a time, and every group read so far.
  -- (a few more than wanted: a head may be gone or waiting)
  chunk     integer;
  rd_keys   text[];
  rd_ids    uuid[];
  rd_prios  integer[];
  ri        integer;
  seen      text[] := '{}';
  -- Served groups' next heads, in hand (rq_*; taken: NULL), and what to write back (sv_*; keep: a strict group's head stays).
  rq_keys   text[] := '{}';
  rq_ids    uuid[] := '{}';
  rq_prios  integer[] := '{}';
  q         integer;
  sv_keys   text[] := '{}';
  sv_ids    uuid[] := '{}';
  sv_prios  integer[] := '{}';
  sv_keep   boolean[] := '{}';
  cand_key  text;
  cand_id   uuid;
  cand_prio integer;
  cand_state text;
  cand_lims jsonb;
  rd_states text[];
  rd_lims   jsonb;
  -- The limits a message holds (holds) and their places in lim_ids (hpos); the channel's own, once.
  hpos      integer[];
  ch_holds  uuid[];
  ch_hpos   integer[];
  lapses    boolean;
  served_at timestamptz;
  -- The full reading's candidates (a_*), its turns' first candidates in
  -- order (rd_idx), the next candidates of turns taken in this pass (q_idx,
  -- taken: NULL; q_seq, when the turn was taken), turns that give nothing
  -- more (dead_keys).
  a_ids     uuid[];
  a_keys    text[];
  a_groups  text[];
  a_eff     integer[];
  a_created timestamptz[];
  a_lims    jsonb;
  a_round   integer[];
  a_fk      text[];
  a_cut     boolean[];
  rd_idx    integer[];
  q_idx     integer[];
  q_seq     integer[];
  dead_keys text[];
  ax        integer;
  cand_group text;
BEGIN
  IF p_wanted <= 0 THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('agentbus_pick:' || p_channel::text, 0));
  SELECT * INTO ch FROM channels x WHERE x.id = p_channel AND x.mode = 'claimable';
  IF NOT FOUND THEN
    RETURN;
  END IF;
  maxd := coalesce(ch.max_deliveries, 2147483647);
  chunk := least(48, p_wanted + 8);
  grouped := ch.group_concurrency IS NOT NULL OR ch.dispatch = 'fair';
  one_at_a_time := coalesce(ch.group_concurrency = 1, false);
  IF ch.dispatch = 'fair' THEN
    -- The turn of the messages without a group.
    INSERT INTO message_groups (channel_id, group_key) VALUES (p_channel, '') ON CONFLICT DO NOTHING;
  END IF;

  IF cardinality(ch.limit_ids) > 0 OR ch.limited_messages THEN
    FOR c IN SELECT l.id, l.max_in_flight, l.rate_count, l.rate_per_seconds FROM limits l
             WHERE l.owner_key_id = ch.created_by_key_id ORDER BY l.id FOR UPDATE LOOP
      lim_ids := lim_ids || c.id;
      IF c.max_in_flight IS NULL THEN
        lim_room := lim_room || 2147483647;
      ELSE
        -- Its holders are messages of its owner's channels (messages_holding;
        -- a channel whose limits were removed may still have some in flight).
        -- A lapsed lease is no holder; counting one out is recorded, so that
        -- it can no longer be extended (0030_limit_lapses.sql).
        SELECT c.max_in_flight - h.holding, h.lapsed > 0 INTO busy, lapses FROM agentbus_limit_holders(ch.created_by_key_id, c.id, p_now) h;
        IF lapses THEN
          UPDATE limits l SET lapses_counted_until = greatest(l.lapses_counted_until, p_now) WHERE l.id = c.id;
        END IF;
        lim_room := lim_room || busy;
      END IF;
      IF c.rate_count IS NULL THEN
        lim_rate := lim_rate || 2147483647;
      ELSE
        -- With a second to spare: the nows of consecutive picks come from the
        -- service processes' clocks and may step back a little.
        DELETE FROM limit_deliveries d WHERE d.limit_id = c.id AND d.delivered_at <= p_now - make_interval(secs => c.rate_per_seconds + 2);
        -- The seconds overlapping the window, the oldest counted in full.
        SELECT c.rate_count - coalesce(sum(d.n), 0) INTO busy FROM limit_deliveries d
        WHERE d.limit_id = c.id AND d.delivered_at > p_now - make_interval(secs => c.rate_per_seconds + 1);
        lim_rate := lim_rate || busy;
      END IF;
    END LOOP;
  END IF;

  exhausted := ARRAY(SELECT lim_ids[ix] FROM generate_subscripts(lim_ids, 1) ix WHERE lim_room[ix] <= 0 OR lim_rate[ix] <= 0);
  IF ch.limit_ids && exhausted THEN
    -- Every message holds the channel's limits: none can go now.
    RETURN;
  END IF;

  -- Most messages hold only their channel's limits, found once per pick.
  ch_holds := ARRAY(SELECT DISTINCT y FROM unnest(ch.limit_ids) y WHERE y = ANY (lim_ids) ORDER BY y);
  ch_hpos := ARRAY(SELECT array_position(lim_ids, y) FROM unnest(ch_holds) y);

  IF ch.dispatch = 'fair' AND ch.priority_aging_seconds IS NULL THEN
    -- Fair without aging: walk the kept heads in turn order (most urgent
    -- first, then the group served least recently) instead of reading every
    -- group's head. The walk reads the first heads in one statement, checks
    -- each before it uses it, keeps a served group's next head in hand (it
    -- goes after every unserved group of its priority: it was served last)
    -- and writes the served groups back at the end. The first message whose
    -- limits have no room hands the rest of the pick to the full reading
    -- below, which passes over such messages.
    PERFORM agentbus_refresh_heads(p_channel, p_now, maxd, one_at_a_time);
    <<walk>>
    LOOP
      -- The next heads in turn order, past the groups already read, each as
      -- it is now: gone (acknowledged, expired, moved, or its priority
      -- changed), open, or waiting (in flight or delayed), and its own limits.
      -- The lease checks each row again as it takes it.
      SELECT coalesce(array_agg(w.group_key ORDER BY w.rn), '{}'), coalesce(array_agg(w.head_id ORDER BY w.rn), '{}'),
             coalesce(array_agg(w.head_priority::integer ORDER BY w.rn), '{}'),
             coalesce(array_agg(CASE WHEN m.id IS NULL THEN 'gone'
               WHEN (m.claimed_by_key_id IS NULL OR (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now))
                 AND (m.available_at IS NULL OR m.available_at <= p_now) THEN 'open' ELSE 'waiting' END ORDER BY w.rn), '{}'),
             coalesce(jsonb_agg(to_jsonb(m.limit_ids) ORDER BY w.rn), '[]')
      INTO rd_keys, rd_ids, rd_prios, rd_states, rd_lims
      FROM (SELECT g.group_key, g.head_id, g.head_priority,
              row_number() OVER (ORDER BY g.head_priority, g.last_served_at NULLS FIRST, g.group_key) AS rn
            FROM message_groups g
            WHERE g.channel_id = p_channel AND g.head_id IS NOT NULL AND g.group_key <> ALL (seen)
            ORDER BY g.head_priority, g.last_served_at NULLS FIRST, g.group_key LIMIT chunk) w
      LEFT JOIN messages m ON m.id = w.head_id AND m.channel_id = p_channel AND m.priority = w.head_priority
        AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < maxd;
      seen := seen || rd_keys;
      ri := 1;
      LOOP
        EXIT walk WHEN got >= p_wanted;
        IF ri > cardinality(rd_ids) AND cardinality(rd_ids) = chunk THEN
          -- More heads wait unread: read them before comparing.
          CONTINUE walk;
        END IF;
        -- A served group's next head goes first only when it is more urgent
        -- than the next unserved head: read the served groups' next heads
        -- (all at once) only when one could be.
        IF cardinality(pend_keys) > 0 AND (ri > cardinality(rd_ids) OR rd_prios[ri] > 1) THEN
          SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.priority ORDER BY h.ord), '{}')
          INTO nx_ids, nx_prios FROM agentbus_next_heads(p_channel, pend_keys, p_now, maxd, false, picked) h;
          FOR j IN 1 .. cardinality(pend_keys) LOOP
            nx_id := nx_ids[j];
            nx_prio := nx_prios[j];
            k := array_position(sv_keys, pend_keys[j]);
            sv_ids[k] := nx_id;
            sv_prios[k] := nx_prio;
            IF nx_id IS NOT NULL THEN
              rq_keys := rq_keys || pend_keys[j];
              rq_ids := rq_ids || nx_id;
              rq_prios := rq_prios || nx_prio;
              rq_minp := least(rq_minp, nx_prio);
            END IF;
          END LOOP;
          pend_keys := '{}';
        END IF;
        q := 0;
        IF rq_minp < 99 AND (ri > cardinality(rd_ids) OR rq_minp < rd_prios[ri]) THEN
          FOR j IN 1 .. cardinality(rq_ids) LOOP
            IF rq_ids[j] IS NOT NULL AND (q = 0 OR rq_prios[j] < rq_prios[q]) THEN
              q := j;
            END IF;
          END LOOP;
        END IF;
        IF q > 0 AND (ri > cardinality(rd_ids) OR rq_prios[q] < rd_prios[ri]) THEN
          cand_key := rq_keys[q];
          cand_id := rq_ids[q];
          cand_prio := rq_prios[q];
          cand_state := NULL;
          rq_ids[q] := NULL;
          rq_minp := coalesce((SELECT min(rq_prios[x]) FROM generate_subscripts(rq_ids, 1) x WHERE rq_ids[x] IS NOT NULL), 99);
        ELSIF ri <= cardinality(rd_ids) THEN
          cand_key := rd_keys[ri];
          cand_id := rd_ids[ri];
          cand_prio := rd_prios[ri];
          cand_state := rd_states[ri];
          cand_lims := rd_lims -> (ri - 1);
          ri := ri + 1;
        ELSE
          EXIT walk;
        END IF;
        CONTINUE WHEN cand_key = ANY (skipped);
        IF cand_state IS NULL THEN
          -- A served group's next head, read in this pick: as it is now.
          SELECT CASE WHEN (m.claimed_by_key_id IS NULL OR (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now))
              AND (m.available_at IS NULL OR m.available_at <= p_now) THEN 'open' ELSE 'waiting' END, to_jsonb(m.limit_ids)
          INTO cand_state, cand_lims FROM messages m
          WHERE m.id = cand_id AND m.channel_id = p_channel AND m.priority = cand_prio
            AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < maxd AND m.id <> ALL (picked);
          IF NOT FOUND THEN
            cand_state := 'gone';
          END IF;
        END IF;
        IF cand_state = 'gone' OR (cand_state = 'waiting' AND NOT (one_at_a_time AND cand_key <> '')) THEN
          -- Gone or taken since it was read: read the group's head again,
          -- and the walk again from there (the group keeps its turn).
          UPDATE message_groups g SET (head_id, head_priority) = (
            SELECT x.id, x.priority FROM agentbus_group_head(p_channel, cand_key, p_now, maxd, one_at_a_time,
              CASE WHEN one_at_a_time AND cand_key <> '' THEN '{}' ELSE picked END) x)
          WHERE g.channel_id = p_channel AND g.group_key = cand_key AND NOT (g.group_key = ANY (sv_keys));
          IF cand_key = ANY (sv_keys) THEN
            -- A served group's next head, taken since: its next one.
            sv_keep[array_position(sv_keys, cand_key)] := false;
            SELECT x.id, x.priority INTO nx_id, nx_prio FROM agentbus_group_head(p_channel, cand_key, p_now, maxd, false, picked) x;
            sv_ids[array_position(sv_keys, cand_key)] := nx_id;
            sv_prios[array_position(sv_keys, cand_key)] := nx_prio;
            IF nx_id IS NOT NULL THEN
              rq_keys := rq_keys || cand_key;
              rq_ids := rq_ids || nx_id;
              rq_prios := rq_prios || nx_prio;
              rq_minp := least(rq_minp, nx_prio);
            END IF;
            CONTINUE;
          END IF;
          seen := sv_keys || skipped;
          CONTINUE walk;
        END IF;
        IF cand_state = 'waiting' THEN
          -- A strict group's head in flight or delayed: the group waits.
          skipped := skipped || cand_key;
          CONTINUE;
        END IF;
        IF ch.group_concurrency IS NOT NULL AND cand_key <> '' THEN
          SELECT count(*) INTO busy FROM messages m
          WHERE m.channel_id = p_channel AND m.group_key = cand_key AND m.claimed_by_key_id IS NOT NULL
            AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now
            AND NOT (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now);
          IF busy + cardinality(array_positions(picked_groups, cand_key)) >= ch.group_concurrency THEN
            skipped := skipped || cand_key;
            CONTINUE;
          END IF;
        END IF;
        -- Most messages hold only their channel's limits, found once per pick.
        IF jsonb_array_length(cand_lims) = 0 THEN
          holds := ch_holds;
          hpos := ch_hpos;
        ELSE
          holds := ARRAY(SELECT DISTINCT x FROM unnest(ch.limit_ids || ARRAY(SELECT jsonb_array_elements_text(cand_lims)::uuid)) x
                         WHERE x = ANY (lim_ids) ORDER BY x);
          hpos := ARRAY(SELECT array_position(lim_ids, x) FROM unnest(holds) x);
        END IF;
        FOREACH k IN ARRAY hpos LOOP
          IF lim_room[k] <= 0 OR lim_rate[k] <= 0 THEN
            fallback := true;
            EXIT walk;
          END IF;
        END LOOP;
        FOREACH k IN ARRAY hpos LOOP
          lim_room[k] := lim_room[k] - 1;
          lim_rate[k] := lim_rate[k] - 1;
          IF lim_room[k] <= 0 OR lim_rate[k] <= 0 THEN
            exhausted := exhausted || lim_ids[k];
          END IF;
        END LOOP;
        picked := picked || cand_id;
        picked_groups := picked_groups || cand_key;
        got := got + 1;
        -- Served: its turn goes to the back (the served list is in the order
        -- of each group's last service), and its next message is its head
        -- (a strict group's stays the one just picked: it gives nothing more).
        j := array_position(sv_keys, cand_key);
        IF j IS NOT NULL THEN
          sv_keys := sv_keys[:j - 1] || sv_keys[j + 1:];
          sv_ids := sv_ids[:j - 1] || sv_ids[j + 1:];
          sv_prios := sv_prios[:j - 1] || sv_prios[j + 1:];
          sv_keep := sv_keep[:j - 1] || sv_keep[j + 1:];
        END IF;
        sv_keys := sv_keys || cand_key;
        sv_keep := sv_keep || (one_at_a_time AND cand_key <> '');
        sv_ids := sv_ids || NULL::uuid;
        sv_prios := sv_prios || NULL::integer;
        IF one_at_a_time AND cand_key <> '' THEN
          skipped := skipped || cand_key;
        ELSE
          pend_keys := pend_keys || cand_key;
        END IF;
        id := cand_id;
        n := got;
        held := CASE WHEN cardinality(holds) = 0 THEN NULL ELSE holds END;
        RETURN NEXT;
      END LOOP;
    END LOOP;
    IF cardinality(pend_keys) > 0 THEN
      -- The served groups' next heads not read yet: one reading for all.
      SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.priority ORDER BY h.ord), '{}')
      INTO nx_ids, nx_prios FROM agentbus_next_heads(p_channel, pend_keys, p_now, maxd, false, picked) h;
      FOR j IN 1 .. cardinality(pend_keys) LOOP
        k := array_position(sv_keys, pend_keys[j]);
        sv_ids[k] := nx_ids[j];
        sv_prios[k] := nx_prios[j];
      END LOOP;
    END IF;
    -- The served groups, in the order of their last service: one base time
    -- for all (clock_timestamp() per row would move more between rows than
    -- the microsecond steps that give the order).
    served_at := clock_timestamp();
    UPDATE message_groups g SET last_served_at = served_at + make_interval(secs => s.ord / 1000000.0),
      head_id = CASE WHEN s.keep THEN g.head_id ELSE s.head_id END,
      head_priority = CASE WHEN s.keep THEN g.head_priority ELSE s.prio END
    FROM unnest(sv_keys, sv_ids, sv_prios, sv_keep) WITH ORDINALITY AS s(key, head_id, prio, keep, ord)
    WHERE g.channel_id = p_channel AND g.group_key = s.key;
    IF NOT fallback THEN
      RETURN;
    END IF;
  END IF;

  -- How many messages a group may offer per pass: its fair share of what is
  -- wanted (more each pass that falls short), within its bound; one at a
  -- time for strict groups.
  SELECT count(*) INTO ngroups FROM message_groups g WHERE g.channel_id = p_channel;
  loose_per := least(p_wanted, ceil(p_wanted::numeric / greatest(ngroups, 1))::integer + 1);
  per_group := CASE WHEN one_at_a_time THEN 1 ELSE least(loose_per, coalesce(ch.group_concurrency, p_wanted)) END;

  LOOP
    pass := pass + 1;
    progress := false;
    -- The candidates of this pass, each turn's (a group's, or the messages
    -- without a group's) in its order (a_*, by turn and round), and the first
    -- of each turn in delivery order (rd_idx, places in a_*). A turn offers
    -- its next candidate only once the one before is taken: a group's
    -- messages go in posting order whatever their priorities, and each goes
    -- at its own priority when its turn comes, as one receive at a time
    -- would have them (docs/decisions.md#dispatch).
    SELECT coalesce(array_agg(c2.id ORDER BY c2.ix), '{}'), coalesce(array_agg(c2.turn_key ORDER BY c2.ix), '{}'),
           coalesce(array_agg(c2.group_key ORDER BY c2.ix), '{}'), coalesce(array_agg(c2.eff ORDER BY c2.ix), '{}'),
           coalesce(array_agg(c2.created_at ORDER BY c2.ix), '{}'), coalesce(jsonb_agg(to_jsonb(c2.limit_ids) ORDER BY c2.ix), '[]'),
           coalesce(array_agg(c2.round::integer ORDER BY c2.ix), '{}'),
           coalesce(array_agg(c2.turn_key || E'\x01' || c2.round ORDER BY c2.ix), '{}'),
           coalesce(array_agg(c2.cut ORDER BY c2.ix), '{}'),
           coalesce(array_agg(c2.ix::integer ORDER BY c2.eff,
             CASE WHEN ch.dispatch = 'fair' THEN c2.last_served_at END ASC NULLS FIRST,
             CASE WHEN ch.dispatch = 'fair' THEN c2.turn_key END, c2.created_at) FILTER (WHERE c2.first), '{}')
    INTO a_ids, a_keys, a_groups, a_eff, a_created, a_lims, a_round, a_fk, a_cut, rd_idx
    FROM (
      WITH heads AS (
          -- Each group's head: its oldest open message, or with one_at_a_time
          -- groups its oldest unfinished one (open or not).
          SELECT h.*, g.last_served_at, g.group_key AS turn_key
          FROM message_groups g
          CROSS JOIN LATERAL (
            SELECT m.id, m.created_at, m.priority, coalesce(m.available_at, m.created_at) AS since, m.limit_ids, m.group_key,
              ((m.claimed_by_key_id IS NULL OR (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now))
                AND (m.available_at IS NULL OR m.available_at <= p_now)) AS open,
              row_number() OVER (ORDER BY m.created_at) AS round
            FROM messages m
            WHERE m.channel_id = p_channel AND m.group_key = g.group_key
              AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < maxd
              AND m.id <> ALL (picked) AND (one_at_a_time OR (m.id <> ALL (passed) AND NOT (m.limit_ids && exhausted)))
              AND (one_at_a_time OR ((m.claimed_by_key_id IS NULL OR (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now))
                AND (m.available_at IS NULL OR m.available_at <= p_now)))
            ORDER BY m.created_at LIMIT per_group
          ) h
          WHERE grouped AND g.channel_id = p_channel AND g.group_key <> ''
        ), loose AS (
          -- Messages outside the group rules: every message when the channel
          -- has none; else those without a group (in a fair channel, one
          -- turn's worth: they are one group, under '').
          SELECT u.*, (SELECT g.last_served_at FROM message_groups g WHERE g.channel_id = p_channel AND g.group_key = '') AS last_served_at,
            ''::text AS turn_key
          FROM (
            SELECT o.* FROM generate_series(1, 5) lvl CROSS JOIN LATERAL (
              -- The level as a range, not `priority = lvl`: from an equality
              -- the planner knows the priority is fixed, drops it from the
              -- order, and the generic plan walked messages_unclaimed (ordered
              -- by created_at alone) through the whole backlog for every empty
              -- level: 10 ms a pick at 80,000 waiting of one priority
              -- (bench/dispatch.ts with a limit and no priorities). As a range,
              -- only an index by priority gives this order. A channel with
              -- group rules reads its messages without a group from their own
              -- index (messages_open_loose), which a generic plan can use only
              -- when `group_key IS NULL` stands alone, hence two branches;
              -- through messages_open_by_priority it stepped over every
              -- grouped message of the level.
              (SELECT m.id, m.created_at, m.priority, coalesce(m.available_at, m.created_at) AS since, m.limit_ids, m.group_key, true AS open
               FROM messages m
               WHERE NOT grouped AND m.channel_id = p_channel AND m.priority >= lvl AND m.priority <= lvl AND m.claimed_by_key_id IS NULL
                 AND (m.available_at IS NULL OR m.available_at <= p_now) AND m.acknowledged_by = '[]'::jsonb
                 AND m.expires_at > p_now AND m.delivery_count < maxd
                 AND m.id <> ALL (picked) AND m.id <> ALL (passed) AND NOT (m.limit_ids && exhausted)
               ORDER BY m.priority, m.created_at LIMIT p_wanted + 16)
              UNION ALL
              (SELECT m.id, m.created_at, m.priority, coalesce(m.available_at, m.created_at) AS since, m.limit_ids, m.group_key, true AS open
               FROM messages m
               WHERE grouped AND m.group_key IS NULL AND m.channel_id = p_channel AND m.priority >= lvl AND m.priority <= lvl
                 AND m.claimed_by_key_id IS NULL AND (m.available_at IS NULL OR m.available_at <= p_now) AND m.acknowledged_by = '[]'::jsonb
                 AND m.expires_at > p_now AND m.delivery_count < maxd
                 AND m.id <> ALL (picked) AND m.id <> ALL (passed) AND NOT (m.limit_ids && exhausted)
               ORDER BY m.priority, m.created_at LIMIT p_wanted + 16)
            ) o
            UNION ALL
            (SELECT m.id, m.created_at, m.priority, coalesce(m.available_at, m.created_at), m.limit_ids, m.group_key, true
             FROM messages m
             WHERE m.channel_id = p_channel AND m.lease_token IS NOT NULL AND m.lease_expires_at <= p_now
               AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now AND m.delivery_count < maxd
               AND (NOT grouped OR m.group_key IS NULL) AND m.id <> ALL (picked) AND m.id <> ALL (passed)
               AND NOT (m.limit_ids && exhausted)
             ORDER BY m.priority, m.created_at LIMIT p_wanted + 16)
          ) u
        ), loose_ranked AS (
          SELECT l.id, l.created_at, l.priority, l.since, l.limit_ids, l.group_key, l.open,
            row_number() OVER (ORDER BY greatest(1, l.priority - CASE WHEN ch.priority_aging_seconds IS NULL THEN 0
                     ELSE floor(extract(epoch FROM p_now - l.since) / ch.priority_aging_seconds)::integer END), l.created_at) AS round,
            l.last_served_at, l.turn_key
          FROM loose l
        ), loose_turn AS (
          SELECT * FROM loose_ranked r WHERE r.round <= CASE WHEN ch.dispatch = 'fair' THEN loose_per ELSE p_wanted + 16 END
        )
        , ranked AS (
        SELECT a.*, greatest(1, a.priority - CASE WHEN ch.priority_aging_seconds IS NULL THEN 0
                 ELSE floor(extract(epoch FROM p_now - a.since) / ch.priority_aging_seconds)::integer END) AS eff
        FROM (SELECT * FROM heads UNION ALL SELECT * FROM loose_turn) a
        WHERE a.open
      ), turns AS (
        SELECT r.*, row_number() OVER (PARTITION BY r.turn_key ORDER BY r.round) AS pos,
          count(*) OVER (PARTITION BY r.turn_key) AS read_n
        FROM ranked r
      )
      SELECT t.id, t.turn_key, t.group_key, t.eff, t.created_at, t.limit_ids, t.pos AS round, t.last_served_at, t.pos = 1 AS first,
        -- The turn's last candidate read, where more may wait unread.
        t.pos = t.read_n AND t.read_n >= CASE WHEN t.turn_key <> '' THEN per_group
          WHEN ch.dispatch = 'fair' THEN loose_per ELSE p_wanted + 16 END AS cut,
        row_number() OVER (ORDER BY t.turn_key, t.pos) AS ix
      FROM turns t
    ) c2;
    ri := 1;
    q_idx := '{}';
    q_seq := '{}';
    dead_keys := '{}';
    LOOP
      EXIT WHEN got >= p_wanted;
      WHILE ri <= cardinality(rd_idx) AND a_keys[rd_idx[ri]] = ANY (dead_keys) LOOP
        ri := ri + 1;
      END LOOP;
      -- The most urgent next candidate of a turn taken in this pass: fair,
      -- the turn taken first (it was served least recently); fifo, the oldest.
      q := 0;
      FOR j IN 1 .. cardinality(q_idx) LOOP
        ax := q_idx[j];
        CONTINUE WHEN ax IS NULL OR a_keys[ax] = ANY (dead_keys);
        IF q = 0 OR a_eff[ax] < a_eff[q_idx[q]] OR (a_eff[ax] = a_eff[q_idx[q]]
            AND CASE WHEN ch.dispatch = 'fair' THEN q_seq[j] < q_seq[q] ELSE a_created[ax] < a_created[q_idx[q]] END) THEN
          q := j;
        END IF;
      END LOOP;
      -- Against the first turn not taken yet: at one priority, fair gives it
      -- the turn (served less recently than any taken now), fifo the older.
      IF q > 0 AND (ri > cardinality(rd_idx) OR a_eff[q_idx[q]] < a_eff[rd_idx[ri]] OR (a_eff[q_idx[q]] = a_eff[rd_idx[ri]]
          AND ch.dispatch <> 'fair' AND a_created[q_idx[q]] < a_created[rd_idx[ri]])) THEN
        ax := q_idx[q];
        q_idx[q] := NULL;
      ELSIF ri <= cardinality(rd_idx) THEN
        ax := rd_idx[ri];
        ri := ri + 1;
      ELSE
        EXIT;
      END IF;
      cand_key := a_keys[ax];
      cand_id := a_ids[ax];
      cand_group := a_groups[ax];
      -- A one_at_a_time group's head passed over for its limits holds its group back.
      CONTINUE WHEN cand_id = ANY (passed);
      -- A group at its bound gives nothing more.
      IF ch.group_concurrency IS NOT NULL AND cand_group IS NOT NULL THEN
        IF NOT group_n ? cand_group THEN
          SELECT count(*) INTO busy FROM messages m
          WHERE m.channel_id = p_channel AND m.group_key = cand_group AND m.claimed_by_key_id IS NOT NULL
            AND m.acknowledged_by = '[]'::jsonb AND m.expires_at > p_now
            AND NOT (m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= p_now);
          -- And what the fair walk picked before it handed over.
          group_n := group_n || jsonb_build_object(cand_group, busy + cardinality(array_positions(picked_groups, cand_group)));
        END IF;
        IF (group_n ->> cand_group)::integer >= ch.group_concurrency THEN
          dead_keys := dead_keys || cand_key;
          CONTINUE;
        END IF;
      END IF;
      -- Its limits: the channel's and its own; each must have room.
      IF jsonb_array_length(a_lims -> (ax - 1)) = 0 THEN
        holds := ch_holds;
        hpos := ch_hpos;
      ELSE
        holds := ARRAY(SELECT DISTINCT y FROM unnest(ch.limit_ids || ARRAY(SELECT jsonb_array_elements_text(a_lims -> (ax - 1))::uuid)) y
                       WHERE y = ANY (lim_ids) ORDER BY y);
        hpos := ARRAY(SELECT array_position(lim_ids, y) FROM unnest(holds) y);
      END IF;
      ok := true;
      FOREACH k IN ARRAY hpos LOOP
        IF lim_room[k] <= 0 OR lim_rate[k] <= 0 THEN
          ok := false;
        END IF;
      END LOOP;
      IF NOT ok THEN
        passed := passed || cand_id;
        -- The next pass reads past it (a strict group's head still holds its group back).
        progress := progress OR NOT (one_at_a_time AND cand_group IS NOT NULL);
        IF NOT (one_at_a_time AND cand_group IS NOT NULL) THEN
          -- Its turn offers the next one, as a turn not taken yet.
          j := array_position(a_fk, cand_key || E'\x01' || (a_round[ax] + 1));
          IF j IS NOT NULL THEN
            q_idx := q_idx || j;
            q_seq := q_seq || 0;
          ELSIF a_cut[ax] THEN
            EXIT;
          END IF;
        END IF;
        CONTINUE;
      END IF;
      FOREACH k IN ARRAY hpos LOOP
        lim_room[k] := lim_room[k] - 1;
        lim_rate[k] := lim_rate[k] - 1;
        IF lim_room[k] <= 0 OR lim_rate[k] <= 0 THEN
          exhausted := exhausted || lim_ids[k];
        END IF;
      END LOOP;
      IF cand_group IS NOT NULL AND ch.group_concurrency IS NOT NULL THEN
        group_n := group_n || jsonb_build_object(cand_group, (group_n ->> cand_group)::integer + 1);
      END IF;
      IF ch.dispatch = 'fair' THEN
        UPDATE message_groups g SET last_served_at = clock_timestamp()
        WHERE g.channel_id = p_channel AND g.group_key = cand_key;
      END IF;
      picked := picked || cand_id;
      got := got + 1;
      progress := true;
      id := cand_id;
      n := got;
      held := CASE WHEN cardinality(holds) = 0 THEN NULL ELSE holds END;
      RETURN NEXT;
      IF NOT (one_at_a_time AND cand_group IS NOT NULL) THEN
        -- Its turn's next candidate; where more wait unread, the next pass
        -- reads them (its turn may come before the rest of this pass).
        j := array_position(a_fk, cand_key || E'\x01' || (a_round[ax] + 1));
        IF j IS NOT NULL THEN
          q_idx := q_idx || j;
          q_seq := q_seq || got;
        ELSIF a_cut[ax] THEN
          EXIT;
        END IF;
      END IF;
    END LOOP;
    EXIT WHEN got >= p_wanted OR NOT progress OR pass >= 64;
    loose_per := least(p_wanted, loose_per * 2);
    IF NOT one_at_a_time THEN
      per_group := least(p_wanted, coalesce(ch.group_concurrency, p_wanted), per_group * 2);
    END IF;
  END LOOP;
END;
$$;
