/**
 * The statements that read live messages without changing them: the lists,
 * when open work next falls due, the dead letters redrive may move, and the
 * queue state. Exported so the query-plan tests EXPLAIN exactly what runs.
 */
import type { ListFilter } from "../model/messages.js";
import { AVAILABLE, COLUMNS, LAPSED, NOT_ACKNOWLEDGED } from "./message-rows.js";

/**
 * Unclaimed messages: two index range scans (open work, and lapsed leases)
 * merged, rather than one scan that steps over every claimed message on the
 * way; `openWork` narrows the first (e.g. to the unacknowledged).
 */
function unclaimedSql(openWork: string): string {
  return `SELECT * FROM (
      (SELECT ${COLUMNS} FROM messages m
       WHERE m.channel_id = $1 AND m.created_at > $2 AND m.claimed_by_key_id IS NULL AND m.expires_at > $4 AND ${AVAILABLE("$4")}
         ${openWork}
       ORDER BY m.created_at LIMIT $3)
      UNION ALL
      (SELECT ${COLUMNS} FROM messages m
       WHERE m.channel_id = $1 AND m.lease_token IS NOT NULL AND ${LAPSED("$4")} AND m.created_at > $2 AND m.expires_at > $4
       ORDER BY m.created_at LIMIT $3)
    ) m ORDER BY m.created_at LIMIT $3`;
}

/**
 * The lists, exported so the query-plan tests EXPLAIN exactly what runs.
 * Parameters: $1 channel, $2 since, $3 limit, $4 now.
 */
export const LIST_SQL: Record<ListFilter, string> = {
  all: `SELECT ${COLUMNS} FROM messages m
    WHERE m.channel_id = $1 AND m.created_at > $2 AND m.expires_at > $4
    ORDER BY m.created_at LIMIT $3`,
  unclaimed: unclaimedSql(""),
  claimed: `SELECT ${COLUMNS} FROM messages m
    WHERE m.channel_id = $1 AND m.created_at > $2 AND m.expires_at > $4
      AND m.claimed_by_key_id IS NOT NULL AND NOT ${LAPSED("$4")}
    ORDER BY m.created_at LIMIT $3`,
  // status=unclaimed of a claimable channel: the open work a receive could
  // lease, i.e. unclaimed and not acknowledged by anyone.
  open: unclaimedSql(`AND ${NOT_ACKNOWLEDGED}`),
};

/**
 * $1 channel, $2 now: the next moment open work appears in the channel with
 * no write to announce it: the earliest available_at still ahead among its
 * delayed open work (through messages_delayed; rows whose delay passed stay
 * in that index, as available_at is not cleared, and the range condition
 * steps over them), or the earliest end of a running lease (through
 * messages_leases, which holds only the work in flight: an ack drops the
 * lease). Null when neither is pending. Expiry is not checked: it would lead
 * the planner to the expiry index, and a message that expires first costs
 * its waiters one empty re-read at most.
 */
export const NEXT_DUE_SQL = `SELECT least(
    (SELECT m.available_at FROM messages m
     WHERE m.channel_id = $1 AND m.available_at IS NOT NULL AND m.claimed_by_key_id IS NULL AND m.available_at > $2 AND ${NOT_ACKNOWLEDGED}
     ORDER BY m.available_at LIMIT 1),
    (SELECT min(m.lease_expires_at) FROM messages m
     WHERE m.channel_id = $1 AND m.lease_token IS NOT NULL AND m.lease_expires_at > $2)
  ) AS available_at`;

/**
 * $1 dead-letter channel, $2 after (created_at, exclusive), $3 limit, $4 now:
 * its dead letters that redrive may move, oldest first. Only ones the service
 * dead-lettered (the dead_letter column; a client's metadata is never read
 * for it), whose origin the dead-letter channel's owner still owns, that
 * nobody holds (unclaimed, or the lease lapsed) and nobody acknowledged.
 * created_at is unique within a channel, so it is the cursor.
 */
export const REDRIVE_CANDIDATES_SQL = `SELECT m.id, m.created_at, m.metadata, o.id AS origin_channel_id
  FROM messages m
  JOIN channels d ON d.id = m.channel_id
  JOIN channels o ON o.id = (m.dead_letter ->> 'origin_channel_id')::uuid AND o.created_by_key_id = d.created_by_key_id AND o.id <> d.id
  WHERE m.channel_id = $1 AND m.created_at > $2 AND m.dead_letter IS NOT NULL AND m.expires_at > $4 AND ${NOT_ACKNOWLEDGED}
    AND (m.claimed_by_key_id IS NULL OR (m.lease_token IS NOT NULL AND m.lease_expires_at <= $4))
  ORDER BY m.created_at LIMIT $3`;

/**
 * $1 channel, $2 now: the queue state (docs/decisions.md#queue-stats) in one
 * pass over the channel's live messages (messages_channel_order) and one
 * count of its dead letters in history (message_history_by_channel). Each
 * live message gets one state, decided in the order the receive statement
 * would: acknowledged, held (claimed, lease not lapsed), past max_deliveries,
 * not due, else ready. A broadcast channel has no claims or delivery limit.
 * Expiry is a state too, not a condition: as a condition, the generic plan
 * would range over the expiry index, through every channel's live messages.
 */
export const STATS_SQL = `WITH k AS (
    SELECT c.mode = 'claimable' AS claimable, coalesce(c.max_deliveries, 2147483647) AS max_deliveries FROM channels c WHERE c.id = $1
  ), live AS MATERIALIZED (
    SELECT m.claimed_at, coalesce(m.available_at, m.created_at) AS available_since, m.group_key, m.priority,
      (m.acknowledged_by->0->>'occurred_at')::timestamptz AS first_ack_at, m.acknowledged_by <> '[]'::jsonb AS acknowledged,
      CASE
        WHEN m.acknowledged_by <> '[]'::jsonb AND m.expires_at > $2 THEN 'acknowledged'
        WHEN m.cancel_requested_at IS NOT NULL AND (m.expires_at <= $2 OR m.claimed_by_key_id IS NULL OR ${LAPSED("$2")})
          AND m.acknowledged_by = '[]'::jsonb THEN 'cancelled'
        WHEN m.expires_at <= $2 THEN 'expired'
        WHEN m.blocked_by > 0 THEN 'blocked'
        WHEN k.claimable AND m.claimed_by_key_id IS NOT NULL AND NOT ${LAPSED("$2")} THEN 'in_flight'
        WHEN k.claimable AND m.delivery_count >= k.max_deliveries THEN 'dead_lettered'
        WHEN NOT ${AVAILABLE("$2")} AND m.waitpoint_id IS NOT NULL AND m.waitpoint_outcome IS NULL THEN 'waiting'
        WHEN NOT ${AVAILABLE("$2")} THEN 'delayed'
        ELSE 'ready'
      END AS state
    FROM messages m, k WHERE m.channel_id = $1
  ), archived AS (
    -- History's dead letters and its unacknowledged expired messages, in one
    -- pass (message_history_by_channel).
    SELECT count(*) FILTER (WHERE h.reason = 'dead_lettered') AS dead_lettered,
      count(*) FILTER (WHERE h.reason = 'expired' AND h.acknowledged_by = '[]'::jsonb AND h.cancel_requested_at IS NULL) AS expired,
      count(*) FILTER (WHERE h.acknowledged_by = '[]'::jsonb AND h.cancel_requested_at IS NOT NULL) AS cancelled
    FROM message_history h WHERE h.channel_id = $1
  ), groups_live AS (
    SELECT l.group_key, count(*) FILTER (WHERE l.state = 'ready')::int AS ready, count(*) FILTER (WHERE l.state = 'in_flight')::int AS in_flight,
      (extract(epoch FROM min(l.available_since) FILTER (WHERE l.state = 'ready')) * 1000000)::bigint AS oldest_ready_since
    FROM live l WHERE l.group_key IS NOT NULL AND l.state IN ('ready', 'delayed', 'in_flight') GROUP BY l.group_key
  )
  SELECT
    count(*) FILTER (WHERE state = 'ready')::int AS ready,
    count(*) FILTER (WHERE state = 'delayed')::int AS delayed,
    count(*) FILTER (WHERE state = 'blocked')::int AS blocked,
    count(*) FILTER (WHERE state = 'waiting')::int AS waiting,
    count(*) FILTER (WHERE state = 'in_flight')::int AS in_flight,
    count(*) FILTER (WHERE state = 'acknowledged')::int AS acknowledged,
    (count(*) FILTER (WHERE state = 'dead_lettered') + (SELECT h.dead_lettered FROM archived h))::int AS dead_lettered,
    (count(*) FILTER (WHERE state = 'expired' AND NOT acknowledged) + (SELECT h.expired FROM archived h))::int AS expired,
    (count(*) FILTER (WHERE state = 'cancelled') + (SELECT h.cancelled FROM archived h))::int AS cancelled,
    min(available_since) FILTER (WHERE state = 'ready') AS oldest_ready_since,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM first_ack_at - claimed_at) * 1000)
      FILTER (WHERE state = 'acknowledged' AND claimed_at IS NOT NULL AND first_ack_at IS NOT NULL) AS claim_to_ack_p50_ms,
    avg(extract(epoch FROM first_ack_at - claimed_at) * 1000)
      FILTER (WHERE state = 'acknowledged' AND claimed_at IS NOT NULL AND first_ack_at IS NOT NULL)::float8 AS claim_to_ack_avg_ms,
    count(*) FILTER (WHERE state NOT IN ('expired', 'cancelled'))::int AS live,
    ARRAY[
      count(*) FILTER (WHERE state = 'ready' AND priority = 1)::int,
      count(*) FILTER (WHERE state = 'ready' AND priority = 2)::int,
      count(*) FILTER (WHERE state = 'ready' AND priority = 3)::int,
      count(*) FILTER (WHERE state = 'ready' AND priority = 4)::int,
      count(*) FILTER (WHERE state = 'ready' AND priority = 5)::int
    ] AS ready_by_priority,
    CASE WHEN (SELECT claimable FROM k) THEN (
      SELECT jsonb_build_object('count', count(*), 'in_flight', coalesce(sum(g.in_flight), 0),
        'top', coalesce((SELECT jsonb_agg(t ORDER BY t.ready DESC, t.group_key) FROM (
          SELECT * FROM groups_live x ORDER BY x.ready DESC, x.group_key LIMIT 10) t), '[]'::jsonb))
      FROM groups_live g
    ) END AS groups
  FROM live`;
