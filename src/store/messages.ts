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
 *
 * The statements of each use case live beside this file: the write of a
 * batch of new messages in message-writes.ts, claims, acks,
 * releases and heartbeats in claim-sql.ts, receives in receive-sql.ts, the
 * reads (lists, queue state, redrive candidates) in message-reads-sql.ts;
 * one message's reads and the queue state in message-reads.ts, cancelling in
 * message-cancel.ts, progress in message-progress.ts and dependencies in
 * message-dependencies.ts.
 */
import type { JsonValue } from "../model/json.js";
import type {
  CreateOutcome,
  CreateRefusal,
  ListFilter,
  MessageInspection,
  FoundMessage,
  BatchParents,
  MessageParent,
  MessageRecord,
  NewAck,
  NewClaim,
  NewLeases,
  NewMessage,
  NewProgress,
  ParentedBatchOutcome,
  ParentedCreateOutcome,
  QueueStats,
} from "../model/messages.js";
import type { ActorRef } from "../model/actors.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { MessageStore, RedriveCandidate, RedriveCursor } from "../ports/messages.js";
import { Coalescer, takeDistinct, takeUpTo } from "./coalesce.js";
import type { Db } from "./db.js";
import { isConnectionError } from "../model/storage-errors.js";
import { LAPSED, MESSAGE_FIELDS, toRecord, type MessageRow } from "./message-rows.js";
import { CANCEL_SQL } from "./message-cancel.js";
import { releaseUntilWaitpoint } from "./waitpoints.js";
import { reportProgress } from "./message-progress.js";
import { dependentChannels, dependentsOf, failDependents, linkParents, parentsOf } from "./message-dependencies.js";
import { traceMessages } from "./message-traces.js";
import { writeMessages } from "./message-writes.js";
import { findMessage, inspectMessage, queueStats } from "./message-reads.js";
import { ACK_SQL, CLAIM_SQL, HEARTBEAT_SQL, RELEASE_SQL, RELEASE_UNSEEN_SQL } from "./claim-sql.js";
import { LIST_SQL, NEXT_DUE_SQL, REDRIVE_CANDIDATES_SQL } from "./message-reads-sql.js";
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

/** Thrown inside createAll's transaction to roll the batch back. */
class BatchRefused extends Error {
  constructor(
    readonly index: number,
    readonly refusal: Extract<CreateOutcome, { outcome: CreateRefusal }> | { outcome: "unknown_parent" | "foreign_parent"; retryAfter: null },
  ) {
    super(refusal.outcome);
  }
}

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
  async createAll(
    channelId: string,
    inputs: readonly NewMessage[],
    parents: readonly BatchParents[] = [],
    ownerKeyId = "",
    now: Micros = 0,
  ): Promise<ParentedBatchOutcome> {
    try {
      return await this.db.transaction(async () => {
        const outcomes = await this.writeBatch(channelId, inputs);
        const messages: MessageRecord[] = [];
        for (const [index, outcome] of outcomes.entries()) {
          if (outcome.outcome !== "created") throw new BatchRefused(index, outcome);
          messages.push(outcome.message);
        }
        // Items that wait for others (docs/decisions.md#dependencies), in
        // order: an earlier item is linked (blocked, or cancelled) before a
        // later one reads it as a parent.
        for (const [index, p] of parents.entries()) {
          const ids = [...p.ids, ...p.earlier.map((i) => messages[i]!.id)];
          if (ids.length === 0) continue;
          const linked = await linkParents(this.db, messages[index]!.id, ids, ownerKeyId, now);
          if (linked === "unknown_parent" || linked === "foreign_parent") throw new BatchRefused(index, { outcome: linked, retryAfter: null });
          messages[index] = linked;
        }
        return { outcome: "created" as const, messages };
      });
    } catch (err) {
      if (!(err instanceof BatchRefused)) throw err;
      const { outcome } = err.refusal;
      if (outcome === "unknown_parent" || outcome === "foreign_parent") return { outcome, index: err.index };
      return { outcome, retryAfter: err.refusal.retryAfter, index: err.index };
    }
  }

  /**
   * Writes a message that depends on others (docs/decisions.md#dependencies):
   * a batch of one, linked to its parents in the same transaction.
   */
  async createWithParents(input: NewMessage, parentIds: readonly string[], ownerKeyId: string, now: Micros): Promise<ParentedCreateOutcome> {
    const written = await this.createAll(input.channelId, [input], [{ ids: [...parentIds], earlier: [] }], ownerKeyId, now);
    if (written.outcome === "created") return { outcome: "created", message: written.messages[0]! };
    if (written.outcome === "unknown_parent" || written.outcome === "foreign_parent") return { outcome: written.outcome };
    return { outcome: written.outcome, retryAfter: written.retryAfter };
  }

  parentsOf(messageIds: readonly string[]): Promise<Map<string, MessageParent[]>> {
    return parentsOf(this.db, messageIds);
  }

  dependentChannels(parentIds: readonly string[]): Promise<string[]> {
    return dependentChannels(this.db, parentIds);
  }

  dependentsOf(parentId: string, keyId: string): Promise<MessageRecord[]> {
    return dependentsOf(this.db, parentId, keyId);
  }

  inTrace(traceId: string, keyId: string): Promise<MessageRecord[]> {
    return traceMessages(this.db, traceId, keyId);
  }

  failDependents(parentIds: readonly string[], now: Micros): Promise<number> {
    return failDependents(this.db, parentIds, now);
  }

  /** Single writes waiting for their channel's batch in flight (see create). */
  private readonly writes = new Coalescer<NewMessage, CreateOutcome>({
    take: takeUpTo(MAX_BATCH),
    run: (channelId, inputs) => this.writeBatch(channelId, inputs),
    retryAlone: rolledBackByStatement,
  });

  private writeBatch(channelId: string, inputs: readonly NewMessage[]): Promise<CreateOutcome[]> {
    return writeMessages(this.db, channelId, inputs);
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

  stats(channelId: string, now: Micros): Promise<QueueStats> {
    return queueStats(this.db, channelId, now);
  }

  find(messageId: string, keyId: string): Promise<FoundMessage | undefined> {
    return findMessage(this.db, messageId, keyId);
  }

  inspect(messageId: string, keyId: string): Promise<MessageInspection | undefined> {
    return inspectMessage(this.db, messageId, keyId);
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
      RELEASE_UNSEEN_SQL,
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

  /** Clears the claim when this key and actor hold it. */
  async release(messageId: string, keyId: string, actor: ActorRef, now: Micros, availableAt: Micros | null = null, priority: number | null = null): Promise<MessageRecord | undefined> {
    const { rows } = await this.db.query<MessageRow>(
      RELEASE_SQL,
      [messageId, keyId, actor.id, formatTimestamp(now), availableAt === null ? null : formatTimestamp(availableAt), priority],
    );
    return rows[0] && toRecord(rows[0]);
  }

  /** store/waitpoints.ts. */
  releaseUntil(messageId: string, keyId: string, actor: ActorRef, waitpointId: string, now: Micros): Promise<MessageRecord | "waitpoint_not_found" | undefined> {
    return releaseUntilWaitpoint(this.db, messageId, keyId, actor, waitpointId, now);
  }

  /** When open work next appears in the channel unannounced (NEXT_DUE_SQL): a delay or a lease running out; null when none. */
  async nextAvailableAt(channelId: string, now: Micros): Promise<Micros | null> {
    const { rows } = await this.db.query<{ available_at: Micros }>(NEXT_DUE_SQL, [channelId, formatTimestamp(now)], "next_available_at");
    return rows[0]?.available_at ?? null;
  }

  /** Extends a live lease held by this key (HEARTBEAT_SQL); undefined when there is none. */
  async heartbeat(leaseToken: string, keyId: string, until: Micros, now: Micros): Promise<{ leaseToken: string; expiresAt: Micros; cancelRequested: boolean } | undefined> {
    const { rows } = await this.db.query<{ lease_token: string; lease_expires_at: Micros; cancel_requested: boolean }>(
      HEARTBEAT_SQL,
      [leaseToken, keyId, formatTimestamp(until), formatTimestamp(now)],
    );
    const row = rows[0];
    return row && { leaseToken: row.lease_token, expiresAt: row.lease_expires_at, cancelRequested: row.cancel_requested };
  }

  /** store/message-progress.ts. */
  reportProgress(messageId: string, leaseToken: string, keyId: string, now: Micros, progress: NewProgress): Promise<MessageRecord | undefined> {
    return reportProgress(this.db, messageId, leaseToken, keyId, now, progress);
  }

  /** CANCEL_SQL (store/message-cancel.ts). */
  async cancel(messageId: string, now: Micros, reason: string | null): Promise<MessageRecord | undefined> {
    const { rows } = await this.db.query<MessageRow>(CANCEL_SQL, [messageId, formatTimestamp(now), reason], "cancel_message");
    return rows[0] && toRecord(rows[0]);
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
         ), edges AS (
           DELETE FROM message_dependencies d USING moved WHERE d.message_id = moved.id
         )
         UPDATE channels c SET stored_messages = c.stored_messages - 1 FROM gone WHERE c.id = gone.channel_id`,
        [message.id, formatTimestamp(now)],
      );
      return (rowCount ?? 0) > 0;
    });
  }
}
