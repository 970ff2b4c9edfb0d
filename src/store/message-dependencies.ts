/**
 * Dependencies between messages (docs/decisions.md#dependencies): the
 * statements that post a message with parents and read a received
 * message's parents. Exported so the query-plan tests can EXPLAIN them.
 */

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
      m.acknowledged_by = '[]'::jsonb AND (m.expires_at <= $2 OR m.cancel_requested_at IS NOT NULL) AS failed
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
    expires_at = CASE WHEN $5 THEN least(m.expires_at, $4::timestamptz - interval '2 seconds') ELSE m.expires_at END
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
