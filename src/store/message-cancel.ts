/**
 * Cancelling a message (docs/decisions.md#cancel), as one statement:
 * exported so the query-plan tests can EXPLAIN exactly what runs.
 */
import { COLUMNS, LAPSED, NOT_ACKNOWLEDGED } from "./message-rows.js";

/** Held by a claim that still holds: claimed, and no lease that ran out. */
const HELD = (now: string) => `(m.claimed_by_key_id IS NOT NULL AND NOT ${LAPSED(now)})`;

/**
 * How far back a cancel sets an open message's expiry: every delivery
 * statement passes over expired rows, and a receive on another process may
 * run on a clock a little behind this one's.
 */
export const CANCEL_CLOCK_MARGIN_SECONDS = 2;

/** The expiry of message m cancelled at `now` (not held): that moment less the margin, or its own if sooner. */
export const EXPIRED_BY_CANCEL = (now: string) => `least(m.expires_at, ${now}::timestamptz - make_interval(secs => ${CANCEL_CLOCK_MARGIN_SECONDS}))`;

/**
 * $1 message, $2 now, $3 reason (null: none): marks the message cancelled.
 * Open (ready, delayed, or a lapsed claim): expired now, so nothing delivers
 * it again. Held: expired when its lease ends (lapse and expiry are one
 * moment on every clock), so its holder may finish and acknowledge it; a
 * heartbeat moves both, a release ends both. A second cancel of a held
 * message changes nothing but answers it. The expiry before the cancel is
 * kept (cancel_expires_at), for an acknowledgement to restore. The row's
 * current version is judged (READ COMMITTED re-checks the WHERE after an ack
 * or a receive that locked it first), so a cancel racing an ack either
 * finds it acknowledged (no row) or marks it before the ack lands.
 */
export const CANCEL_SQL = `UPDATE messages m SET
    cancel_requested_at = coalesce(m.cancel_requested_at, $2::timestamptz),
    cancel_reason = CASE WHEN m.cancel_requested_at IS NULL THEN $3::text ELSE m.cancel_reason END,
    cancel_expires_at = coalesce(m.cancel_expires_at, m.expires_at),
    expires_at = CASE WHEN ${HELD("$2")} THEN least(m.expires_at, coalesce(m.lease_expires_at, m.expires_at))
      ELSE ${EXPIRED_BY_CANCEL("$2")} END,
    held_limit_ids = CASE WHEN ${HELD("$2")} THEN m.held_limit_ids END
  WHERE m.id = $1 AND ${NOT_ACKNOWLEDGED} AND m.expires_at > $2
    AND (${HELD("$2")} OR m.delivery_count < (SELECT coalesce(k.max_deliveries, 2147483647) FROM channels k WHERE k.id = m.channel_id))
  RETURNING ${COLUMNS}`;
