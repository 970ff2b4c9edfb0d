/**
 * The receive statements (docs/decisions.md#receive, #dispatch): the plain
 * one, and the pick and lease of a channel whose work is dispatched by
 * group, turn, aging or shared limits. Exported so that the query-plan tests
 * EXPLAIN exactly what runs.
 */
import { COLUMNS, AVAILABLE, LAPSED, NOT_ACKNOWLEDGED } from "./message-rows.js";

/**
 * The receives of one statement (parameters $3..$7, $9), each with where its
 * lease tokens and its share of the picked rows start; only those whose key
 * may use the channel (CTE claimable) take a share.
 */
const RECEIVERS = `asked AS (
    SELECT r.*, sum(r.n) OVER (ORDER BY r.ord) - r.n AS tokens_before
    FROM unnest($3::text[], $4::uuid[], $5::text[], $6::int[], $7::timestamptz[], $9::jsonb[])
      WITH ORDINALITY AS r(key_id, actor_id, actor_name, n, lease_expires_at, claim_metadata, ord)
  ), allowed AS (
    SELECT a.*, sum(a.n) OVER (ORDER BY a.ord) - a.n AS share_before
    FROM asked a, claimable k
    WHERE k.access = 'open' OR k.created_by_key_id = a.key_id
      OR EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = k.id AND cm.key_id = a.key_id)
  )`;

/**
 * Receive: leases the channel's oldest open work to its callers, each
 * taking its share in order (one statement serves the receives the process
 * queued meanwhile). $1 channel, $2 now; one item per receive in parallel
 * arrays: $3 key, $4 actor id, $5 actor name, $6 max messages, $7 lease end;
 * $8 the lease tokens of all of them, each receive's max in its order (nulls: plain claims);
 * $9 each receive's claim metadata (null for none).
 *
 * Each branch walks its own partial index (open work: messages_unclaimed;
 * lapsed leases: messages_leases) and locks what it takes with SKIP LOCKED,
 * so concurrent receivers pass over each other's rows instead of queueing
 * behind them, and a row a concurrent claim changed is re-checked against
 * its committed version before it is locked: a message is never leased
 * twice. Locking needs a plain SELECT (not UNION), hence one CTE per branch;
 * a lapsed row locked but not picked is only held until this statement
 * commits. The picked rows are numbered oldest first and dealt out in
 * ranges: the first receive gets 1..max₁, the next the range after, so an
 * earlier receive is never left short while a later one is served. The
 * delivery is counted in the same UPDATE; a message delivered
 * max_deliveries times is not a candidate (deadLetter() moves it out). The
 * channel's mode and each caller's access are part of the condition, as for
 * claims: a receive that long-polls re-checks them on every try, and a
 * caller who lost access meanwhile takes no share. RETURNING gives each
 * row's receive (1-based).
 */
export const RECEIVE_SQL = `WITH claimable AS (
    SELECT k.id, k.access, k.created_by_key_id, coalesce(k.max_deliveries, 2147483647) AS max_deliveries FROM channels k
    WHERE k.id = $1 AND k.mode = 'claimable'
      -- Bounds only the pick keeps: a view that has not seen them yet leases nothing here.
      AND k.group_concurrency IS NULL AND k.limit_ids = '{}' AND NOT k.limited_messages
  ), ${RECEIVERS}, wanted AS (
    SELECT coalesce(sum(n), 0)::int AS n FROM allowed
  ), open_work AS (
    SELECT m.id, m.created_at, m.priority FROM messages m
    WHERE m.channel_id = (SELECT id FROM claimable) AND m.claimed_by_key_id IS NULL AND m.expires_at > $2 AND ${AVAILABLE("$2")}
      AND ${NOT_ACKNOWLEDGED} AND m.delivery_count < (SELECT max_deliveries FROM claimable)
    ORDER BY m.priority, m.created_at LIMIT (SELECT n FROM wanted) FOR UPDATE SKIP LOCKED
  ), lapsed AS (
    SELECT m.id, m.created_at, m.priority FROM messages m
    WHERE m.channel_id = (SELECT id FROM claimable) AND m.lease_token IS NOT NULL AND ${LAPSED("$2")} AND m.expires_at > $2
      AND m.delivery_count < (SELECT max_deliveries FROM claimable)
    ORDER BY m.priority, m.created_at LIMIT (SELECT n FROM wanted) FOR UPDATE SKIP LOCKED
  ), picked AS (
    SELECT w.id, row_number() OVER (ORDER BY w.priority, w.created_at) AS n
    FROM (SELECT * FROM open_work UNION ALL SELECT * FROM lapsed) w ORDER BY w.priority, w.created_at LIMIT (SELECT n FROM wanted)
  )
  UPDATE messages m SET claimed_by_key_id = a.key_id, claimed_by_actor_id = a.actor_id, claimed_by_actor_name = a.actor_name, claimed_at = $2,
    claim_metadata = a.claim_metadata, lease_token = ($8::text[])[a.tokens_before + p.n - a.share_before], lease_expires_at = a.lease_expires_at,
    delivery_count = m.delivery_count + 1
  FROM picked p JOIN allowed a ON p.n > a.share_before AND p.n <= a.share_before + a.n
  WHERE m.id = p.id
  RETURNING a.ord, p.n AS pick, ${COLUMNS}`;

/**
 * Receive on a channel whose work is dispatched by group, turn, aging or
 * shared limits, in one statement: agentbus_pick chooses for the receives
 * ($1 channel, $2 now; the receives as for RECEIVE_SQL, $3..$9; a key that
 * may not use the channel wants none), each row with the limits it will
 * hold, and the UPDATE leases them as RECEIVE_SQL leases its own, checking
 * each row again (a claim by id does not take the pick's locks). The pick's
 * statements see rows the UPDATE's snapshot, taken before them, does not: a
 * message posted in between is picked and not leased (a row changed in
 * between is read again as it is updated); the rated limits count the
 * leased rows only. Every row of the answer carries
 * the picked ids the UPDATE did not lease (unleased), and one row with no
 * message comes when it leased nothing; the caller gives those back
 * (UNPICKED_SQL). One statement is one round trip and no transaction of the
 * caller's: the pick holds its channel's lock for that much less.
 */
export const PICK_AND_LEASE_SQL = `WITH claimable AS (
    SELECT k.id, k.access, k.created_by_key_id FROM channels k WHERE k.id = $1 AND k.mode = 'claimable'
  ), ${RECEIVERS}, pick AS MATERIALIZED (
    SELECT p.id, p.n, coalesce(p.held, '{}') AS held FROM agentbus_pick($1, $2, (SELECT coalesce(sum(a.n), 0)::int FROM allowed a)) p
  ), locked AS (
    -- In id order, passing over rows another transaction holds (an ack of a
    -- lapsed one, say): waiting here, under the channel's and the limits'
    -- locks, could deadlock with it.
    SELECT m.id FROM messages m WHERE m.id = ANY (ARRAY(SELECT p.id FROM pick p)) ORDER BY m.id FOR UPDATE SKIP LOCKED
  ), leased AS (
    UPDATE messages m SET claimed_by_key_id = a.key_id, claimed_by_actor_id = a.actor_id, claimed_by_actor_name = a.actor_name, claimed_at = $2,
      claim_metadata = a.claim_metadata, lease_token = ($8::text[])[a.tokens_before + p.n - a.share_before], lease_expires_at = a.lease_expires_at,
      delivery_count = m.delivery_count + 1, held_limit_ids = CASE WHEN cardinality(p.held) = 0 THEN NULL ELSE p.held END
    FROM pick p JOIN locked l ON l.id = p.id JOIN allowed a ON p.n > a.share_before AND p.n <= a.share_before + a.n
    WHERE m.id = p.id AND ${NOT_ACKNOWLEDGED} AND m.expires_at > $2
      AND (m.claimed_by_key_id IS NULL OR ${LAPSED("$2")})
    RETURNING a.ord, p.n AS pick, ${COLUMNS}
  ), counted AS (
    -- The deliveries of the rated limits, in their second: the leased ones
    -- only, under the limits' locks the pick took (a picked row the UPDATE
    -- did not lease is not a delivery).
    INSERT INTO limit_deliveries AS d (limit_id, delivered_at, n)
    SELECT x.limit_id, date_trunc('second', $2::timestamptz), count(*)::int
    FROM leased l JOIN pick p ON p.id = l.id CROSS JOIN LATERAL unnest(p.held) AS x(limit_id)
    JOIN limits r ON r.id = x.limit_id AND r.rate_count IS NOT NULL
    GROUP BY x.limit_id
    ON CONFLICT (limit_id, delivered_at) DO UPDATE SET n = d.n + excluded.n
  )
  SELECT l.*, u.unleased
  FROM (SELECT ARRAY(SELECT p.id FROM pick p WHERE p.id NOT IN (SELECT x.id FROM leased x)) AS unleased) u
  LEFT JOIN leased l ON true`;

/**
 * The groups of picked messages the lease passed over ($1 channel, $2 their
 * ids): their kept heads (agentbus_pick's fair walk) are read again by the
 * next pick.
 */
export const UNPICKED_SQL = `UPDATE message_groups g SET stale = true
  FROM messages m WHERE m.id = ANY ($2::uuid[]) AND g.channel_id = $1 AND g.group_key = coalesce(m.group_key, '')`;
