/**
 * The purge (docs/decisions.md#expiry-and-history): archives expired messages
 * to history, and deletes history past its channel's retention, expired
 * idempotency records, expired channel events and invitations, access requests
 * decided a week ago, and webhook destinations the circuit breaker has not
 * heard of for a week.
 *
 * Every step works in bounded batches, one transaction each, looping until
 * a batch comes back short: a backlog never holds locks for long, and the
 * write path gets the channel between two batches. "Now" is always the
 * caller's (the injected clock), never the database's.
 *
 * Running it twice changes nothing the second time: every statement selects
 * only what is still due, so a job that runs again (after a crash, or on two
 * workers at once) finds nothing left to do.
 */
import { TOMBSTONE_DAYS } from "../model/jobs.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { PurgeCounts, PurgeOptions, PurgeStore } from "../ports/purge.js";
import type { Db } from "./db.js";
import { MESSAGE_FIELDS } from "./message-rows.js";

export const PURGE_BATCH_SIZE = 1_000;


/**
 * One batch of expired messages: $1 now, $2 batch size. Candidates are read
 * without locks, then their channels are locked (in id order, so two purges
 * cannot deadlock each other) BEFORE any message row, as the write path and
 * retract do. Rows a claim or ack is changing right now are skipped and
 * taken by the next run.
 */
export const EXPIRED_CANDIDATES_SQL = `SELECT m.id, m.channel_id FROM messages m
  WHERE m.expires_at <= $1 ORDER BY m.expires_at LIMIT $2`;

const LOCK_CHANNELS_SQL = `SELECT c.id FROM channels c WHERE c.id = ANY($1::uuid[]) ORDER BY c.id FOR NO KEY UPDATE`;

/** $1 message ids, $2 now. Moves, deletes and decrements the ring-buffer counter in one statement. */
const ARCHIVE_SQL = `WITH target AS (
    SELECT ${MESSAGE_FIELDS} FROM messages m WHERE m.id = ANY($1::uuid[]) AND m.expires_at <= $2
    FOR UPDATE SKIP LOCKED
  ), moved AS (
    INSERT INTO message_history (${MESSAGE_FIELDS}, archived_at, reason)
    -- A cancelled message expired by its cancel (docs/decisions.md#cancel) is kept as cancelled.
    SELECT ${MESSAGE_FIELDS}, $2::timestamptz,
      CASE WHEN cancel_requested_at IS NOT NULL AND acknowledged_by = '[]'::jsonb THEN 'cancelled' ELSE 'expired' END FROM target
    ON CONFLICT (id) DO NOTHING
  ), gone AS (
    DELETE FROM messages m USING target t WHERE m.id = t.id RETURNING m.channel_id
  ), edges AS (
    -- Their own edges to their parents are done with (docs/decisions.md#dependencies).
    DELETE FROM message_dependencies d USING target t WHERE d.message_id = t.id
  ), per_channel AS (
    SELECT channel_id, count(*)::int AS n FROM gone GROUP BY channel_id
  ), counters AS (
    UPDATE channels c SET stored_messages = c.stored_messages - p.n FROM per_channel p WHERE c.id = p.channel_id
  )
  SELECT coalesce(sum(n), 0)::int AS archived,
    -- Ended unacknowledged with dependents: those are cancelled next (docs/decisions.md#dependencies).
    ARRAY(SELECT t.id FROM target t WHERE t.acknowledged_by = '[]'::jsonb AND t.dependents_count > 0) AS failed
  FROM per_channel`;

/*
 * The DELETE statements below take ($1 now, $2 batch size). Each picks its
 * batch in a sub-select, oldest first along an index, and deletes by
 * `= ANY (ARRAY(…))`, which the planner answers with index (or TID) lookups
 * rather than a join against the whole table. Rows another transaction is
 * changing right now are skipped (SKIP LOCKED) and left to the next run.
 */

/**
 * History whose channel's retention (retention_days after archived_at) has
 * run out, probed channel by channel on (channel_id, archived_at): each
 * channel has its own cutoff, and the owner may change it at any time.
 * History rows are never updated, so nothing needs locking first.
 */
export const EXPIRED_HISTORY_SQL = `DELETE FROM message_history h WHERE h.id = ANY (ARRAY(
    SELECT d.id FROM channels c CROSS JOIN LATERAL (
      SELECT x.id FROM message_history x
      WHERE x.channel_id = c.id AND x.archived_at <= $1::timestamptz - make_interval(days => c.retention_days)
      ORDER BY x.archived_at LIMIT $2
    ) d
    LIMIT $2
  ))`;

/** Idempotency records past their window; by ctid, as the key is two columns. */
export const EXPIRED_IDEMPOTENCY_SQL = `DELETE FROM idempotency_records r WHERE r.ctid = ANY (ARRAY(
    SELECT x.ctid FROM idempotency_records x WHERE x.expires_at <= $1
    ORDER BY x.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND r.expires_at <= $1`;

/** Channel events past their 24 hours (tables of 0005_membership.sql). */
export const EXPIRED_EVENTS_SQL = `DELETE FROM channel_events e WHERE e.id = ANY (ARRAY(
    SELECT x.id FROM channel_events x WHERE x.expires_at <= $1
    ORDER BY x.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND e.expires_at <= $1`;

/** Invitations that expired or were revoked: both answer 410 until purged, 404 after. */
export const DEAD_INVITATIONS_SQL = `DELETE FROM channel_invitations i WHERE i.id = ANY (ARRAY(
    SELECT x.id FROM channel_invitations x WHERE x.expires_at <= $1 OR x.revoked_at IS NOT NULL
    LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND (i.expires_at <= $1 OR i.revoked_at IS NOT NULL)`;

/** The webhook delivery log keeps 7 days; outbox rows go when delivered or given up. */
/**
 * Decided access requests are kept a week, so an owner who approves or
 * denies an old request again still hears 409 access_request_resolved (with
 * how it was decided) rather than 404; pending ones are never purged.
 */
export const RESOLVED_ACCESS_REQUEST_RETENTION_DAYS = 7;

/** $1 now, $2 batch size; uses the partial index access_requests_resolved (0005_membership.sql). */
export const OLD_ACCESS_REQUESTS_SQL = `DELETE FROM access_requests r WHERE r.id = ANY (ARRAY(
    SELECT x.id FROM access_requests x
    WHERE x.resolved_at IS NOT NULL AND x.resolved_at <= $1::timestamptz - interval '${RESOLVED_ACCESS_REQUEST_RETENTION_DAYS} days'
    ORDER BY x.resolved_at LIMIT $2
  )) AND r.resolved_at <= $1::timestamptz - interval '${RESOLVED_ACCESS_REQUEST_RETENTION_DAYS} days'`;

export const WEBHOOK_LOG_RETENTION_DAYS = 7;

/**
 * Delivery log rows past their 7 days (tables of 0007_webhooks.sql); by
 * ctid, as the key is two columns. Log rows are never updated.
 */
export const OLD_WEBHOOK_DELIVERIES_SQL = `DELETE FROM webhook_deliveries d WHERE d.ctid = ANY (ARRAY(
    SELECT x.ctid FROM webhook_deliveries x WHERE x.attempted_at <= $1::timestamptz - interval '${WEBHOOK_LOG_RETENTION_DAYS} days'
    ORDER BY x.attempted_at LIMIT $2
  )) AND d.attempted_at <= $1::timestamptz - interval '${WEBHOOK_LOG_RETENTION_DAYS} days'`;

/**
 * A webhook destination's circuit-breaker row goes once nothing happened to
 * it for a week: a receiver that fails again starts from a closed breaker,
 * as a new one would. A breaker still open is kept whatever its age (its
 * pause is what protects the receiver), and so is the row of a destination
 * answered or failed since (updated_at moves on every outcome that changes it).
 */
export const WEBHOOK_DESTINATION_RETENTION_DAYS = 7;

/** $1 now, $2 batch size; walks webhook_destinations_age (0012_fairness.sql). */
export const OLD_WEBHOOK_DESTINATIONS_SQL = `DELETE FROM webhook_destinations d WHERE d.destination = ANY (ARRAY(
    SELECT x.destination FROM webhook_destinations x
    WHERE x.updated_at <= $1::timestamptz - interval '${WEBHOOK_DESTINATION_RETENTION_DAYS} days'
      AND (x.open_until IS NULL OR x.open_until <= $1)
    ORDER BY x.updated_at LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND d.updated_at <= $1::timestamptz - interval '${WEBHOOK_DESTINATION_RETENTION_DAYS} days'
    AND (d.open_until IS NULL OR d.open_until <= $1)`;

/** Mention-push windows older than their minute: they no longer hold anything back. */
export const OLD_MENTION_WINDOWS_SQL = `DELETE FROM mention_push_windows w WHERE (w.channel_id, w.actor_id) IN (
    SELECT x.channel_id, x.actor_id FROM mention_push_windows x WHERE x.pushed_at <= $1::timestamptz - interval '60 seconds'
    ORDER BY x.pushed_at LIMIT $2 FOR UPDATE SKIP LOCKED
  ) AND w.pushed_at <= $1::timestamptz - interval '60 seconds'`;

/**
 * Async jobs whose result expired (docs/decisions.md#job-record; 0008_async_jobs.sql): the
 * result, PDF and input are cleared and the row stays, so a late download
 * answers 410 result_expired. Cleared rows leave the partial index this
 * walks (the predicate repeats the index's).
 */
export const EXPIRED_JOB_RESULTS_SQL = `UPDATE jobs j SET input = NULL, result = NULL, pdf = NULL WHERE j.id = ANY (ARRAY(
    SELECT x.id FROM jobs x
    WHERE x.expires_at <= $1 AND x.expires_at IS NOT NULL AND (x.input IS NOT NULL OR x.result IS NOT NULL OR x.pdf IS NOT NULL)
    ORDER BY x.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  ))`;

/** Async jobs TOMBSTONE_DAYS past their expiry: gone (404). */
export const OLD_JOBS_SQL = `DELETE FROM jobs j WHERE j.id = ANY (ARRAY(
    SELECT x.id FROM jobs x WHERE x.expires_at <= $1::timestamptz - interval '${TOMBSTONE_DAYS} days'
    ORDER BY x.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND j.expires_at <= $1::timestamptz - interval '${TOMBSTONE_DAYS} days'`;

/** Sessions past their expiry: 404 from the moment they expire, deleted here (members go with them). */
export const EXPIRED_SESSIONS_SQL = `DELETE FROM sessions s WHERE s.id = ANY (ARRAY(
    SELECT x.id FROM sessions x WHERE x.expires_at <= $1
    ORDER BY x.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND s.expires_at <= $1`;

/** Audit events older than the retention ($3 days); events are never updated, so nothing needs locking. */
export const OLD_AUDIT_EVENTS_SQL = `DELETE FROM security_audit a WHERE a.id = ANY (ARRAY(
    SELECT x.id FROM security_audit x WHERE x.occurred_at <= $1::timestamptz - make_interval(days => $3::int)
    ORDER BY x.occurred_at LIMIT $2
  ))`;

/** Days a finished waitpoint stays readable (docs/decisions.md#waitpoints). */
export const WAITPOINT_RETENTION_DAYS = 7;

/**
 * Waitpoints completed or timed out WAITPOINT_RETENTION_DAYS ago
 * (waitpoints_purge). A message that waited for one keeps its outcome on
 * its own row, so it needs the waitpoint no longer.
 */
export const OLD_WAITPOINTS_SQL = `DELETE FROM waitpoints w WHERE w.id = ANY (ARRAY(
    SELECT x.id FROM waitpoints x WHERE coalesce(x.completed_at, x.expires_at) <= $1::timestamptz - interval '${WAITPOINT_RETENTION_DAYS} days'
    LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND coalesce(w.completed_at, w.expires_at) <= $1::timestamptz - interval '${WAITPOINT_RETENTION_DAYS} days'`;

/** A schedule's ticks are kept this long (their key guards a tick against a second run only while it could be retried). */
export const SCHEDULE_RUN_RETENTION_DAYS = 7;

export const OLD_SCHEDULE_RUNS_SQL = `DELETE FROM schedule_runs r WHERE r.ctid = ANY (ARRAY(
    SELECT x.ctid FROM schedule_runs x WHERE x.ran_at <= $1::timestamptz - interval '${SCHEDULE_RUN_RETENTION_DAYS} days' LIMIT $2
  ))`;

/** A2A push-notification configs are kept this long (a task lives at most a channel's TTL, then history). */
export const PUSH_CONFIG_RETENTION_DAYS = 30;

export const OLD_PUSH_CONFIGS_SQL = `DELETE FROM a2a_push_configs p WHERE p.id = ANY (ARRAY(
    SELECT x.id FROM a2a_push_configs x WHERE x.created_at <= $1::timestamptz - interval '${PUSH_CONFIG_RETENTION_DAYS} days' LIMIT $2
  ))`;

/** AGENTBUS_AUDIT_RETENTION_DAYS's default. */
export const DEFAULT_AUDIT_RETENTION_DAYS = 90;

/** How long a group with no unfinished message keeps its row after its last post. */
export const GROUP_IDLE_MINUTES = 10;

/**
 * Rows of message groups with no unfinished message and no post for
 * GROUP_IDLE_MINUTES (0029_group_rows_end.sql), but never a fair channel's
 * turn of the messages without a group (''), one per channel. A post to the
 * group writes posted_at (or at least locks the row, when it is under a
 * minute old): FOR UPDATE skips a row a post holds, and one a post has just
 * written is read again at its new posted_at, so a group's row is never
 * deleted under its new message; a post that comes after the delete makes
 * a new row. The group's turn starts again with it (never served).
 */
export const IDLE_GROUPS_SQL = `DELETE FROM message_groups g WHERE g.ctid = ANY (ARRAY(
    SELECT x.ctid FROM message_groups x
    WHERE x.group_key <> '' AND coalesce(x.posted_at, '-infinity') <= $1::timestamptz - make_interval(mins => ${GROUP_IDLE_MINUTES})
      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.channel_id = x.channel_id AND m.group_key = x.group_key AND m.acknowledged_by = '[]'::jsonb)
    LIMIT $2 FOR UPDATE SKIP LOCKED
  ))`;

/**
 * Archives and deletes everything that is due at `now`; returns what it did.
 * Safe to run concurrently with the API and with another purge.
 */
export async function purge(db: Db, now: Micros, options: PurgeOptions = {}): Promise<PurgeCounts> {
  const batchSize = options.batchSize ?? PURGE_BATCH_SIZE;
  const at = formatTimestamp(now);
  const counts: PurgeCounts = {
    archivedMessages: 0,
    deletedHistory: 0,
    deletedIdempotencyRecords: 0,
    deletedChannelEvents: 0,
    deletedInvitations: 0,
    deletedAccessRequests: 0,
    deletedWebhookDeliveries: 0,
    deletedMentionWindows: 0,
    deletedWebhookDestinations: 0,
    expiredJobResults: 0,
    deletedJobs: 0,
    deletedSessions: 0,
    deletedAuditEvents: 0,
    deletedIdleGroups: 0,
    deletedWaitpoints: 0,
    deletedScheduleRuns: 0,
    deletedPushConfigs: 0,
  };
  const stopped = () => options.signal?.aborted === true;

  /** Runs batch() until it reports a short batch (or no progress), or the signal fires. */
  const loop = async (batch: () => Promise<{ done: number; full: boolean }>): Promise<number> => {
    let total = 0;
    while (!stopped()) {
      const { done, full } = await batch();
      total += done;
      await options.onBatch?.();
      if (!full || done === 0) break;
    }
    return total;
  };

  /** One DELETE … LIMIT batch of a statement taking ($1 now, $2 batch size). */
  const deleteBatch = async (sql: string, ...more: unknown[]) => {
    const { rowCount } = await db.query(sql, [at, batchSize, ...more]);
    const done = rowCount ?? 0;
    return { done, full: done === batchSize };
  };

  counts.archivedMessages = await loop(() => archiveExpiredBatch(db, at, batchSize));
  counts.deletedHistory = await loop(() => deleteBatch(EXPIRED_HISTORY_SQL));
  counts.deletedIdempotencyRecords = await loop(() => deleteBatch(EXPIRED_IDEMPOTENCY_SQL));
  counts.deletedChannelEvents = await loop(() => deleteBatch(EXPIRED_EVENTS_SQL));
  counts.deletedInvitations = await loop(() => deleteBatch(DEAD_INVITATIONS_SQL));
  counts.deletedAccessRequests = await loop(() => deleteBatch(OLD_ACCESS_REQUESTS_SQL));
  counts.deletedWebhookDeliveries = await loop(() => deleteBatch(OLD_WEBHOOK_DELIVERIES_SQL));
  counts.deletedMentionWindows = await loop(() => deleteBatch(OLD_MENTION_WINDOWS_SQL));
  counts.deletedWebhookDestinations = await loop(() => deleteBatch(OLD_WEBHOOK_DESTINATIONS_SQL));
  counts.expiredJobResults = await loop(() => deleteBatch(EXPIRED_JOB_RESULTS_SQL));
  counts.deletedJobs = await loop(() => deleteBatch(OLD_JOBS_SQL));
  counts.deletedSessions = await loop(() => deleteBatch(EXPIRED_SESSIONS_SQL));
  counts.deletedAuditEvents = await loop(() => deleteBatch(OLD_AUDIT_EVENTS_SQL, options.auditRetentionDays ?? DEFAULT_AUDIT_RETENTION_DAYS));
  counts.deletedIdleGroups = await loop(() => deleteBatch(IDLE_GROUPS_SQL));
  counts.deletedWaitpoints = await loop(() => deleteBatch(OLD_WAITPOINTS_SQL));
  counts.deletedScheduleRuns = await loop(() => deleteBatch(OLD_SCHEDULE_RUNS_SQL));
  counts.deletedPushConfigs = await loop(() => deleteBatch(OLD_PUSH_CONFIGS_SQL));
  return counts;
}

async function archiveExpiredBatch(db: Db, at: string, batchSize: number): Promise<{ done: number; full: boolean }> {
  return db.transaction(async () => {
    const { rows: candidates } = await db.query<{ id: string; channel_id: string }>(EXPIRED_CANDIDATES_SQL, [at, batchSize]);
    if (candidates.length === 0) return { done: 0, full: false };
    const channelIds = [...new Set(candidates.map((c) => c.channel_id))];
    await db.query(LOCK_CHANNELS_SQL, [channelIds]);
    const { rows } = await db.query<{ archived: number; failed: string[] }>(ARCHIVE_SQL, [candidates.map((c) => c.id), at]);
    const failed = rows[0]?.failed ?? [];
    if (failed.length > 0) await db.query("SELECT agentbus_fail_dependents($1::uuid[], $2::timestamptz)", [failed, at]);
    return { done: rows[0]?.archived ?? 0, full: candidates.length === batchSize };
  });
}

export class PgPurgeStore implements PurgeStore {
  constructor(
    private readonly db: Db,
    private readonly defaults: Pick<PurgeOptions, "auditRetentionDays"> = {},
  ) {}

  purge(now: Micros, options?: PurgeOptions): Promise<PurgeCounts> {
    return purge(this.db, now, { ...this.defaults, ...options });
  }
}
