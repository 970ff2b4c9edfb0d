/** Live messages as stored and read back, and what a write or a refused claim reports. */
import type { ActorRef } from "./actors.js";
import type { ChannelAccess, ChannelMode } from "./channels.js";
import type { JsonValue } from "./json.js";
import type { Micros } from "./time.js";
import type { TraceContext } from "./trace.js";

export interface Acknowledgement extends ActorRef {
  occurredAt: Micros;
  /** Sent with the acknowledgement; {} when none (docs/decisions.md#results). */
  metadata: { [key: string]: JsonValue };
}

export interface Claim {
  keyId: string;
  actor: ActorRef;
  claimedAt: Micros;
  leaseToken: string | null;
  leaseExpiresAt: Micros | null;
}

export interface MessageRecord {
  id: string;
  channelId: string;
  authorKeyId: string;
  /** The posting key's agent label (keys never change theirs). */
  authorLabel: string;
  actor: ActorRef | null;
  actorLabel: string | null;
  content: string;
  metadata: { [key: string]: JsonValue };
  mentions: ActorRef[];
  createdAt: Micros;
  expiresAt: Micros;
  /** From when the message is open work: createdAt, or later when posted or released with a delay (docs/decisions.md#delays). */
  availableAt: Micros;
  claim: Claim | null;
  acknowledgedBy: Acknowledgement[];
  /** Times the message was claimed or received. */
  deliveryCount: number;
  /** The work's outcome, from the first acknowledgement that carried one (docs/decisions.md#results). */
  result: string | null;
  /** Where a dead letter came from: set by the service only, never from a client's input (docs/decisions.md#dead-letters). */
  deadLetter: DeadLetterOrigin | null;
  /** The message's group; null when none (docs/decisions.md#message-groups). */
  groupKey: string | null;
  /** 1 (most urgent)..5 (docs/decisions.md#priorities). */
  priority: number;
  /** Names of the channel owner's limits the message adds to the channel's (docs/decisions.md#shared-limits). */
  limits: string[];
  /**
   * Its channel's max_deliveries, read only for a message delivered at least
   * once (the rest cannot have reached it); null: unbounded, or not read.
   */
  maxDeliveries: number | null;
  /**
   * When its author or channel owner cancelled it (docs/decisions.md#cancel):
   * cancelled at once, or, in flight, once its lease ends or it is released;
   * its holder may still acknowledge it. Null: never cancelled.
   */
  cancelRequestedAt: Micros | null;
  cancelReason: string | null;
  /** What its holder last reported (docs/decisions.md#progress); null until then. */
  progress: MessageProgress | null;
  /** Its parents (docs/decisions.md#dependencies): it waits for each to be acknowledged. */
  dependsOn: string[];
  /** How many of its parents are not acknowledged yet: blocked while above 0. */
  blockedBy: number;
  /** How many messages depend on it. */
  dependentsCount: number;
  /** The waitpoint its last holder released it to wait for (docs/decisions.md#waitpoints); null when none. */
  waitpoint: MessageWaitpointRef | null;
  /** The trace it belongs to (docs/decisions.md#trace-context); null for a message stored before traces were kept. */
  trace: TraceContext | null;
}

/** A message's waitpoint: while not completed, the message waits until its available_at (the waitpoint's timeout). */
export interface MessageWaitpointRef {
  id: string;
  /** Completed before the message was open work again; false while waiting or after a timeout. */
  completed: boolean;
  /** What the completion sent; null unless completed. */
  data: { [key: string]: JsonValue } | null;
}

/** A message's progress text keeps this many bytes of UTF-8, the last ones (docs/decisions.md#progress). */
export const MAX_PROGRESS_TEXT_BYTES = 65_536;

/** The last `max` bytes of `text` as UTF-8, cut at a character's start. */
export function keepProgressTail(text: string, max = MAX_PROGRESS_TEXT_BYTES): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let start = bytes.length - max;
  // A continuation byte (10xxxxxx) is the middle of a character: start after it.
  while (start < bytes.length && (bytes[start]! & 0xc0) === 0x80) start++;
  return bytes.subarray(start).toString("utf8");
}

/** A progress report as the store applies it: null leaves that part as it was. */
export interface NewProgress {
  data: { [key: string]: JsonValue } | null;
  text: string | null;
  append: boolean;
}

export interface MessageProgress {
  data: { [key: string]: JsonValue };
  /** The last reported text, or everything appended, kept to its last 64 KiB. */
  text: string;
  updatedAt: Micros;
}

export interface DeadLetterOrigin {
  originChannelId: string;
  originMessageId: string;
  deliveryCount: number;
  /** How its last delivery ended. */
  lastError: string;
}

export type NewMessage = Pick<MessageRecord, "channelId" | "authorKeyId" | "authorLabel" | "actor" | "actorLabel" | "content" | "metadata" | "mentions"> & {
  /** Seconds after createdAt before the message is open work; none (0) when absent. */
  delaySeconds?: number;
  groupKey?: string | null;
  priority?: number;
  /** The message's own TTL; absent: the channel's. */
  ttlSeconds?: number;
  /** Ids of the limits the message adds (names resolved by the use case), and their names. */
  limitIds?: string[];
  limitNames?: string[];
  /** The poster's trace, or a new one (the use case sets it; absent: stored without). */
  trace?: TraceContext;
};

export type CreateRefusal = "channel_not_found" | "channel_paused" | "channel_write_rate_exceeded";

/** A batch item's parents: ids of messages, and earlier items of the batch by their index. */
export interface BatchParents {
  ids: string[];
  earlier: number[];
}

/** A batch with parents: also refused, at an item, when a parent is unknown or of a channel another key owns. */
export type ParentedBatchOutcome = BatchCreateOutcome | { outcome: "unknown_parent"; index: number } | { outcome: "foreign_parent"; index: number };

/** A post with parents: also refused when a parent is unknown, or of a channel another key owns. */
export type ParentedCreateOutcome = CreateOutcome | { outcome: "unknown_parent" } | { outcome: "foreign_parent" };

/** A parent of a received message, with its result (docs/decisions.md#dependencies). */
export interface MessageParent {
  messageId: string;
  channelId: string;
  result: string | null;
}

export type CreateOutcome =
  | { outcome: "created"; message: MessageRecord }
  | { outcome: CreateRefusal; retryAfter: number | null };

/** A batch is stored whole or not at all: the refusal names the first item the channel refused. */
export type BatchCreateOutcome =
  | { outcome: "created"; messages: MessageRecord[] }
  | { outcome: CreateRefusal; retryAfter: number | null; index: number };

/** Which live messages a page holds; "open" is unclaimed work of a claimable channel: never acknowledged either. */
export type ListFilter = "all" | "unclaimed" | "claimed" | "open";

/** A claim to take: plain (no lease) or leased until leaseExpiresAt. */
export interface NewClaim {
  keyId: string;
  actor: ActorRef;
  metadata: { [key: string]: JsonValue } | null;
  leaseToken: string | null;
  leaseExpiresAt: Micros | null;
}

/** An acknowledgement to record: who, when, and what it carries. */
export interface NewAck {
  keyId: string;
  actor: ActorRef;
  /** Stored only while the message has none, and (claimable channels) only from the claim holder. */
  result: string | null;
  metadata: { [key: string]: JsonValue };
}

/** A receive's leases: one token per message it may lease, all ending at leaseExpiresAt. */
export interface NewLeases {
  keyId: string;
  actor: ActorRef;
  /** One per message wanted; null for a plain claim, without a lease. */
  leaseTokens: Array<string | null>;
  /** Null for a plain claim. */
  leaseExpiresAt: Micros | null;
  /** The claim's metadata (claim-next of the compatibility surface); none for receives. */
  metadata?: { [key: string]: JsonValue } | null;
}

/** A channel's queue state at one moment (docs/decisions.md#queue-stats). */
export interface QueueStats {
  ready: number;
  delayed: number;
  inFlight: number;
  acknowledged: number;
  deadLettered: number;
  /** Unacknowledged messages past their expiry: live ones not moved yet, and history's. */
  expired: number;
  /** Cancelled messages no one holds any more: live ones not moved yet, and history's. */
  cancelled: number;
  /** Messages waiting for a parent's acknowledgement (docs/decisions.md#dependencies). */
  blocked: number;
  /** Messages waiting for a waitpoint (docs/decisions.md#waitpoints). */
  waiting: number;
  /** When the oldest ready message became available; null when none is ready. */
  oldestReadySince: Micros | null;
  /** Median milliseconds from claim to first acknowledgement over the live acknowledged claimed messages; null when none. */
  claimToAckP50Ms: number | null;
  /** Mean of the same; null when none. */
  claimToAckAvgMs: number | null;
  /** Live messages in any state (not expired). */
  live: number;
  /** Ready messages by priority, index 0 for priority 1 (docs/decisions.md#priorities). */
  readyByPriority: [number, number, number, number, number];
  /** Claimable channels: the groups with open or in-flight work; null for a broadcast channel. */
  groups: GroupStats | null;
}

export interface GroupStats {
  count: number;
  inFlight: number;
  /** The 10 groups with the most ready messages, most first. */
  top: Array<{ groupKey: string; ready: number; inFlight: number; oldestReadySince: Micros | null }>;
}

/** Why a claim, ack or release matched nothing. */
export interface MessageInspection {
  message: MessageRecord;
  mode: ChannelMode;
  access: ChannelAccess;
  channelOwnerKeyId: string;
  callerIsMember: boolean;
}

/** A message found by id, live or archived, with its channel and the caller's standing. */
export interface FoundMessage extends MessageInspection {
  /** When it moved to history; null while it is live. */
  archivedAt: Micros | null;
  /** Why it moved to history; null while it is live. */
  archivedReason: ArchiveReason | null;
}

/**
 * What a claim record means at `now`: the rules, the rendering and the store
 * all have to agree on it, so it lives with the record. A lease that ran out
 * before anyone acknowledged the message no longer holds
 * (docs/decisions.md#leases-and-retract).
 */
export function effectiveClaim(message: MessageRecord, now: Micros): Claim | null {
  const { claim } = message;
  if (!claim) return null;
  if (claim.leaseExpiresAt !== null && claim.leaseExpiresAt <= now && message.acknowledgedBy.length === 0) return null;
  return claim;
}

export const isActive = (message: MessageRecord, now: Micros): boolean => message.expiresAt > now;

/** What a message just posted has of the lifecycle fields: no delivery, cancel, progress or dependencies yet. */
export function freshLifecycle(): Pick<
  MessageRecord,
  "maxDeliveries" | "cancelRequestedAt" | "cancelReason" | "progress" | "dependsOn" | "blockedBy" | "dependentsCount" | "waitpoint"
> {
  return { maxDeliveries: null, cancelRequestedAt: null, cancelReason: null, progress: null, dependsOn: [], blockedBy: 0, dependentsCount: 0, waitpoint: null };
}

/** Every state a message can be in (docs/decisions.md#message-state), in the proto's order. */
export const MESSAGE_STATES = ["ready", "delayed", "blocked", "waiting", "in_flight", "acknowledged", "dead_lettered", "cancelled", "expired"] as const;
export type MessageState = (typeof MESSAGE_STATES)[number];

/** The states a message does not leave: nothing more will happen to it. */
export const FINISHED_STATES: ReadonlySet<MessageState> = new Set(["acknowledged", "dead_lettered", "cancelled", "expired"]);

/** Why a message moved to history (message_history.reason). */
export type ArchiveReason = "expired" | "retracted" | "dead_lettered" | "redriven" | "cancelled";

/**
 * Where a message stands at `now` (docs/decisions.md#message-state), by the
 * rules the channel stats count with (store/message-reads-sql.ts STATS_SQL):
 * acknowledged, expired, in flight, dead-lettered, delayed, ready. An
 * archived copy tells how it ended: acknowledged, dead-lettered, or else
 * expired (it expired, was retracted, or a dead letter was redriven away).
 */
export function messageState(message: MessageRecord, now: Micros, archived: ArchiveReason | null = null): MessageState {
  if (archived !== null) {
    if (archived === "dead_lettered") return "dead_lettered";
    if (message.acknowledgedBy.length > 0) return "acknowledged";
    return message.cancelRequestedAt !== null ? "cancelled" : "expired";
  }
  // Finished work stays finished past its expiry, as its archived copy does.
  if (message.acknowledgedBy.length > 0) return "acknowledged";
  const held = effectiveClaim(message, now) !== null && message.expiresAt > now;
  if (message.blockedBy > 0 && message.cancelRequestedAt === null && message.expiresAt > now) return "blocked";
  // Cancelled: in flight until its holder lets go (the lease ends, a release).
  if (message.cancelRequestedAt !== null) return held ? "in_flight" : "cancelled";
  if (message.expiresAt <= now) return "expired";
  if (held) return "in_flight";
  if (message.maxDeliveries !== null && message.deliveryCount >= message.maxDeliveries) return "dead_lettered";
  // Released to wait for a waitpoint: its timeout is the available_at (docs/decisions.md#waitpoints).
  if (message.availableAt > now && message.waitpoint !== null && !message.waitpoint.completed) return "waiting";
  // Only a delay makes a message wait: its own created_at (PostgreSQL's clock) may be a little ahead of `now`.
  if (message.availableAt > now && message.availableAt > message.createdAt) return "delayed";
  return "ready";
}
