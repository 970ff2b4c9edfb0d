/**
 * The statements that take, give back, extend and finish claims on single
 * messages (docs/decisions.md#receive for the receives: receive-sql.ts).
 * Exported so the query-plan tests EXPLAIN exactly what runs.
 */
import { EXPIRED_BY_CANCEL } from "./message-cancel.js";
import { AVAILABLE, COLUMNS, LAPSED, NOT_ACKNOWLEDGED, accessible } from "./message-rows.js";

/** $1 message, $2 key, $3 actor id, $4 actor name, $5 now, $6 claim metadata, $7 lease token, $8 lease end. */
export const CLAIM_SQL = `UPDATE messages m SET claimed_by_key_id = $2, claimed_by_actor_id = $3, claimed_by_actor_name = $4, claimed_at = $5,
    claim_metadata = $6, lease_token = $7, lease_expires_at = $8, delivery_count = m.delivery_count + 1
  WHERE m.id = $1 AND m.expires_at > $5 AND ${AVAILABLE("$5")} AND ${NOT_ACKNOWLEDGED}
    AND (m.claimed_by_key_id IS NULL OR ${LAPSED("$5")})
    AND EXISTS (SELECT 1 FROM channels k WHERE k.id = m.channel_id AND k.mode = 'claimable'
      AND m.delivery_count < coalesce(k.max_deliveries, 2147483647)
      -- Group bounds and limits are kept by receives alone (docs/decisions.md#message-groups).
      AND k.group_concurrency IS NULL AND k.limit_ids = '{}' AND NOT k.limited_messages)
    AND ${accessible("$2")}
  RETURNING ${COLUMNS}`;

/**
 * Acknowledges many messages, each for its own caller (one statement serves
 * the acks the process queued meanwhile, and a batch ack's ids): parallel
 * arrays, one item per message, $1 message ids (distinct), $2 keys, $3 actor
 * ids, $4 actor names, $5 nows, $6 results (null for none), $7 the acks'
 * metadata. Each item appends its actor to acknowledged_by unless it is
 * already there, under the single ack's rules: the caller may use the
 * channel, and a result is stored only while there is none and, in a
 * claimable channel, only from the holder of a claim that still holds
 * (docs/decisions.md#results). An acknowledged message can no longer lapse
 * back to open work, so its lease is dropped. The rows are locked first, in
 * id order whatever order the items came in (a scan's own order is physical,
 * which updates change): so batches that overlap (readers of a broadcast
 * channel acknowledging the same page) cannot deadlock. RETURNING gives each
 * acknowledged item's position (1-based); an item left out changed nothing.
 */
export const ACK_SQL = `UPDATE messages m SET acknowledged_by = m.acknowledged_by
      || jsonb_build_array(jsonb_build_object('id', a.actor_id, 'name', a.actor_name, 'occurred_at', a.occurred_at, 'metadata', a.metadata)),
    result = coalesce(a.result, m.result), lease_token = NULL, lease_expires_at = NULL, held_limit_ids = NULL,
    -- Finished work keeps its own expiry, which a cancel had cut to the lease's end (docs/decisions.md#cancel).
    expires_at = coalesce(m.cancel_expires_at, m.expires_at)
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[])
    WITH ORDINALITY AS a(id, key_id, actor_id, actor_name, occurred_at, result, metadata, ord)
  WHERE m.id = a.id AND m.id IN (SELECT l.id FROM messages l WHERE l.id = ANY($1::uuid[]) ORDER BY l.id FOR NO KEY UPDATE OF l)
    AND m.expires_at > a.occurred_at::timestamptz
    AND NOT m.acknowledged_by @> jsonb_build_array(jsonb_build_object('id', a.actor_id))
    AND ${accessible("a.key_id")}
    AND (a.result IS NULL OR (m.result IS NULL AND (
      NOT EXISTS (SELECT 1 FROM channels k WHERE k.id = m.channel_id AND k.mode = 'claimable')
      OR (m.claimed_by_key_id = a.key_id AND m.claimed_by_actor_id::text = a.actor_id AND NOT ${LAPSED("a.occurred_at::timestamptz")}))))
  RETURNING a.ord, ${COLUMNS}`;

/**
 * The SET items of every statement that gives a claim back (release, a
 * receive's undelivered leases, a release to wait for a waitpoint), `now`
 * their time: nobody holds it, and a cancelled message is cancelled now,
 * not open work (docs/decisions.md#cancel). One list, so a claim column
 * added later is cleared by all of them.
 */
export const GIVEN_BACK = (now: string) => `claimed_by_key_id = NULL, claimed_by_actor_id = NULL, claimed_by_actor_name = NULL,
    claimed_at = NULL, claim_metadata = NULL, lease_token = NULL, lease_expires_at = NULL, held_limit_ids = NULL,
    expires_at = CASE WHEN m.cancel_requested_at IS NULL THEN m.expires_at ELSE ${EXPIRED_BY_CANCEL(now)} END`;

/**
 * The conditions of a release of message m ($1) by key $2 and actor $3 at
 * $4: they hold its live claim, and its channel, which the key may use, is
 * a work queue.
 */
export const RELEASABLE = `m.id = $1 AND m.claimed_by_key_id = $2 AND m.claimed_by_actor_id = $3 AND m.expires_at > $4 AND NOT ${LAPSED("$4")}
    AND ${NOT_ACKNOWLEDGED}
    AND EXISTS (SELECT 1 FROM channels k WHERE k.id = m.channel_id AND k.mode = 'claimable')
    AND ${accessible("$2")}`;

/**
 * $1 message, $2 key, $3 actor id, $4 now, $5 available_at (null: as it was),
 * $6 priority (null: as it was): clears the claim when this key and actor
 * hold it; a cancelled message expires with it.
 */
export const RELEASE_SQL = `UPDATE messages m SET ${GIVEN_BACK("$4")},
    available_at = coalesce($5::timestamptz, m.available_at), priority = coalesce($6::smallint, m.priority),
    -- Its holder has seen how a waitpoint it waited for ended: a plain release ends the wait (docs/decisions.md#waitpoints).
    waitpoint_id = NULL, waitpoint_outcome = NULL
  WHERE ${RELEASABLE}
  RETURNING ${COLUMNS}`;

/**
 * $1 message ids, $2 their lease tokens, $3 key, $4 now: gives back leases
 * their receive never delivered (the delivery is not counted); one cancelled
 * meanwhile is cancelled now, as on a release.
 */
export const RELEASE_UNSEEN_SQL = `UPDATE messages m SET ${GIVEN_BACK("$4")},
    delivery_count = greatest(m.delivery_count - 1, 0)
  FROM unnest($1::uuid[], $2::text[]) AS l(id, token)
  WHERE m.id = l.id AND m.lease_token = l.token AND m.claimed_by_key_id = $3 AND m.expires_at > $4 AND ${NOT_ACKNOWLEDGED}`;

/**
 * $1 lease token, $2 key, $3 new lease end, $4 now: extends a live lease
 * held by this key. A lease holding limits is live only while no receive
 * has counted it out as lapsed (limits.lapses_counted_until, by that
 * receive's clock): its unit may be another message's by then. The limits
 * are locked (shared) first, so a receive counting them right now is
 * waited for and read.
 */
export const HEARTBEAT_SQL = `WITH held AS MATERIALIZED (
    SELECT l.lapses_counted_until FROM limits l
    WHERE l.id = ANY (ARRAY(SELECT unnest(x.held_limit_ids) FROM messages x WHERE x.lease_token = $1))
    -- In id order, as a receive locks them: two limits taken the other way round could deadlock with it.
    ORDER BY l.id FOR SHARE
  )
  UPDATE messages m SET lease_expires_at = $3,
    -- A cancelled message expires with its lease (docs/decisions.md#cancel).
    expires_at = CASE WHEN m.cancel_requested_at IS NULL THEN m.expires_at ELSE $3 END
  WHERE m.lease_token = $1 AND m.claimed_by_key_id = $2 AND m.lease_expires_at > $4 AND m.expires_at > $4
    AND NOT EXISTS (SELECT 1 FROM held h WHERE h.lapses_counted_until >= m.lease_expires_at)
  RETURNING m.lease_token, m.lease_expires_at, m.cancel_requested_at IS NOT NULL AS cancel_requested`;
