/**
 * The dispatcher's claim on the webhook outbox (docs/decisions.md#webhook-isolation):
 * which due rows a dispatcher leases next, fairly between the keys that own
 * them and within the per-destination limits.
 */
import type { Micros } from "../model/time.js";
import { formatTimestamp } from "../model/time.js";
import type { ClaimedDelivery, ClaimLimits, WebhookEvent } from "../model/webhooks.js";
import type { Db } from "./db.js";
import { COLUMNS, toRecord, type MessageRow } from "./message-rows.js";

type ClaimRow = Partial<MessageRow> & {
  o_id: string;
  o_channel_id: string;
  o_owner_key_id: string;
  o_actor_id: string | null;
  o_event: WebhookEvent;
  o_message_id: string | null;
  o_body: string | null;
  o_attempts: number;
  o_url: string | null;
  o_secret: string | null;
  o_destination: string | null;
  o_open_until: Micros | null;
  o_push_token: string | null;
  o_push_auth_scheme: string | null;
  o_push_auth_credentials: string | null;
};

/** Candidates offered per free slot: when another dispatcher is claiming some right now, the next ones are taken. */
const CLAIM_CANDIDATES_PER_SLOT = 4;

/**
 * $1 now, $2 how many, $3 end of the lease; $4/$5 destinations this
 * dispatcher has requests in flight to and how many more each may take,
 * $6 what any other destination may take, $7 how many due rows are looked
 * at per owner; $8/$9/$10 owning keys this dispatcher served lately, with
 * their requests in flight and when it last started one, $11 requests in
 * flight allowed per owner.
 *
 * walk: every key with rows in the outbox and its first $7 due rows, in the
 * order of webhook_outbox_owner_due, one index descent per step: the same
 * owner's next due row, else the next owner's first row (a loose index scan).
 * So a key with any number of rows queued hides no other key's, and costs at
 * most $7 steps: stepping keeps the planner from reading one owner's whole
 * backlog at once (a bitmap scan, then a sort), which a LIMIT per owner
 * would allow. due: the due ones, in due order (first attempts, at
 * -infinity, before retries; then oldest first). Of those, at most
 * the allowed number per destination and per owner
 * (docs/decisions.md#webhook-isolation: a slow receiver, or one key's many
 * slow receivers, hold their share of slots, never all), plus any number of
 * rows that are not sent: those of destinations whose breaker is open (they
 * are deferred) and those whose webhook is gone (dropped). The owners take
 * turns: an owner's k-th row comes after every owner's (k-1)-th, counting
 * what each has in flight, so the owner with fewest in flight goes first,
 * then the one served least recently, then the oldest row. Rows another
 * dispatcher is claiming right now are skipped, not waited for: the
 * candidates are a few per free slot, in turn order, and travel as an array,
 * so locking them and the update are primary-key look-ups per row
 * (array_position keeps the turn order through the lock).
 */
export const CLAIM_SQL = `WITH RECURSIVE walk AS (
    (SELECT x.owner_key_id, x.next_attempt_at, x.created_at, x.id, x.channel_id, x.actor_id, x.push_config_id, 1 AS n FROM webhook_outbox x
     ORDER BY x.owner_key_id, x.next_attempt_at, x.created_at, x.id LIMIT 1)
    UNION ALL
    SELECT nx.owner_key_id, nx.next_attempt_at, nx.created_at, nx.id, nx.channel_id, nx.actor_id, nx.push_config_id, nx.n
    FROM walk w CROSS JOIN LATERAL (
      (SELECT x.owner_key_id, x.next_attempt_at, x.created_at, x.id, x.channel_id, x.actor_id, x.push_config_id, w.n + 1 AS n FROM webhook_outbox x
       WHERE w.n < $7 AND w.next_attempt_at <= $1 AND x.owner_key_id = w.owner_key_id
         AND (x.next_attempt_at, x.created_at, x.id) > (w.next_attempt_at, w.created_at, w.id) AND x.next_attempt_at <= $1
       ORDER BY x.owner_key_id, x.next_attempt_at, x.created_at, x.id LIMIT 1)
      UNION ALL
      (SELECT x.owner_key_id, x.next_attempt_at, x.created_at, x.id, x.channel_id, x.actor_id, x.push_config_id, 1 AS n FROM webhook_outbox x
       WHERE x.owner_key_id > w.owner_key_id
       ORDER BY x.owner_key_id, x.next_attempt_at, x.created_at, x.id LIMIT 1)
      LIMIT 1
    ) nx
  ), due AS (
    SELECT x.id, x.owner_key_id, x.next_attempt_at, x.created_at,
      agentbus_webhook_destination(CASE WHEN x.push_config_id IS NOT NULL THEN p.url WHEN x.actor_id IS NULL THEN ch.webhook_url ELSE w.url END) AS destination
    FROM walk x
    JOIN channels ch ON ch.id = x.channel_id
    LEFT JOIN actor_webhooks w ON w.actor_id = x.actor_id
    LEFT JOIN a2a_push_configs p ON p.id = x.push_config_id
    WHERE x.next_attempt_at <= $1
  ), ranked AS (
    SELECT d.id, d.owner_key_id, d.next_attempt_at, d.created_at, d.destination,
      d.destination IS NULL OR coalesce(wd.open_until > $1, false) AS unsent,
      row_number() OVER (PARTITION BY d.destination ORDER BY d.next_attempt_at, d.created_at) AS n
    FROM due d LEFT JOIN webhook_destinations wd ON wd.destination = d.destination
  ), eligible AS (
    SELECT r.id, r.owner_key_id, r.next_attempt_at, r.created_at, r.unsent,
      row_number() OVER (PARTITION BY r.owner_key_id ORDER BY r.next_attempt_at, r.created_at) AS turn,
      row_number() OVER (PARTITION BY r.owner_key_id, r.unsent ORDER BY r.next_attempt_at, r.created_at) AS k
    FROM ranked r
    LEFT JOIN unnest($4::text[], $5::int[]) AS busy(destination, free) ON busy.destination = r.destination
    WHERE r.unsent OR r.n <= coalesce(busy.free, $6)
  ), candidates AS (
    SELECT ARRAY(
      SELECT e.id FROM eligible e
      LEFT JOIN unnest($8::text[], $9::int[], $10::timestamptz[]) AS own(owner_key_id, in_flight, served_at) ON own.owner_key_id = e.owner_key_id
      WHERE e.unsent OR e.k <= $11 - coalesce(own.in_flight, 0)
      ORDER BY coalesce(own.in_flight, 0) + e.turn, own.served_at NULLS FIRST, e.next_attempt_at, e.created_at
      LIMIT ${CLAIM_CANDIDATES_PER_SLOT} * $2
    ) AS ids
  ), claimed AS (
    UPDATE webhook_outbox o SET attempts = o.attempts + 1, next_attempt_at = $3
    WHERE o.id = ANY (ARRAY(
      SELECT x.id FROM webhook_outbox x
      WHERE x.id = ANY ((SELECT ids FROM candidates)::uuid[]) AND x.next_attempt_at <= $1
      ORDER BY array_position((SELECT ids FROM candidates), x.id)
      LIMIT $2 FOR UPDATE SKIP LOCKED
    ))
    RETURNING o.id, o.channel_id, o.owner_key_id, o.actor_id, o.event, o.message_id, o.body, o.attempts, o.push_config_id
  )
  SELECT c.id AS o_id, c.channel_id AS o_channel_id, c.owner_key_id AS o_owner_key_id, c.actor_id AS o_actor_id, c.event AS o_event,
    c.message_id AS o_message_id, c.body AS o_body, c.attempts AS o_attempts,
    t.url AS o_url, t.secret AS o_secret, t.destination AS o_destination,
    p.token AS o_push_token, p.auth_scheme AS o_push_auth_scheme, p.auth_credentials AS o_push_auth_credentials,
    CASE WHEN wd.open_until > $1 THEN wd.open_until END AS o_open_until,
    ${COLUMNS}
  FROM claimed c
  JOIN channels ch ON ch.id = c.channel_id
  LEFT JOIN actor_webhooks w ON w.actor_id = c.actor_id
  LEFT JOIN a2a_push_configs p ON p.id = c.push_config_id
  CROSS JOIN LATERAL (SELECT
      CASE WHEN c.push_config_id IS NOT NULL THEN p.url WHEN c.actor_id IS NULL THEN ch.webhook_url ELSE w.url END AS url,
      CASE WHEN c.push_config_id IS NOT NULL THEN p.token WHEN c.actor_id IS NULL THEN ch.webhook_secret ELSE w.secret END AS secret,
      agentbus_webhook_destination(CASE WHEN c.push_config_id IS NOT NULL THEN p.url WHEN c.actor_id IS NULL THEN ch.webhook_url ELSE w.url END) AS destination) t
  LEFT JOIN webhook_destinations wd ON wd.destination = t.destination
  LEFT JOIN messages m ON m.id = c.message_id AND c.body IS NULL`;

/**
 * How many due rows of one owner a claim looks at: bounds the ranking's work
 * per owner. Within one owner, rows behind this many (say, behind a backlog
 * to one destination at its cap) wait for those ahead; other owners' rows
 * never do.
 */
export const CLAIM_SCAN_ROWS_PER_OWNER = 32;

export async function claimDue(db: Db, now: Micros, limit: number, leaseUntil: Micros, limits: ClaimLimits): Promise<ClaimedDelivery[]> {
  const owners = [...limits.owners];
  const { rows } = await db.query<ClaimRow>(
    CLAIM_SQL,
    [
      formatTimestamp(now),
      limit,
      formatTimestamp(leaseUntil),
      [...limits.busy.keys()],
      [...limits.busy.values()],
      limits.perDestination,
      CLAIM_SCAN_ROWS_PER_OWNER,
      owners.map(([key]) => key),
      owners.map(([, load]) => load.inFlight),
      owners.map(([, load]) => formatTimestamp(load.servedAt)),
      limits.perOwner,
    ],
    "webhook_claim",
  );
  return rows.map((r) => ({
    id: r.o_id,
    channelId: r.o_channel_id,
    ownerKeyId: r.o_owner_key_id,
    actorId: r.o_actor_id,
    event: r.o_event,
    messageId: r.o_message_id,
    body: r.o_body,
    attempt: r.o_attempts,
    url: r.o_url,
    secret: r.o_secret,
    message: r.id === null || r.id === undefined ? null : toRecord(r as MessageRow),
    destination: r.o_destination,
    openUntil: r.o_open_until,
    push:
      r.o_event === "a2a.task"
        ? { token: r.o_push_token, authorization: r.o_push_auth_scheme === null ? null : `${r.o_push_auth_scheme} ${r.o_push_auth_credentials ?? ""}`.trim() }
        : null,
  }));
}
