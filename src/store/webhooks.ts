/**
 * SQL for webhooks (migration 0007): actor webhooks, the outbox of pending
 * deliveries, the delivery log and the mention rate-limit windows.
 *
 * Message events are enqueued by agentbus_create_messages in the message's
 * own transaction; member_added by enqueueMemberAdded in the approval's.
 * The dispatcher claims due rows (store/webhook-claim.ts: fairly between
 * owning keys) with FOR UPDATE SKIP LOCKED and leases them
 * (next_attempt_at moves to the end of the lease, attempts counts the claim)
 * in one committed statement, sends without holding any lock or connection,
 * then records the outcome and the log row in one statement that only
 * touches the outbox row if its attempt count is still the one it claimed.
 */
import type { Micros } from "../model/time.js";
import { formatTimestamp } from "../model/time.js";
import type {
  ActorOwner,
  ActorWebhookRecord,
  ArchivedMessage,
  AttemptRecord,
  BreakerSettings,
  ClaimedDelivery,
  ClaimLimits,
  DeliveryLogRecord,
  DeliveryStatus,
  WebhookEvent,
} from "../model/webhooks.js";
import type { WebhookStore } from "../ports/webhooks.js";
import { findActorRef } from "./actors.js";
import type { Db } from "./db.js";
import { COLUMNS, toRecord, type MessageRow } from "./message-rows.js";
import { claimDue } from "./webhook-claim.js";

// ---------------------------------------------------------------------------
// Actor webhooks

interface ActorWebhookRow {
  actor_id: string;
  url: string;
  has_secret: boolean;
  updated_at: Micros;
}

const toActorWebhook = (row: ActorWebhookRow): ActorWebhookRecord => ({
  actorId: row.actor_id,
  url: row.url,
  hasSecret: row.has_secret,
  updatedAt: row.updated_at,
});

async function upsertActorWebhook(db: Db, actorId: string, url: string, secret: string | null, now: Micros): Promise<ActorWebhookRecord> {
  const { rows } = await db.query<ActorWebhookRow>(
    `INSERT INTO actor_webhooks (actor_id, url, secret, updated_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (actor_id) DO UPDATE SET url = excluded.url, secret = excluded.secret, updated_at = excluded.updated_at
     RETURNING actor_id, url, secret IS NOT NULL AS has_secret, updated_at`,
    [actorId, url, secret, formatTimestamp(now)],
  );
  return toActorWebhook(rows[0]!);
}

async function findActorWebhook(db: Db, actorId: string): Promise<ActorWebhookRecord | undefined> {
  const { rows } = await db.query<ActorWebhookRow>(
    "SELECT actor_id, url, secret IS NOT NULL AS has_secret, updated_at FROM actor_webhooks WHERE actor_id = $1",
    [actorId],
  );
  return rows[0] && toActorWebhook(rows[0]);
}

async function deleteActorWebhook(db: Db, actorId: string): Promise<boolean> {
  const { rowCount } = await db.query("DELETE FROM actor_webhooks WHERE actor_id = $1", [actorId]);
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------
// Enqueueing outside the message write path

/**
 * Queues a member_added push to the channel's webhook, when it has one, in
 * the caller's transaction; the body `{"channel_id", "member_key_id",
 * "approved_by"}` is fixed now (the owning key is the trigger's to set, as
 * for every outbox row). Returns whether a row was queued.
 */
export async function enqueueMemberAdded(
  db: Db,
  event: { channelId: string; memberKeyId: string; approvedByKeyId: string },
  now: Micros,
): Promise<boolean> {
  const body = JSON.stringify({ channel_id: event.channelId, member_key_id: event.memberKeyId, approved_by: event.approvedByKeyId });
  const { rowCount } = await db.query(
    `INSERT INTO webhook_outbox (channel_id, event, body, created_at)
     SELECT c.id, 'member_added', $2, $3 FROM channels c WHERE c.id = $1 AND c.webhook_url IS NOT NULL`,
    [event.channelId, body, formatTimestamp(now)],
  );
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------
// The dispatcher's side

/**
 * A claimed delivery its destination's breaker holds back: logged as
 * deferred (no request, error circuit_open), due again when the breaker
 * closes, and the claim not counted as an attempt, so waiting never uses up
 * its retries.
 */
async function deferDelivery(db: Db, d: Pick<AttemptRecord, "deliveryId" | "channelId" | "actorId" | "event" | "messageId" | "attempt">, now: Micros, until: Micros): Promise<void> {
  await db.query(
    `WITH moved AS (
       UPDATE webhook_outbox SET next_attempt_at = $8, attempts = attempts - 1 WHERE id = $1 AND attempts = $6
     )
     INSERT INTO webhook_deliveries (delivery_id, channel_id, actor_id, event, message_id, attempt, status, response_status, error,
                                     duration_ms, attempted_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'deferred', NULL, 'circuit_open', 0, $7, $8)`,
    [d.deliveryId, d.channelId, d.actorId, d.event, d.messageId, d.attempt, formatTimestamp(now), formatTimestamp(until)],
    "webhook_defer",
  );
}

/**
 * The breaker's bookkeeping after an attempt to `destination`. An answer
 * (any HTTP status) closes it. No answer counts a consecutive failure; at
 * `threshold` the breaker opens for openMs · 2^trips (at most maxOpenMs),
 * unless it is open already (concurrent failures trip it once). The count is
 * not reset by a trip, so the first probe after the pause that fails again
 * reopens it at once, for longer.
 */
async function recordDestinationOutcome(
  db: Db,
  destination: string,
  answered: boolean,
  now: Micros,
  breaker: BreakerSettings,
): Promise<void> {
  if (answered) {
    await db.query(
      `UPDATE webhook_destinations SET consecutive_failures = 0, trips = 0, open_until = NULL, updated_at = $2
       WHERE destination = $1 AND (consecutive_failures > 0 OR trips > 0)`,
      [destination, formatTimestamp(now)],
      "webhook_destination_answered",
    );
    return;
  }
  await db.query(
    `INSERT INTO webhook_destinations AS d (destination, consecutive_failures, trips, open_until, updated_at)
     VALUES ($1, 1, CASE WHEN $3::int <= 1 THEN 1 ELSE 0 END,
             CASE WHEN $3::int <= 1 THEN $2::timestamptz + make_interval(secs => $4::float8 / 1000) END, $2)
     ON CONFLICT (destination) DO UPDATE SET
       consecutive_failures = d.consecutive_failures + 1,
       trips = CASE WHEN d.consecutive_failures + 1 >= $3 AND NOT coalesce(d.open_until > $2, false) THEN d.trips + 1 ELSE d.trips END,
       open_until = CASE WHEN d.consecutive_failures + 1 >= $3 AND NOT coalesce(d.open_until > $2, false)
         THEN $2::timestamptz + make_interval(secs => least($4::float8 * power(2, d.trips), $5::float8) / 1000)
         ELSE d.open_until END,
       updated_at = $2`,
    [destination, formatTimestamp(now), breaker.threshold, breaker.openMs, breaker.maxOpenMs],
    "webhook_destination_failed",
  );
}

/** A message that is no longer live: its archived copy and why it was archived. */
async function findArchivedMessage(db: Db, messageId: string): Promise<ArchivedMessage | undefined> {
  const { rows } = await db.query<MessageRow & { reason: "expired" | "retracted" }>(
    `SELECT ${COLUMNS}, m.reason FROM message_history m WHERE m.id = $1`,
    [messageId],
  );
  const row = rows[0];
  return row && { message: toRecord(row), reason: row.reason };
}

/**
 * Logs an attempt and moves the outbox row on, in one statement: deleted
 * when nothing follows, else due again at nextAttemptAt. The row is only
 * touched while its attempt count is still this attempt's: a sender whose
 * lease ran out (and whose row another dispatcher has claimed since) still
 * logs what it did but no longer steers the row.
 */
async function recordAttempt(db: Db, a: AttemptRecord): Promise<void> {
  await db.query(
    `WITH moved AS (
       UPDATE webhook_outbox SET next_attempt_at = $12, body = coalesce(body, $13)
       WHERE id = $1 AND attempts = $6 AND $12::timestamptz IS NOT NULL
     ), removed AS (
       DELETE FROM webhook_outbox WHERE id = $1 AND attempts = $6 AND $12::timestamptz IS NULL
     )
     INSERT INTO webhook_deliveries (delivery_id, channel_id, actor_id, event, message_id, attempt, status, response_status, error,
                                     duration_ms, attempted_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      a.deliveryId,
      a.channelId,
      a.actorId,
      a.event,
      a.messageId,
      a.attempt,
      a.status,
      a.responseStatus,
      a.error,
      a.durationMs,
      formatTimestamp(a.attemptedAt),
      a.nextAttemptAt === null ? null : formatTimestamp(a.nextAttemptAt),
      a.body,
    ],
    "webhook_record_attempt",
  );
}

/** Drops an outbox row without an attempt (its webhook was removed). */
async function dropDelivery(db: Db, deliveryId: string, attempt: number): Promise<void> {
  await db.query("DELETE FROM webhook_outbox WHERE id = $1 AND attempts = $2", [deliveryId, attempt]);
}

/** The earliest next_attempt_at in the outbox (an in-flight row's is its lease end); null when empty. */
async function nextDue(db: Db): Promise<Micros | null> {
  const { rows } = await db.query<{ at: Micros }>("SELECT o.next_attempt_at AS at FROM webhook_outbox o ORDER BY o.next_attempt_at LIMIT 1");
  return rows[0]?.at ?? null;
}

// ---------------------------------------------------------------------------
// The owner's log

interface DeliveryLogRow {
  id: string;
  delivery_id: string;
  channel_id: string;
  event: WebhookEvent;
  message_id: string | null;
  attempt: number;
  status: DeliveryStatus;
  response_status: number | null;
  error: string | null;
  duration_ms: number;
  attempted_at: Micros;
  next_attempt_at: Micros | null;
}

/**
 * The channel webhook's attempts, newest first: $1 channel, $2 before (an id,
 * exclusive; NULL for the newest), $3 limit. Mention pushes are not in it, nor
 * A2A push notifications (a sender's, to its own URL: docs/decisions.md#a2a).
 */
export const DELIVERY_LOG_SQL = `SELECT d.id::text AS id, d.delivery_id, d.channel_id, d.event, d.message_id, d.attempt, d.status,
    d.response_status, d.error, d.duration_ms, d.attempted_at, d.next_attempt_at
  FROM webhook_deliveries d
  WHERE d.channel_id = $1 AND d.actor_id IS NULL AND d.event <> 'a2a.task' AND ($2::bigint IS NULL OR d.id < $2::bigint)
  ORDER BY d.id DESC LIMIT $3`;

async function listDeliveries(db: Db, channelId: string, before: string | null, limit: number): Promise<DeliveryLogRecord[]> {
  const { rows } = await db.query<DeliveryLogRow>(DELIVERY_LOG_SQL, [channelId, before, limit]);
  return rows.map((r) => ({
    id: r.id,
    deliveryId: r.delivery_id,
    channelId: r.channel_id,
    event: r.event,
    messageId: r.message_id,
    attempt: r.attempt,
    status: r.status,
    responseStatus: r.response_status,
    error: r.error,
    durationMs: r.duration_ms,
    attemptedAt: r.attempted_at,
    nextAttemptAt: r.next_attempt_at,
  }));
}

export class PgWebhookStore implements WebhookStore {
  constructor(private readonly db: Db) {}

  async findActorOwner(actorId: string): Promise<ActorOwner | undefined> {
    const actor = await findActorRef(this.db, actorId);
    return actor && { id: actor.id, createdByKeyId: actor.createdByKeyId };
  }

  upsertActorWebhook(actorId: string, url: string, secret: string | null, now: Micros): Promise<ActorWebhookRecord> {
    return upsertActorWebhook(this.db, actorId, url, secret, now);
  }

  findActorWebhook(actorId: string): Promise<ActorWebhookRecord | undefined> {
    return findActorWebhook(this.db, actorId);
  }

  deleteActorWebhook(actorId: string): Promise<boolean> {
    return deleteActorWebhook(this.db, actorId);
  }

  claimDue(now: Micros, limit: number, leaseUntil: Micros, limits: ClaimLimits): Promise<ClaimedDelivery[]> {
    return claimDue(this.db, now, limit, leaseUntil, limits);
  }

  deferDelivery(d: Pick<AttemptRecord, "deliveryId" | "channelId" | "actorId" | "event" | "messageId" | "attempt">, now: Micros, until: Micros): Promise<void> {
    return deferDelivery(this.db, d, now, until);
  }

  recordDestinationOutcome(destination: string, answered: boolean, now: Micros, breaker: BreakerSettings): Promise<void> {
    return recordDestinationOutcome(this.db, destination, answered, now, breaker);
  }

  findArchivedMessage(messageId: string): Promise<ArchivedMessage | undefined> {
    return findArchivedMessage(this.db, messageId);
  }

  recordAttempt(a: AttemptRecord): Promise<void> {
    return recordAttempt(this.db, a);
  }

  dropDelivery(deliveryId: string, attempt: number): Promise<void> {
    return dropDelivery(this.db, deliveryId, attempt);
  }

  nextDue(): Promise<Micros | null> {
    return nextDue(this.db);
  }

  listDeliveries(channelId: string, before: string | null, limit: number): Promise<DeliveryLogRecord[]> {
    return listDeliveries(this.db, channelId, before, limit);
  }
}
