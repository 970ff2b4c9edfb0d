/**
 * Dependencies between messages (docs/decisions.md#dependencies): linking a
 * message just written to its parents, reading a received message's parents,
 * the dependents' channels, and cancelling a failed parent's descendants.
 * The statements are exported so the query-plan tests can EXPLAIN them.
 */
import type { MessageParent, MessageRecord } from "../model/messages.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { EXPIRED_BY_CANCEL } from "./message-cancel.js";
import { accessible, COLUMNS, toRecord, type MessageRow } from "./message-rows.js";

/**
 * $1 parent ids, $2 now: each parent, live or archived, with its channel's
 * owner and how it stands: done (acknowledged), failed (ended otherwise:
 * expired, cancelled, dead-lettered), else pending. Live parents are locked
 * (shared) until the post commits: an acknowledgement waits, then finds the
 * new edge and frees the dependent, so none is left blocked by a parent that
 * was acknowledged while it was posted.
 */
export const PARENTS_SQL = `WITH live AS (
    SELECT m.id, m.channel_id, m.acknowledged_by <> '[]'::jsonb AS done,
      -- Ended unacknowledged: expired, or cancelled (expired by it). A cancelled
      -- message still held is pending: its holder may acknowledge it yet.
      m.acknowledged_by = '[]'::jsonb AND m.expires_at <= $2 AS failed
    FROM messages m WHERE m.id = ANY ($1::uuid[])
    ORDER BY m.id FOR SHARE OF m
  ), archived AS (
    SELECT DISTINCT ON (h.id) h.id, h.channel_id, h.acknowledged_by <> '[]'::jsonb AS done, h.acknowledged_by = '[]'::jsonb AS failed
    FROM message_history h WHERE h.id = ANY ($1::uuid[]) AND h.id NOT IN (SELECT l.id FROM live l)
    ORDER BY h.id, h.archived_at DESC
  )
  SELECT p.id, p.done, p.failed, c.created_by_key_id AS owner_key_id
  FROM (SELECT * FROM live UNION ALL SELECT * FROM archived) p JOIN channels c ON c.id = p.channel_id`;

/** A blocked message's available_at: far ahead, until its last parent is acknowledged. */
export const BLOCKED_UNTIL = "9999-01-01T00:00:00Z";

/**
 * $1 the new message, $2 its parents, $3 the pending ones, $4 now, $5
 * whether one failed: records the parents, blocks it on the pending ones
 * (available_at far ahead, which every delivery path honours), or cancels it
 * at once (parent_failed) when one failed; counts it on each pending parent.
 */
export const LINK_PARENTS_SQL = `WITH edges AS (
    INSERT INTO message_dependencies (message_id, parent_id) SELECT $1, p FROM unnest($3::uuid[]) p WHERE NOT $5
  ), counted AS (
    UPDATE messages p SET dependents_count = p.dependents_count + 1 WHERE p.id = ANY ($3::uuid[]) AND NOT $5
  )
  UPDATE messages m SET depends_on = $2::uuid[],
    blocked_by = CASE WHEN $5 THEN 0 ELSE cardinality($3::uuid[]) END,
    available_at = CASE WHEN NOT $5 AND cardinality($3::uuid[]) > 0 THEN '${BLOCKED_UNTIL}'::timestamptz ELSE m.available_at END,
    cancel_requested_at = CASE WHEN $5 THEN $4::timestamptz END,
    cancel_reason = CASE WHEN $5 THEN 'parent_failed' END,
    cancel_expires_at = CASE WHEN $5 THEN m.expires_at END,
    expires_at = CASE WHEN $5 THEN ${EXPIRED_BY_CANCEL("$4")} ELSE m.expires_at END
  WHERE m.id = $1`;

/** $1 message ids: each one's parents with their results, live or archived. */
export const PARENT_RESULTS_SQL = `SELECT x.child, p.id, p.channel_id, p.result FROM (
    SELECT m.id AS child, unnest(m.depends_on) AS parent FROM messages m WHERE m.id = ANY ($1::uuid[])
  ) x
  CROSS JOIN LATERAL (
    (SELECT l.id, l.channel_id, l.result FROM messages l WHERE l.id = x.parent)
    UNION ALL
    (SELECT h.id, h.channel_id, h.result FROM message_history h WHERE h.id = x.parent ORDER BY h.archived_at DESC LIMIT 1)
    LIMIT 1
  ) p`;

/**
 * $1 parent, $2 the reading key: its live dependents (message_dependencies_parent)
 * of channels the key may read, oldest first, at most 100.
 */
export const DEPENDENTS_SQL = `SELECT ${COLUMNS} FROM message_dependencies d JOIN messages m ON m.id = d.message_id
  WHERE d.parent_id = $1 AND ${accessible("$2")}
  ORDER BY m.created_at, m.id LIMIT 100`;

/** $1 parent ids: the channels of the messages that depend on them. */
export const DEPENDENT_CHANNELS_SQL = `SELECT DISTINCT m.channel_id FROM message_dependencies d JOIN messages m ON m.id = d.message_id
  WHERE d.parent_id = ANY ($1::uuid[])`;

/** A parent as PARENTS_SQL reads it. */
interface ParentRow {
  id: string;
  done: boolean;
  failed: boolean;
  owner_key_id: string;
}

/**
 * Links a message just written to its parents, in the caller's transaction
 * (PARENTS_SQL, then LINK_PARENTS_SQL): parents unknown, or of a channel
 * another key than `ownerKeyId` owns, refuse it; a parent that failed
 * cancels it at once; pending ones block it. The message as it is then.
 */
export async function linkParents(db: Db, messageId: string, parentIds: readonly string[], ownerKeyId: string, now: Micros): Promise<MessageRecord | "unknown_parent" | "foreign_parent"> {
  const at = formatTimestamp(now);
  const { rows: parents } = await db.query<ParentRow>(PARENTS_SQL, [parentIds, at], "parents");
  if (parents.length < parentIds.length) return "unknown_parent";
  if (parents.some((p) => p.owner_key_id !== ownerKeyId)) return "foreign_parent";
  const pending = parents.filter((p) => !p.done && !p.failed).map((p) => p.id);
  await db.query(LINK_PARENTS_SQL, [messageId, parentIds, pending, at, parents.some((p) => p.failed)], "link_parents");
  const { rows } = await db.query<MessageRow>(`SELECT ${COLUMNS} FROM messages m WHERE m.id = $1`, [messageId]);
  return toRecord(rows[0]!);
}

/** A message's live dependents the key may read (DEPENDENTS_SQL). */
export async function dependentsOf(db: Db, parentId: string, keyId: string): Promise<MessageRecord[]> {
  const { rows } = await db.query<MessageRow>(DEPENDENTS_SQL, [parentId, keyId], "dependents");
  return rows.map(toRecord);
}

/** Each message's parents with their results (PARENT_RESULTS_SQL), by message id. */
export async function parentsOf(db: Db, messageIds: readonly string[]): Promise<Map<string, MessageParent[]>> {
  const parents = new Map<string, MessageParent[]>();
  if (messageIds.length === 0) return parents;
  const { rows } = await db.query<{ child: string; id: string; channel_id: string; result: string | null }>(PARENT_RESULTS_SQL, [messageIds], "parent_results");
  for (const r of rows) {
    const list = parents.get(r.child) ?? [];
    list.push({ messageId: r.id, channelId: r.channel_id, result: r.result });
    parents.set(r.child, list);
  }
  return parents;
}

export async function dependentChannels(db: Db, parentIds: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ channel_id: string }>(DEPENDENT_CHANNELS_SQL, [parentIds], "dependent_channels");
  return rows.map((r) => r.channel_id);
}

/** Cancels what depends on these ended messages, down the tree (agentbus_fail_dependents); how many. */
export async function failDependents(db: Db, parentIds: readonly string[], now: Micros): Promise<number> {
  const { rows } = await db.query<{ n: number }>("SELECT agentbus_fail_dependents($1::uuid[], $2::timestamptz) AS n", [parentIds, formatTimestamp(now)]);
  return rows[0]?.n ?? 0;
}
