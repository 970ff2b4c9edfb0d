/**
 * SQL for live messages. Every statement that depends on the current time
 * takes it as a parameter (the injected clock), except the created_at stamp,
 * which PostgreSQL assigns under the channel lock (docs/decisions.md#cursor-order).
 *
 * Claims are one conditional UPDATE … RETURNING: the row lock makes exactly
 * one concurrent claimer win; the losers re-check the condition after the
 * winner commits and match nothing. Access to the channel is part of the
 * condition so the hot path is a single round trip; when nothing matches,
 * inspect() tells the caller why.
 */
import type { ChannelAccess, ChannelMode } from "../model/channels.js";
import type { JsonValue } from "../model/json.js";
import type {
  BatchCreateOutcome,
  CreateOutcome,
  CreateRefusal,
  ListFilter,
  MessageInspection,
  FoundMessage,
  MessageRecord,
  NewAck,
  NewClaim,
  NewLeases,
  NewMessage,
  QueueStats,
} from "../model/messages.js";
import type { ActorRef } from "../model/actors.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { MessageStore, RedriveCandidate, RedriveCursor } from "../ports/messages.js";
import { Coalescer, takeDistinct, takeUpTo } from "./coalesce.js";
import type { Db } from "./db.js";
import { isConnectionError } from "../model/storage-errors.js";
import { AVAILABLE, COLUMNS, LAPSED, MESSAGE_FIELDS, NOT_ACKNOWLEDGED, accessible, toRecord, type MessageRow } from "./message-rows.js";
import { PICK_AND_LEASE_SQL, RECEIVE_SQL, UNPICKED_SQL } from "./receive-sql.js";

/**
 * Whether the database answered that the statement failed, so nothing of it
 * was committed and its rows can be retried one by one. Not when the
 * connection failed (the commit may have happened: retrying could write a
 * message twice) or the server is out of resources or shutting down.
 */
function rolledBackByStatement(err: unknown): boolean {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  if (typeof code !== "string" || !/^[0-9A-Z]{5}$/.test(code) || isConnectionError(err)) return false;
  return !["53", "57", "58"].includes(code.slice(0, 2));
}

/** Enough to amortise a commit; small enough to keep one batch's latency low. */
const MAX_BATCH = 64;
/** Acks per statement: a batch ack's ids (up to 100) and the single acks queued beside it. */
const MAX_ACKS = 256;

/** A receive waiting for its channel's next batch of receives. */
interface PendingReceive {
  max: number;
  leases: NewLeases;
  now: Micros;
  /** The channel dispatches by group, turn, aging or limits (PICK_AND_LEASE_SQL). */
  picked: boolean;
}

/** An ack waiting for the next batch of acks. */
interface PendingAck {
  messageId: string;
  ack: NewAck;
  now: Micros;
}

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
 * The read and claim statements, exported so the query-plan tests EXPLAIN
 * exactly what runs. List parameters: $1 channel, $2 since, $3 limit, $4 now.
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

/** Thrown inside createAll's transaction to roll the batch back. */
class BatchRefused extends Error {
  constructor(
    readonly index: number,
    readonly refusal: Extract<CreateOutcome, { outcome: CreateRefusal }>,
  ) {
    super(refusal.outcome);
  }
}

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
    result = coalesce(a.result, m.result), lease_token = NULL, lease_expires_at = NULL, held_limit_ids = NULL
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

/** $1 message, $2 the caller's key: the live row, else the archived one. */
const FIND_SQL = `SELECT x.*, c.mode, c.access, c.created_by_key_id AS owner_key_id,
    EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = c.id AND cm.key_id = $2) AS is_member
  FROM (
    SELECT ${COLUMNS}, NULL::timestamptz AS archived_at FROM messages m WHERE m.id = $1
    UNION ALL
    SELECT ${COLUMNS}, m.archived_at FROM message_history m WHERE m.id = $1
  ) x JOIN channels c ON c.id = x.channel_id
  ORDER BY x.archived_at NULLS FIRST LIMIT 1`;

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
      (m.acknowledged_by->0->>'occurred_at')::timestamptz AS first_ack_at,
      CASE
        WHEN m.expires_at <= $2 THEN 'expired'
        WHEN m.acknowledged_by <> '[]'::jsonb THEN 'acknowledged'
        WHEN k.claimable AND m.claimed_by_key_id IS NOT NULL AND NOT ${LAPSED("$2")} THEN 'in_flight'
        WHEN k.claimable AND m.delivery_count >= k.max_deliveries THEN 'dead_lettered'
        WHEN NOT ${AVAILABLE("$2")} THEN 'delayed'
        ELSE 'ready'
      END AS state
    FROM messages m, k WHERE m.channel_id = $1
  ), groups_live AS (
    SELECT l.group_key, count(*) FILTER (WHERE l.state = 'ready')::int AS ready, count(*) FILTER (WHERE l.state = 'in_flight')::int AS in_flight,
      (extract(epoch FROM min(l.available_since) FILTER (WHERE l.state = 'ready')) * 1000000)::bigint AS oldest_ready_since
    FROM live l WHERE l.group_key IS NOT NULL AND l.state IN ('ready', 'delayed', 'in_flight') GROUP BY l.group_key
  )
  SELECT
    count(*) FILTER (WHERE state = 'ready')::int AS ready,
    count(*) FILTER (WHERE state = 'delayed')::int AS delayed,
    count(*) FILTER (WHERE state = 'in_flight')::int AS in_flight,
    count(*) FILTER (WHERE state = 'acknowledged')::int AS acknowledged,
    (count(*) FILTER (WHERE state = 'dead_lettered')
      + (SELECT count(*) FROM message_history h WHERE h.channel_id = $1 AND h.reason = 'dead_lettered'))::int AS dead_lettered,
    min(available_since) FILTER (WHERE state = 'ready') AS oldest_ready_since,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM first_ack_at - claimed_at) * 1000)
      FILTER (WHERE state = 'acknowledged' AND claimed_at IS NOT NULL AND first_ack_at IS NOT NULL) AS claim_to_ack_p50_ms,
    avg(extract(epoch FROM first_ack_at - claimed_at) * 1000)
      FILTER (WHERE state = 'acknowledged' AND claimed_at IS NOT NULL AND first_ack_at IS NOT NULL)::float8 AS claim_to_ack_avg_ms,
    count(*) FILTER (WHERE state <> 'expired')::int AS live,
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

export class PgMessageStore implements MessageStore {
  constructor(private readonly db: Db) {}

  /**
   * Writes a message. Outside a transaction, concurrent writes to one channel
   * from this process are batched: while one batch holds the channel lock
   * (until its commit's WAL flush), the next requests queue and then go in
   * together. Inside a transaction (an idempotent request) the write joins it.
   */
  create(input: NewMessage): Promise<CreateOutcome> {
    if (this.db.inTransaction) return this.writeBatch(input.channelId, [input]).then((r) => r[0]!);
    return this.writes.submit(input.channelId, input);
  }

  /**
   * Writes a client's batch in one call of the write function, in its own
   * transaction (a savepoint inside an idempotent request's): the function
   * judges pause and throttle per message, so when it refuses any of them the
   * ones it did insert are rolled back. Not queued with single writes: the
   * batch is already one round trip, and joining others' would tie their
   * outcome to its all-or-nothing.
   */
  async createAll(channelId: string, inputs: readonly NewMessage[]): Promise<BatchCreateOutcome> {
    try {
      return await this.db.transaction(async () => {
        const outcomes = await this.writeBatch(channelId, inputs);
        const messages: MessageRecord[] = [];
        for (const [index, outcome] of outcomes.entries()) {
          if (outcome.outcome !== "created") throw new BatchRefused(index, outcome);
          messages.push(outcome.message);
        }
        return { outcome: "created" as const, messages };
      });
    } catch (err) {
      if (!(err instanceof BatchRefused)) throw err;
      return { outcome: err.refusal.outcome, retryAfter: err.refusal.retryAfter, index: err.index };
    }
  }

  /** Single writes waiting for their channel's batch in flight (see create). */
  private readonly writes = new Coalescer<NewMessage, CreateOutcome>({
    take: takeUpTo(MAX_BATCH),
    run: (channelId, inputs) => this.writeBatch(channelId, inputs),
    retryAlone: rolledBackByStatement,
  });

  private async writeBatch(channelId: string, inputs: readonly NewMessage[]): Promise<CreateOutcome[]> {
    const { rows } = await this.db.query<{ ord: number; outcome: string; retry_after: number | null; message_id: string; created_at: Micros; expires_at: Micros; available_at: Micros }>(
      "SELECT * FROM agentbus_create_messages($1, $2, $3, $4, $5, $6, $7::jsonb[], $8::jsonb[], $9::float8[], $10::text[], $11::smallint[], $12::int[], $13::jsonb[])",
      [
        channelId,
        inputs.map((m) => m.authorKeyId),
        inputs.map((m) => m.actor?.id ?? null),
        inputs.map((m) => m.actor?.name ?? null),
        inputs.map((m) => m.actorLabel),
        inputs.map((m) => m.content),
        inputs.map((m) => JSON.stringify(m.metadata)),
        inputs.map((m) => JSON.stringify(m.mentions)),
        inputs.map((m) => m.delaySeconds ?? 0),
        inputs.map((m) => m.groupKey ?? null),
        inputs.map((m) => m.priority ?? 3),
        inputs.map((m) => m.ttlSeconds ?? null),
        inputs.map((m) => (m.limitIds === undefined || m.limitIds.length === 0 ? null : JSON.stringify(m.limitIds))),
      ],
      "create_messages",
    );
    const outcomes: CreateOutcome[] = new Array(inputs.length);
    for (const row of rows) {
      const input = inputs[row.ord - 1]!;
      outcomes[row.ord - 1] =
        row.outcome === "created"
          ? {
              outcome: "created",
              message: {
                id: row.message_id,
                channelId,
                authorKeyId: input.authorKeyId,
                authorLabel: input.authorLabel,
                actor: input.actor,
                actorLabel: input.actorLabel,
                content: input.content,
                metadata: input.metadata,
                mentions: input.mentions,
                createdAt: row.created_at,
                expiresAt: row.expires_at,
                availableAt: row.available_at,
                claim: null,
                acknowledgedBy: [],
                deliveryCount: 0,
                result: null,
                deadLetter: null,
                groupKey: input.groupKey ?? null,
                priority: input.priority ?? 3,
                limits: input.limitNames ?? [],
              },
            }
          : { outcome: row.outcome as "channel_not_found" | "channel_paused" | "channel_write_rate_exceeded", retryAfter: row.retry_after };
    }
    return outcomes;
  }

  /** Live messages after `since`, oldest first. */
  async list(channelId: string, since: Micros | null, limit: number, filter: ListFilter, now: Micros): Promise<MessageRecord[]> {
    const after = since === null ? "-infinity" : formatTimestamp(since);
    const nowText = formatTimestamp(now);
    const sql = LIST_SQL[filter];
    const { rows } = await this.db.query<MessageRow>(sql, [channelId, after, limit, nowText], `list_${filter}`);
    return rows.map(toRecord);
  }

  /** Claims (optionally with a lease) when the message is claimable by this caller right now. */
  async claim(
    messageId: string,
    claim: NewClaim,
    now: Micros,
  ): Promise<MessageRecord | undefined> {
    const { rows } = await this.db.query<MessageRow>(
      CLAIM_SQL,
      [
        messageId,
        claim.keyId,
        claim.actor.id,
        claim.actor.name,
        formatTimestamp(now),
        claim.metadata,
        claim.leaseToken,
        claim.leaseExpiresAt === null ? null : formatTimestamp(claim.leaseExpiresAt),
      ],
      "claim",
    );
    return rows[0] && toRecord(rows[0]);
  }

  /**
   * Leases up to `max` of the channel's oldest open work (RECEIVE_SQL),
   * oldest first. Outside a transaction the receive joins its channel's next
   * batch of receives (see create), inside one it runs on it.
   */
  receive(channelId: string, max: number, leases: NewLeases, now: Micros, picked = false): Promise<MessageRecord[]> {
    const item = { max, leases, now, picked };
    if (this.db.inTransaction) return this.receiveEach(channelId, [item]).then((r) => r[0]!);
    return this.receives.submit(channelId, item);
  }

  /** Receives waiting for their channel's batch in flight. */
  private readonly receives = new Coalescer<PendingReceive, MessageRecord[]>({
    take: takeUpTo(MAX_BATCH),
    run: (channelId, items) => this.receiveEach(channelId, items),
    retryAlone: rolledBackByStatement,
  });

  /** RECEIVE_SQL (or PICK_AND_LEASE_SQL) for receives on one channel, at the latest of their nows: each one's leased messages, in delivery order. */
  private async receiveEach(channelId: string, items: readonly PendingReceive[]): Promise<MessageRecord[][]> {
    const now = Math.max(...items.map((i) => i.now));
    const params = [
      channelId,
      formatTimestamp(now),
      items.map((i) => i.leases.keyId),
      items.map((i) => i.leases.actor.id),
      items.map((i) => i.leases.actor.name),
      items.map((i) => i.max),
      items.map((i) => (i.leases.leaseExpiresAt === null ? null : formatTimestamp(i.leases.leaseExpiresAt))),
      items.flatMap((i) => i.leases.leaseTokens.slice(0, i.max)),
      items.map((i) => (i.leases.metadata === undefined || i.leases.metadata === null ? null : JSON.stringify(i.leases.metadata))),
    ];
    const picking = items.some((i) => i.picked);
    const { rows } = picking
      ? await this.db.query<MessageRow & { ord: string | null; pick: string | null; unleased: string[] }>(PICK_AND_LEASE_SQL, params, "receive_pick_and_lease")
      : await this.db.query<MessageRow & { ord: string; pick: string }>(RECEIVE_SQL, params, "receive");
    const unleased = picking ? ((rows[0] as { unleased?: string[] } | undefined)?.unleased ?? []) : [];
    if (unleased.length > 0) {
      // The pick moved these groups' kept heads past messages the lease did not take: read them again.
      await this.db.query(UNPICKED_SQL, [channelId, unleased], "receive_unpicked");
    }
    const leased = items.map((): Array<{ pick: number; message: MessageRecord }> => []);
    for (const row of rows) if (row.ord !== null) leased[Number(row.ord) - 1]!.push({ pick: Number(row.pick), message: toRecord(row) });
    // RETURNING follows no order: each receive's in delivery order.
    return leased.map((messages) => messages.sort((a, b) => a.pick - b.pick).map((m) => m.message));
  }

  /**
   * Moves the channel's messages past max_deliveries out of it (agentbus_dead_letter,
   * docs/decisions.md#dead-letters); at most `limit` per call.
   */
  async deadLetter(channelId: string, limit: number, now: Micros): Promise<{ moved: number; deadLetterChannelId: string | null }> {
    const { rows } = await this.db.query<{ moved: number; dead_letter_channel_id: string | null }>(
      "SELECT * FROM agentbus_dead_letter($1, $2, $3)",
      [channelId, formatTimestamp(now), limit],
      "dead_letter",
    );
    const row = rows[0];
    return { moved: row?.moved ?? 0, deadLetterChannelId: row?.dead_letter_channel_id ?? null };
  }

  /** The channel's queue state at `now` (STATS_SQL). */
  async stats(channelId: string, now: Micros): Promise<QueueStats> {
    const { rows } = await this.db.query<{
      ready: number;
      delayed: number;
      in_flight: number;
      acknowledged: number;
      dead_lettered: number;
      oldest_ready_since: Micros | null;
      claim_to_ack_p50_ms: number | null;
      claim_to_ack_avg_ms: number | null;
      live: number;
      ready_by_priority: number[];
      groups: { count: number; in_flight: number; top: Array<{ group_key: string; ready: number; in_flight: number; oldest_ready_since: number | null }> } | null;
    }>(STATS_SQL, [channelId, formatTimestamp(now)], "channel_stats");
    const row = rows[0]!;
    return {
      ready: row.ready,
      delayed: row.delayed,
      inFlight: row.in_flight,
      acknowledged: row.acknowledged,
      deadLettered: row.dead_lettered,
      oldestReadySince: row.oldest_ready_since,
      claimToAckP50Ms: row.claim_to_ack_p50_ms,
      claimToAckAvgMs: row.claim_to_ack_avg_ms,
      live: row.live,
      readyByPriority: [0, 1, 2, 3, 4].map((i) => row.ready_by_priority[i] ?? 0) as QueueStats["readyByPriority"],
      groups:
        row.groups === null
          ? null
          : {
              count: row.groups.count,
              inFlight: row.groups.in_flight,
              top: row.groups.top.map((g) => ({ groupKey: g.group_key, ready: g.ready, inFlight: g.in_flight, oldestReadySince: g.oldest_ready_since })),
            },
    };
  }

  /** The dead letters redrive may move, oldest first (REDRIVE_CANDIDATES_SQL). */
  async redriveCandidates(channelId: string, after: RedriveCursor | null, limit: number, now: Micros): Promise<RedriveCandidate[]> {
    const { rows } = await this.db.query<{ id: string; created_at: Micros; origin_channel_id: string; metadata: { [key: string]: JsonValue } }>(
      REDRIVE_CANDIDATES_SQL,
      [channelId, after === null ? "-infinity" : formatTimestamp(after.createdAt), limit, formatTimestamp(now)],
      "redrive_candidates",
    );
    return rows.map((r) => ({ id: r.id, createdAt: r.created_at, originChannelId: r.origin_channel_id, metadata: r.metadata }));
  }

  /** Moves these dead letters of the channel back to their origins (agentbus_redrive); the count per origin. */
  async redrive(channelId: string, messageIds: readonly string[], now: Micros): Promise<Array<{ originChannelId: string; moved: number }>> {
    const { rows } = await this.db.query<{ origin_channel_id: string; moved: number }>(
      "SELECT * FROM agentbus_redrive($1, $2, $3::uuid[])",
      [channelId, formatTimestamp(now), messageIds],
      "redrive",
    );
    return rows.map((r) => ({ originChannelId: r.origin_channel_id, moved: r.moved }));
  }

  /**
   * Clears leases the caller never saw, by their tokens (only while still
   * held under them and unacknowledged), and takes their delivery back.
   */
  async releaseUnseen(leases: ReadonlyArray<{ messageId: string; leaseToken: string }>, keyId: string, now: Micros): Promise<number> {
    if (leases.length === 0) return 0;
    const { rowCount } = await this.db.query(
      `UPDATE messages m SET claimed_by_key_id = NULL, claimed_by_actor_id = NULL, claimed_by_actor_name = NULL,
         claimed_at = NULL, claim_metadata = NULL, lease_token = NULL, lease_expires_at = NULL, held_limit_ids = NULL,
         delivery_count = greatest(m.delivery_count - 1, 0)
       FROM unnest($1::uuid[], $2::text[]) AS l(id, token)
       WHERE m.id = l.id AND m.lease_token = l.token AND m.claimed_by_key_id = $3 AND m.expires_at > $4 AND ${NOT_ACKNOWLEDGED}`,
      [leases.map((l) => l.messageId), leases.map((l) => l.leaseToken), keyId, formatTimestamp(now)],
      "release_unseen",
    );
    return rowCount ?? 0;
  }

  /**
   * Appends the actor to acknowledged_by unless it is already there, under
   * ACK_SQL's rules; inspect() tells the caller why not. Outside a
   * transaction the ack joins the process's next batch of acks (one
   * statement and one commit for all of them), inside one it runs on it.
   */
  ack(messageId: string, ack: NewAck, now: Micros): Promise<MessageRecord | undefined> {
    const item = { messageId, ack, now };
    if (this.db.inTransaction) return this.ackEach([item]).then((r) => r[0]);
    return this.acks.submit("", item);
  }

  /** ack() for many messages, as one statement inside a transaction and through the batch of acks outside; the ones it acknowledged. */
  async ackMany(acks: ReadonlyArray<{ messageId: string; ack: NewAck }>, now: Micros): Promise<MessageRecord[]> {
    const items = acks.map(({ messageId, ack }) => ({ messageId, ack, now }));
    if (items.length === 0) return [];
    const acked = this.db.inTransaction ? await this.ackEach(items) : await Promise.all(items.map((item) => this.acks.submit("", item)));
    return acked.filter((m): m is MessageRecord => m !== undefined);
  }

  /**
   * The acks waiting for the batch in flight (Coalescer): one queue for the
   * process, as an ack names a message, not a channel. A message acked twice
   * waits for the next batch. When one item fails the statement (a bad id),
   * each item is tried alone, so only that one fails.
   */
  private readonly acks = new Coalescer<PendingAck, MessageRecord | undefined>({
    take: takeDistinct(MAX_ACKS, (item) => item.messageId),
    run: (_all, items) => this.ackEach(items),
    retryAlone: rolledBackByStatement,
  });

  /** ACK_SQL for distinct messages: each item's acknowledged message, or undefined where it changed nothing. */
  private async ackEach(items: readonly PendingAck[]): Promise<Array<MessageRecord | undefined>> {
    const { rows } = await this.db.query<MessageRow & { ord: string }>(
      ACK_SQL,
      [
        items.map((i) => i.messageId),
        items.map((i) => i.ack.keyId),
        items.map((i) => i.ack.actor.id),
        items.map((i) => i.ack.actor.name),
        items.map((i) => formatTimestamp(i.now)),
        items.map((i) => i.ack.result),
        items.map((i) => JSON.stringify(i.ack.metadata)),
      ],
      "ack",
    );
    const acked: Array<MessageRecord | undefined> = new Array(items.length).fill(undefined);
    for (const row of rows) acked[Number(row.ord) - 1] = toRecord(row);
    return acked;
  }

  /** The message live, or else its archived copy, with its channel and the caller's standing. */
  async find(messageId: string, keyId: string): Promise<FoundMessage | undefined> {
    const { rows } = await this.db.query<MessageRow & { archived_at: Micros | null; mode: ChannelMode; access: ChannelAccess; owner_key_id: string; is_member: boolean }>(
      FIND_SQL,
      [messageId, keyId],
      "find_message",
    );
    const row = rows[0];
    return (
      row && {
        message: toRecord(row),
        archivedAt: row.archived_at,
        mode: row.mode,
        access: row.access,
        channelOwnerKeyId: row.owner_key_id,
        callerIsMember: row.is_member,
      }
    );
  }

  /** Clears the claim when this key and actor hold it. */
  async release(messageId: string, keyId: string, actor: ActorRef, now: Micros, availableAt: Micros | null = null, priority: number | null = null): Promise<MessageRecord | undefined> {
    const { rows } = await this.db.query<MessageRow>(
      `UPDATE messages m SET claimed_by_key_id = NULL, claimed_by_actor_id = NULL, claimed_by_actor_name = NULL,
         claimed_at = NULL, claim_metadata = NULL, lease_token = NULL, lease_expires_at = NULL, held_limit_ids = NULL,
         available_at = coalesce($5::timestamptz, m.available_at), priority = coalesce($6::smallint, m.priority)
       WHERE m.id = $1 AND m.claimed_by_key_id = $2 AND m.claimed_by_actor_id = $3 AND m.expires_at > $4 AND NOT ${LAPSED("$4")}
         AND ${NOT_ACKNOWLEDGED}
         AND EXISTS (SELECT 1 FROM channels k WHERE k.id = m.channel_id AND k.mode = 'claimable')
         AND ${accessible("$2")}
       RETURNING ${COLUMNS}`,
      [messageId, keyId, actor.id, formatTimestamp(now), availableAt === null ? null : formatTimestamp(availableAt), priority],
    );
    return rows[0] && toRecord(rows[0]);
  }

  /** When open work next appears in the channel unannounced (NEXT_DUE_SQL): a delay or a lease running out; null when none. */
  async nextAvailableAt(channelId: string, now: Micros): Promise<Micros | null> {
    const { rows } = await this.db.query<{ available_at: Micros }>(NEXT_DUE_SQL, [channelId, formatTimestamp(now)], "next_available_at");
    return rows[0]?.available_at ?? null;
  }

  /**
   * Extends a live lease held by this key; undefined when there is none. A
   * lease holding limits is live only while no receive has counted it out
   * as lapsed (limits.lapses_counted_until, by that receive's clock): its
   * unit may be another message's by then. The limits are locked (shared)
   * first, so a receive counting them right now is waited for and read.
   */
  async heartbeat(leaseToken: string, keyId: string, until: Micros, now: Micros): Promise<{ leaseToken: string; expiresAt: Micros } | undefined> {
    const { rows } = await this.db.query<{ lease_token: string; lease_expires_at: Micros }>(
      `WITH held AS MATERIALIZED (
         SELECT l.lapses_counted_until FROM limits l
         WHERE l.id = ANY (ARRAY(SELECT unnest(x.held_limit_ids) FROM messages x WHERE x.lease_token = $1))
         -- In id order, as a receive locks them: two limits taken the other way round could deadlock with it.
         ORDER BY l.id FOR SHARE
       )
       UPDATE messages m SET lease_expires_at = $3
       WHERE m.lease_token = $1 AND m.claimed_by_key_id = $2 AND m.lease_expires_at > $4 AND m.expires_at > $4
         AND NOT EXISTS (SELECT 1 FROM held h WHERE h.lapses_counted_until >= m.lease_expires_at)
       RETURNING m.lease_token, m.lease_expires_at`,
      [leaseToken, keyId, formatTimestamp(until), formatTimestamp(now)],
    );
    const row = rows[0];
    return row && { leaseToken: row.lease_token, expiresAt: row.lease_expires_at };
  }

  /** The key holding a lease token, if any: tells "not yours" from "gone". */
  async leaseHolder(leaseToken: string): Promise<{ keyId: string; messageId: string } | undefined> {
    const { rows } = await this.db.query<{ claimed_by_key_id: string; id: string }>(
      "SELECT m.claimed_by_key_id, m.id FROM messages m WHERE m.lease_token = $1",
      [leaseToken],
    );
    const row = rows[0];
    return row && { keyId: row.claimed_by_key_id, messageId: row.id };
  }

  /** created_at of the channel's newest message ever written: where "new messages only" starts. */
  async channelHead(channelId: string): Promise<Micros | null> {
    const { rows } = await this.db.query<{ last_message_at: Micros | null }>(
      "SELECT last_message_at FROM channels WHERE id = $1",
      [channelId],
      "channel_head",
    );
    return rows[0]?.last_message_at ?? null;
  }

  /** The message with its channel's mode and the caller's standing, for classifying a refusal. */
  async inspect(messageId: string, keyId: string): Promise<MessageInspection | undefined> {
    const { rows } = await this.db.query<MessageRow & { mode: ChannelMode; access: ChannelAccess; owner_key_id: string; is_member: boolean }>(
      `SELECT ${COLUMNS}, c.mode, c.access, c.created_by_key_id AS owner_key_id,
         EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = c.id AND cm.key_id = $2) AS is_member
       FROM messages m JOIN channels c ON c.id = m.channel_id WHERE m.id = $1`,
      [messageId, keyId],
      "inspect_message",
    );
    const row = rows[0];
    return (
      row && {
        message: toRecord(row),
        mode: row.mode,
        access: row.access,
        channelOwnerKeyId: row.owner_key_id,
        callerIsMember: row.is_member,
      }
    );
  }

  /**
   * Moves an unclaimed message to history. The channel row is locked first,
   * in the same order as the write path, so this cannot deadlock with a
   * ring-buffer trim.
   */
  async retract(message: MessageRecord, now: Micros): Promise<boolean> {
    return this.db.transaction(async () => {
      await this.db.query("SELECT 1 FROM channels WHERE id = $1 FOR NO KEY UPDATE", [message.channelId]);
      const { rowCount } = await this.db.query(
        `WITH target AS (
           SELECT m.* FROM messages m WHERE m.id = $1 AND (m.claimed_by_key_id IS NULL OR ${LAPSED("$2")}) FOR UPDATE
         ), moved AS (
           INSERT INTO message_history (${MESSAGE_FIELDS}, archived_at, reason)
           SELECT ${MESSAGE_FIELDS}, $2::timestamptz, 'retracted' FROM target t RETURNING id
         ), gone AS (
           DELETE FROM messages m USING moved WHERE m.id = moved.id RETURNING m.channel_id
         )
         UPDATE channels c SET stored_messages = c.stored_messages - 1 FROM gone WHERE c.id = gone.channel_id`,
        [message.id, formatTimestamp(now)],
      );
      return (rowCount ?? 0) > 0;
    });
  }
}
