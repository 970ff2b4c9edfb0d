/** What the message use cases need from storage. */
import type { ActorRef } from "../model/actors.js";
import type { CreateOutcome, FoundMessage, ListFilter, MessageInspection, MessageRecord, NewAck, NewClaim, NewLeases, NewMessage, NewProgress, MessageParent, ParentedBatchOutcome, ParentedCreateOutcome, BatchParents, QueueStats } from "../model/messages.js";
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";

export interface MessageStore {
  /** Writes a message, or tells why the channel refused it. */
  create(input: NewMessage): Promise<CreateOutcome>;
  /** Writes messages to one channel in order, all or none (the first refused item rolls back the rest). */
  /**
   * Writes a batch, all or nothing; `parents` per item (docs/decisions.md#dependencies),
   * each of channels `ownerKeyId` owns, linked in order after the writes.
   */
  createAll(channelId: string, inputs: readonly NewMessage[], parents?: readonly BatchParents[], ownerKeyId?: string, now?: Micros): Promise<ParentedBatchOutcome>;
  /** Live messages after `since`, oldest first. */
  list(channelId: string, since: Micros | null, limit: number, filter: ListFilter, now: Micros): Promise<MessageRecord[]>;
  /** Claims when the message is claimable by this key right now; undefined when not. */
  claim(messageId: string, claim: NewClaim, now: Micros): Promise<MessageRecord | undefined>;
  /** Leases up to `max` of a claimable channel's open work (unclaimed, or lapsed and unacknowledged), oldest first; never a message another caller holds. */
  /** `picked`: the channel dispatches by group, turn, aging or limits (docs/decisions.md#dispatch). */
  receive(channelId: string, max: number, leases: NewLeases, now: Micros, picked?: boolean): Promise<MessageRecord[]>;
  /**
   * Adds the actor to acknowledged_by unless it is already there, storing a
   * result only while none is stored and (claimable channels) only from the
   * claim holder; undefined when nothing changed.
   */
  ack(messageId: string, ack: NewAck, now: Micros): Promise<MessageRecord | undefined>;
  /** ack() for each of the (distinct) messages, each with its own ack; the ones it acknowledged, in no order. */
  ackMany(acks: ReadonlyArray<{ messageId: string; ack: NewAck }>, now: Micros): Promise<MessageRecord[]>;
  /** The message live, or else its archived copy, with its channel and the caller's standing. */
  find(messageId: string, keyId: string): Promise<FoundMessage | undefined>;
  /** Clears the claim when this key and actor hold it (open work again from `availableAt` when given); undefined when they do not. */
  /** `priority`: the message's priority from now on; null keeps it. */
  release(messageId: string, keyId: string, actor: ActorRef, now: Micros, availableAt?: Micros | null, priority?: number | null): Promise<MessageRecord | undefined>;
  /**
   * Gives the message back, as release does, to wait for the key's
   * waitpoint (docs/decisions.md#waitpoints): open again at its timeout, or
   * at once carrying its data when it is already completed; the delivery is
   * not counted. Undefined when the key and actor do not hold the message;
   * "waitpoint_not_found" when the waitpoint is not the key's.
   */
  releaseUntil(messageId: string, keyId: string, actor: ActorRef, waitpointId: string, now: Micros): Promise<MessageRecord | "waitpoint_not_found" | undefined>;
  /**
   * The earliest moment after `after` at which open work appears in the channel
   * with no write to announce it (a delayed message falls due, or a lease
   * runs out), or null when none is pending. A long-poll passes the start of
   * its last read, so the answer may already lie in the past.
   */
  nextAvailableAt(channelId: string, after: Micros): Promise<Micros | null>;
  /** Extends a live lease held by this key; undefined when there is none. */
  heartbeat(leaseToken: string, keyId: string, until: Micros, now: Micros): Promise<{ leaseToken: string; expiresAt: Micros; cancelRequested: boolean } | undefined>;
  /** The key holding a lease token, if any. */
  leaseHolder(leaseToken: string): Promise<{ keyId: string; messageId: string } | undefined>;
  /** created_at of the channel's newest message ever written, or null. */
  channelHead(channelId: string): Promise<Micros | null>;
  /** The message with its channel's mode and the caller's standing. */
  inspect(messageId: string, keyId: string): Promise<MessageInspection | undefined>;
  /** Moves an unclaimed (or lapsed) message to history; false when it is claimed. */
  retract(message: MessageRecord, now: Micros): Promise<boolean>;
  /**
   * Cancels the message (docs/decisions.md#cancel): expired at once, or, held,
   * when its lease ends; undefined when it is finished (acknowledged,
   * cancelled, expired, or delivered max_deliveries times and not held).
   */
  cancel(messageId: string, now: Micros, reason: string | null): Promise<MessageRecord | undefined>;
  /** Writes a message that depends on `parentIds`, all of channels `ownerKeyId` owns (docs/decisions.md#dependencies). */
  createWithParents(input: NewMessage, parentIds: readonly string[], ownerKeyId: string, now: Micros): Promise<ParentedCreateOutcome>;
  /** Each message's parents with their results, by message id. */
  parentsOf(messageIds: readonly string[]): Promise<Map<string, MessageParent[]>>;
  /** The live messages that wait or waited for this one, of channels the key may read; oldest first, at most 100. */
  dependentsOf(parentId: string, keyId: string): Promise<MessageRecord[]>;
  /** A trace's live messages of channels the key may read, oldest first, at most 100. */
  inTrace(traceId: string, keyId: string): Promise<MessageRecord[]>;
  /** The channels of the messages that depend on these. */
  dependentChannels(parentIds: readonly string[]): Promise<string[]>;
  /** Cancels what depends on these ended messages, down the tree; how many. */
  failDependents(parentIds: readonly string[], now: Micros): Promise<number>;
  /**
   * Records progress on a message this key holds under this lease (not
   * lapsed, not acknowledged): data replaces the last (null: kept), text
   * replaces it or, with append, is added (null: kept), the text kept to its
   * last 64 KiB; undefined when the key does not hold it so.
   */
  reportProgress(messageId: string, leaseToken: string, keyId: string, now: Micros, progress: NewProgress): Promise<MessageRecord | undefined>;
  /**
   * Moves up to `limit` of the channel's messages that were delivered
   * max_deliveries times and came back to its dead-letter channel, or to
   * history when it has none; the dead-letter channel the moved ones went to.
   */
  deadLetter(channelId: string, limit: number, now: Micros): Promise<{ moved: number; deadLetterChannelId: string | null }>;
  /** The channel's live messages counted by state at `now`, with its dead letters still in history. */
  stats(channelId: string, now: Micros): Promise<QueueStats>;
  /**
   * Up to `limit` dead letters of the channel that redrive may move, oldest
   * first after `after` (exclusive): ones the service itself dead-lettered,
   * whose origin the channel's owner still owns, that nobody holds or
   * acknowledged.
   */
  redriveCandidates(channelId: string, after: RedriveCursor | null, limit: number, now: Micros): Promise<RedriveCandidate[]>;
  /** Moves these dead letters of the channel back to their origin channels (each re-checked as redriveCandidates checks it); how many went to each. */
  redrive(channelId: string, messageIds: readonly string[], now: Micros): Promise<Array<{ originChannelId: string; moved: number }>>;
  /**
   * Gives back leases their caller never saw (it went away while they were
   * taken): each message is open work again at once, its delivery not
   * counted. Only a lease still held under that token changes; how many did.
   */
  releaseUnseen(leases: ReadonlyArray<{ messageId: string; leaseToken: string }>, keyId: string, now: Micros): Promise<number>;
}

export interface RedriveCursor {
  createdAt: Micros;
  id: string;
}

export interface RedriveCandidate extends RedriveCursor {
  originChannelId: string;
  metadata: { [key: string]: JsonValue };
}
