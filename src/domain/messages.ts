/**
 * The rules of live messages: posting (size limits, metadata schema, mentions,
 * pause, throttle, ring buffer), reading by cursor, claiming and
 * acknowledging, leases and retraction (docs/decisions.md#channels-and-messages).
 */
import { randomBytes } from "node:crypto";
import type { Caller } from "../model/caller.js";
import { assertCanUse, assertOwner, namedChannel } from "./channel.js";
import { isAmbiguous, type ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import { isUuid } from "../model/ids.js";
import { violationsOffThread } from "./json-schema-thread.js";
import { effectiveClaim } from "../model/messages.js";
import type { ActorRef } from "../model/actors.js";
import { formatTimestamp, MICROS_PER_SECOND, parseTimestamp, type Clock, type Micros } from "../model/time.js";
import type { CreateRefusal, FoundMessage, ListFilter, MessageInspection, MessageRecord, NewAck, NewMessage, QueueStats } from "../model/messages.js";
import type { ChannelStore } from "../ports/channels.js";
import type { MessageStore } from "../ports/messages.js";
import type { WakeBus } from "../ports/wake-bus.js";
import { noQueueMeter, type QueueMeter } from "../ports/queue-meter.js";
import type { ChannelViewCache } from "./channel-view-cache.js";
import { nextWake, readOrWait, WaiterSlots, type LongPollOptions } from "./long-poll.js";

/** What messages need from actors (implemented by Actors). */
export interface ActorDirectory {
  defaultActor(caller: Caller): Promise<ActorRef>;
  resolveOwn(caller: Caller, ref: string): Promise<ActorRef>;
  resolveForClaim(caller: Caller, ref: string | undefined): Promise<ActorRef>;
  resolveMentions(refs: readonly string[], channel: ChannelView): Promise<ActorRef[]>;
}

export interface MessagesOptions {
  maxContentBytes: number;
  /** Where writes announce themselves and long-polls wait (docs/decisions.md#long-poll). */
  bus: WakeBus;
  /** Runs fn after the current transaction commits (at once outside one). */
  afterCommit: (fn: () => void) => void;
  longPollMaxWaitSeconds: number;
  longPollMaxWaiters: number;
  /** Long-polls and watch streams one key may hold in this process at once. */
  longPollMaxWaitersPerKey: number;
  /** Counts deliveries and dead letters once their transaction commits; none by default. */
  meter?: QueueMeter;
  /** Channel lookups of the hot paths, remembered for a moment (docs/decisions.md#channel-view-cache); none by default. */
  views?: ChannelViewCache;
}

export const MAX_METADATA_BYTES = 16 * 1024;
/** The most a result may be, in UTF-8 bytes (docs/decisions.md#results). */
export const MAX_RESULT_BYTES = 64 * 1024;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;
export const LEASE_SECONDS = { min: 30, max: 3600, default: 300 } as const;
export const RECEIVE_MAX_MESSAGES = { min: 1, max: 100, default: 1 } as const;
export const REDRIVE_MAX_MESSAGES = { min: 1, max: 1000, default: 100 } as const;

export interface NewMessageInput {
  content: string | undefined;
  actor: string | undefined;
  actorLabel: string | undefined;
  metadata: { [key: string]: JsonValue } | undefined;
  mentions: readonly string[];
  /** Seconds before the message is open work (docs/decisions.md#delays); 0..the channel's TTL. */
  delaySeconds?: number | undefined;
}

export interface ListInput {
  since: string | undefined;
  cursor: string | undefined;
  limit: number | undefined;
  status: ListFilter;
  /** Long-poll seconds; capped by the server. */
  wait?: number | undefined;
  /** Ends a long-poll early: the client went away or the server is stopping. */
  signal?: AbortSignal | undefined;
}

export interface ReceiveInput {
  maxMessages: number | undefined;
  leaseSeconds: number | undefined;
  /** Long-poll seconds; capped by the server. */
  wait: number | undefined;
  actor: string | undefined;
  signal?: AbortSignal | undefined;
}

/** A task the caller finished, acknowledged before its next receive. */
export interface CompletedTask {
  messageId: string;
  result?: string | undefined;
}

/** A message received under a lease of its own. */
export interface ReceivedLease {
  message: MessageRecord;
  leaseToken: string;
  leaseExpiresAt: Micros;
}

export interface OpenedWatch {
  /** Where the stream starts: resuming from it later misses nothing written since. */
  cursor: string;
  messages: AsyncGenerator<MessageRecord>;
  /** Gives back the watch's waiter slot; idempotent. Also done when `messages` ends or the signal aborts. */
  close: () => void;
}

/** How often an idle watch re-reads and re-checks the caller's access. */
const WATCH_RECHECK_MS = 15_000;

export interface Page {
  data: MessageRecord[];
  limit: number;
  nextCursor: string | null;
  /**
   * The page came from a re-read shared by the long-polls one wake-up
   * released: they all get this same page (and `data` array).
   */
  shared: boolean;
}

/** A message body that passed the checks needing no channel. */
interface CheckedBody {
  content: string;
  metadata: { [key: string]: JsonValue };
}

/** One item of a batch ack or release: its status, or the error the single call would have thrown. */
export type BatchItemResult<S extends string> = { messageId: string; status: S } | { messageId: string; error: ApiError };

/** What an acknowledgement may carry besides who sends it (docs/decisions.md#results). */
export interface AckExtras {
  result?: string | undefined;
  metadata?: { [key: string]: JsonValue } | undefined;
}

export interface GetInput {
  /** Long-poll seconds to wait for an acknowledgement; capped by the server. */
  wait?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** An acknowledgement's result and metadata, within their size limits. */
interface CheckedAck {
  result: string | null;
  metadata: { [key: string]: JsonValue };
}

function checkAckExtras(extras: AckExtras): CheckedAck {
  const result = extras.result ?? null;
  if (result !== null) {
    const resultBytes = byteLength(result);
    if (resultBytes > MAX_RESULT_BYTES) {
      throw new ApiError("result_too_large", `'result' is ${resultBytes} bytes; the limit is ${MAX_RESULT_BYTES}`, {
        details: { max_result_bytes: MAX_RESULT_BYTES, received_bytes: resultBytes },
      });
    }
  }
  const metadata = extras.metadata ?? {};
  const metadataBytes = byteLength(JSON.stringify(metadata));
  if (metadataBytes > MAX_METADATA_BYTES) {
    throw new ApiError("metadata_too_large", `'metadata' is ${metadataBytes} bytes; the limit is ${MAX_METADATA_BYTES}`, {
      details: { max_metadata_bytes: MAX_METADATA_BYTES, received_bytes: metadataBytes },
    });
  }
  return { result, metadata };
}

export type ClaimStatus = "claimed" | "already_claimed" | "already_acknowledged";
export type AckStatus = "acknowledged" | "already_acknowledged";

const byteLength = (text: string) => Buffer.byteLength(text, "utf8");

export class Messages {
  private readonly meter: QueueMeter;
  constructor(
    private readonly store: MessageStore,
    private readonly channels: ChannelStore,
    private readonly actors: ActorDirectory,
    private readonly clock: Clock,
    private readonly options: MessagesOptions,
  ) {
    this.waiterSlots = new WaiterSlots(options.longPollMaxWaitersPerKey);
    this.meter = options.meter ?? noQueueMeter;
  }

  async create(caller: Caller, identifier: string, input: NewMessageInput): Promise<{ message: MessageRecord; nextCursor: string }> {
    // The body is judged before the channel is looked up: a bad request is a
    // bad request whichever channel it names.
    const body = this.checkBody(input);
    const channel = await this.usableChannel(caller, identifier);
    const result = await this.store.create(await this.prepare(caller, channel, input, body));
    if (result.outcome !== "created") throw refusal(result, channel);
    this.announce(channel.id);
    return { message: result.message, nextCursor: formatTimestamp(result.message.createdAt) };
  }

  /**
   * Posts a batch: every item is judged as create() judges one message, and
   * an item's error carries its `index`. All are stored, in order, or none:
   * the store rolls the batch back when the channel refuses any item (pause,
   * write limit). Long-polls are woken once, for the whole batch.
   */
  async createBatch(caller: Caller, identifier: string, inputs: readonly NewMessageInput[]): Promise<{ messages: MessageRecord[]; nextCursor: string }> {
    checkBatchSize("messages", inputs.length);
    const bodies = inputs.map((input, index) => atIndex(index, () => this.checkBody(input)));
    const channel = await this.usableChannel(caller, identifier);
    const drafts: NewMessage[] = [];
    for (const [index, input] of inputs.entries()) {
      drafts.push(await atIndexAsync(index, () => this.prepare(caller, channel, input, bodies[index]!)));
    }
    const result = await this.store.createAll(channel.id, drafts);
    if (result.outcome !== "created") throw withIndex(result.index, refusal(result, channel));
    this.announce(channel.id);
    const last = result.messages[result.messages.length - 1]!;
    return { messages: result.messages, nextCursor: formatTimestamp(last.createdAt) };
  }

  /** The checks of a message body that need no channel. */
  private checkBody(input: NewMessageInput): CheckedBody {
    const content = input.content;
    if (content === undefined) throw new ApiError("missing_field", "'content' is required", { details: { field: "content" } });
    if (content.trim() === "") throw new ApiError("invalid_string", "'content' must contain a non-whitespace character", { details: { field: "content" } });
    const contentBytes = byteLength(content);
    if (contentBytes > this.options.maxContentBytes) {
      throw new ApiError("content_too_large", `'content' is ${contentBytes} bytes; the limit is ${this.options.maxContentBytes}`, {
        details: { max_content_bytes: this.options.maxContentBytes, received_bytes: contentBytes },
      });
    }
    const metadata = input.metadata ?? {};
    const metadataBytes = byteLength(JSON.stringify(metadata));
    if (metadataBytes > MAX_METADATA_BYTES) {
      throw new ApiError("metadata_too_large", `'metadata' is ${metadataBytes} bytes; the limit is ${MAX_METADATA_BYTES}`, {
        details: { max_metadata_bytes: MAX_METADATA_BYTES, received_bytes: metadataBytes },
      });
    }
    if (input.mentions.some((m) => m.trim() === "")) {
      throw new ApiError("invalid_mentions", "'mentions' entries must be non-empty actor ids or aliases", { details: { field: "mentions" } });
    }
    return { content, metadata };
  }

  /** The checks against the channel (metadata schema), then the message to store with its actor and mentions resolved. */
  private async prepare(caller: Caller, channel: ChannelView, input: NewMessageInput, { content, metadata }: CheckedBody): Promise<NewMessage> {
    const problems = await violationsOffThread(channel.metadataSchema, metadata);
    if (problems.length > 0) {
      throw new ApiError("metadata_validation_failed", `'metadata' does not match the channel's metadata_schema (${problems.length} problem(s))`, {
        details: { violations: problems.map((p) => ({ field: p.field, issue: p.issue })) },
      });
    }
    const delaySeconds = checkDelaySeconds(input.delaySeconds, channel.ttlSeconds);
    const actor = input.actor === undefined ? null : await this.actors.resolveOwn(caller, input.actor);
    const mentions = input.mentions.length === 0 ? [] : await this.actors.resolveMentions(input.mentions, channel);
    return {
      delaySeconds,
      channelId: channel.id,
      authorKeyId: caller.keyId,
      actor,
      actorLabel: input.actorLabel ?? null,
      content,
      metadata,
      mentions,
    };
  }

  async list(caller: Caller, identifier: string, input: ListInput): Promise<Page> {
    const limit = input.limit ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
      throw new ApiError("invalid_limit", `'limit' must be an integer from 1 to ${MAX_PAGE_SIZE}`, { details: { field: "limit" } });
    }
    // `cursor` is accepted as another name for `since`.
    const [field, given] = input.since !== undefined ? (["since", input.since] as const) : (["cursor", input.cursor] as const);
    const since = parseCursor(field, given);
    const wait = checkWait(input.wait);
    const channel = await this.usableChannel(caller, identifier);
    let sharedRead = false;
    const read = (delivery?: number) => {
      sharedRead = delivery !== undefined;
      return this.readPage(channel.id, since, limit, input.status, delivery);
    };
    // Delayed messages are listed at once unless the filter is open work.
    const data = await readOrWait(read, this.longPoll(caller, channel.id, wait, input.signal, input.status === "unclaimed"));
    const last = data[data.length - 1];
    // An empty page echoes the caller's own cursor text, so only a non-empty one is the same for all.
    return { data, limit, nextCursor: last ? formatTimestamp(last.createdAt) : (given ?? null), shared: sharedRead && last !== undefined };
  }

  /**
   * Opens a watch: checks access, then settles where the stream starts —
   * after `since`, or (absent) after the channel's newest message, i.e. only
   * messages written from now on. The returned `cursor` names that start, so
   * a client that loses the stream before any message arrives can resume
   * from it instead of from a later "now" (which would skip what was written
   * in between). `messages` then yields the messages after it, and each new
   * one as it is committed, following the same cursor as list(): a client
   * that resumes from the last cursor it saw gets no gap and no duplicate.
   */
  async openWatch(caller: Caller, identifier: string, since: string | undefined, signal?: AbortSignal): Promise<OpenedWatch> {
    const given = parseCursor("since", since);
    const channel = await this.usableChannel(caller, identifier);
    const start = since === undefined ? await this.store.channelHead(channel.id) : given;
    // An empty channel starts at "0", which replays exactly what comes later.
    const cursor = since ?? (start === null ? "0" : formatTimestamp(start));
    // A watch holds a wake-up subscription for as long as it is open: it
    // counts against the key's waiter slots, and past them it is refused
    // before the stream opens (a stream has no "answer at once").
    const release = this.waiterSlots.take(caller.keyId);
    if (!release) {
      throw new ApiError("too_many_waiters", `This key already holds ${this.options.longPollMaxWaitersPerKey} open watches and long-polls on this server`, {
        details: { max_waiters_per_key: this.options.longPollMaxWaitersPerKey },
      });
    }
    signal?.addEventListener("abort", release, { once: true });
    return { cursor, messages: this.follow(caller, channel, start, signal, release), close: release };
  }

  private async *follow(
    caller: Caller,
    opened: ChannelView,
    start: Micros | null,
    signal: AbortSignal | undefined,
    release: () => void,
  ): AsyncGenerator<MessageRecord> {
    try {
      yield* this.followChannel(caller, opened, start, signal);
    } finally {
      release();
    }
  }

  private async *followChannel(caller: Caller, opened: ChannelView, start: Micros | null, signal?: AbortSignal): AsyncGenerator<MessageRecord> {
    let channel = opened;
    let cursor = start;
    let lastCheck = this.clock.monotonicMs();
    // The wake-up that caused the next read: watchers woken together on one
    // cursor share that read, like long-polls (readPage).
    let delivery: number | undefined;
    while (!signal?.aborted) {
      let wake!: (delivery?: number) => void;
      const woken = new Promise<number | undefined>((resolve) => (wake = resolve));
      const unsubscribe = this.options.bus.subscribe(channel.id, wake);
      try {
        const page = await this.readPage(channel.id, cursor, MAX_PAGE_SIZE, "all", delivery);
        delivery = undefined;
        for (const message of page) {
          yield message;
          cursor = message.createdAt;
        }
        if (page.length === MAX_PAGE_SIZE) continue;
        delivery = await nextWake(woken, wake, this.clock, WATCH_RECHECK_MS, signal);
      } finally {
        unsubscribe();
      }
      // A member removed while watching stops receiving within the recheck interval.
      // By the id it opened: a name (or a re-taken alias) may name another channel by now.
      if (this.clock.monotonicMs() - lastCheck >= WATCH_RECHECK_MS) {
        channel = await this.usableChannel(caller, channel.id);
        lastCheck = this.clock.monotonicMs();
      }
    }
  }

  async claim(caller: Caller, messageId: string, actorRef: string | undefined, metadata: { [key: string]: JsonValue } | undefined): Promise<{ status: ClaimStatus; message: MessageRecord }> {
    assertMessageId(messageId);
    const actor = await this.actors.resolveForClaim(caller, actorRef);
    const now = this.clock.now();
    const claimed = await this.store.claim(messageId, { keyId: caller.keyId, actor, metadata: metadata ?? null, leaseToken: null, leaseExpiresAt: null }, now);
    if (claimed) {
      this.countDelivered([claimed], false);
      return { status: "claimed", message: claimed };
    }
    const found = await this.explainRefusedClaim(caller, messageId, now);
    const claim = effectiveClaim(found.message, now);
    if (!claim) await this.refuseUnavailable(caller, found.message, now);
    if (claim && claim.keyId === caller.keyId && claim.actor.id === actor.id) {
      return { status: found.message.acknowledgedBy.length > 0 ? "already_acknowledged" : "already_claimed", message: found.message };
    }
    throw new ApiError("already_claimed");
  }

  async claimWithLease(
    caller: Caller,
    messageId: string,
    actorRef: string | undefined,
    leaseSeconds: number | undefined,
    metadata: { [key: string]: JsonValue } | undefined,
  ): Promise<{ leaseToken: string; expiresAt: Micros; message: MessageRecord }> {
    assertMessageId(messageId);
    const seconds = checkLeaseSeconds(leaseSeconds);
    const actor = await this.actors.resolveForClaim(caller, actorRef);
    const now = this.clock.now();
    const leaseToken = newLeaseToken();
    const expiresAt = now + seconds * MICROS_PER_SECOND;
    const claimed = await this.store.claim(messageId, { keyId: caller.keyId, actor, metadata: metadata ?? null, leaseToken, leaseExpiresAt: expiresAt }, now);
    if (claimed) {
      this.countDelivered([claimed], false);
      return { leaseToken, expiresAt, message: claimed };
    }
    const found = await this.explainRefusedClaim(caller, messageId, now);
    if (!effectiveClaim(found.message, now)) await this.refuseUnavailable(caller, found.message, now);
    // A lease is exclusive: asking again while any claim holds is a conflict.
    throw new ApiError("already_claimed");
  }

  /**
   * Leases up to maxMessages of the channel's open work to the caller, oldest
   * first (docs/decisions.md#receive). Finding none, it waits for a wake-up
   * on the channel (a post or a release, from any replica) and tries again
   * until the wait ends.
   */
  async receive(caller: Caller, identifier: string, input: ReceiveInput): Promise<ReceivedLease[]> {
    return (await this.prepareReceive(caller, identifier, input)).receive();
  }

  /**
   * Acknowledges the tasks the caller finished, each on its own as
   * ackBatch() would, and receives as receive() does: a worker's loop in one
   * round trip per task (docs/decisions.md#receive). Everything the receive
   * is refused for is judged first, and every result, so a refused request
   * acknowledges nothing. The two run side by side (a request waits for one
   * database round trip, not two); a finished task whose lease had lapsed
   * can be leased again by the receive before its acknowledgement lands, and
   * is then left out of the answer (acknowledged, it is no longer work).
   * When the acknowledgements fail, what the receive leased is released:
   * the caller never sees those leases.
   */
  async completeAndReceive(
    caller: Caller,
    identifier: string,
    input: ReceiveInput,
    complete: readonly CompletedTask[],
  ): Promise<{ completed: Array<BatchItemResult<AckStatus>>; leases: ReceivedLease[] }> {
    if (complete.length === 0) return { completed: [], leases: await this.receive(caller, identifier, input) };
    checkBatchSize("complete", complete.length, 0);
    const acks = complete.map((task, index) => ({ messageId: task.messageId, ...atIndex(index, () => checkAckExtras({ result: task.result }), "complete") }));
    const prepared = await this.prepareReceive(caller, identifier, input);
    const [completed, leased] = await Promise.allSettled([this.acknowledgeEach(caller, prepared.actor, acks), prepared.receive()]);
    if (completed.status === "rejected") {
      if (leased.status === "fulfilled") await this.giveBack(caller, prepared.actor, leased.value);
      throw completed.reason;
    }
    if (leased.status === "rejected") throw leased.reason;
    const done = new Set(completed.value.flatMap((r, i) => ("status" in r && r.status === "acknowledged" ? [acks[i]!.messageId.toLowerCase()] : [])));
    return { completed: completed.value, leases: leased.value.filter((l) => !done.has(l.message.id)) };
  }

  /** Releases leases the caller will never see; a failure leaves them to run out. */
  private async giveBack(caller: Caller, actor: ActorRef, leases: readonly ReceivedLease[]): Promise<void> {
    const now = this.clock.now();
    for (const { message } of leases) await this.store.release(message.id, caller.keyId, actor, now).catch(() => undefined);
    if (leases.length > 0) this.announce(leases[0]!.message.channelId);
  }

  /** Judges a receive and resolves its channel and actor; `receive` then leases (or waits for) work. */
  private async prepareReceive(caller: Caller, identifier: string, input: ReceiveInput): Promise<{ actor: ActorRef; receive: () => Promise<ReceivedLease[]> }> {
    const max = checkMaxMessages(input.maxMessages, RECEIVE_MAX_MESSAGES, ".");
    const seconds = checkLeaseSeconds(input.leaseSeconds);
    const wait = checkWait(input.wait);
    const channel = await this.usableChannel(caller, identifier);
    if (channel.mode !== "claimable") throw new ApiError("channel_not_claimable");
    const actor = await this.actors.resolveForClaim(caller, input.actor);
    const read = async (): Promise<ReceivedLease[]> => {
      const now = this.clock.now();
      const leaseExpiresAt = now + seconds * MICROS_PER_SECOND;
      const leaseTokens = Array.from({ length: max }, newLeaseToken);
      if (channel.maxDeliveries !== null) await this.moveDeadLetters(channel.id, now);
      const leased = await this.store.receive(channel.id, max, { keyId: caller.keyId, actor, leaseTokens, leaseExpiresAt }, now);
      this.countDelivered(leased, true);
      return leased.map((message) => ({ message, leaseToken: message.claim?.leaseToken ?? "", leaseExpiresAt }));
    };
    return { actor, receive: () => readOrWait(read, this.longPoll(caller, channel.id, wait, input.signal, true)) };
  }

  /**
   * Moves the channel's messages that were delivered max_deliveries times
   * and came back out of it before a receive (docs/decisions.md#dead-letters).
   * They are never delivered again either way (the receive and claim
   * statements skip them); moving them here keeps the queue from filling with
   * them and puts them where their owner looks.
   */
  private async moveDeadLetters(channelId: string, now: Micros): Promise<void> {
    const { moved, deadLetterChannelId } = await this.store.deadLetter(channelId, RECEIVE_MAX_MESSAGES.max, now);
    if (moved === 0) return;
    this.options.afterCommit(() => this.meter.deadLettered(moved));
    if (deadLetterChannelId !== null) this.announce(deadLetterChannelId);
  }

  /**
   * A refused claim of a message nobody holds: the claim statement skipped
   * it on purpose when it is a dead letter now (refuseDeadLetter) or not due
   * yet (409 message_delayed); otherwise (a release raced the claim) nothing.
   */
  private async refuseUnavailable(caller: Caller, message: MessageRecord, now: Micros): Promise<void> {
    await this.refuseDeadLetter(caller, message, now);
    if (message.availableAt > now) throw delayed(message, now);
  }

  /**
   * When the message was delivered its channel's max_deliveries times, it is
   * moved out now and the claim is answered 404, as after a receive had moved it.
   */
  private async refuseDeadLetter(caller: Caller, message: MessageRecord, now: Micros): Promise<void> {
    const channel = await this.channels.findView(message.channelId, caller.keyId);
    if (channel === undefined || isAmbiguous(channel) || channel.maxDeliveries === null || message.deliveryCount < channel.maxDeliveries) return;
    await this.moveDeadLetters(channel.id, now);
    throw new ApiError("message_not_found", `The message was delivered ${message.deliveryCount} times, its channel's max_deliveries, and is a dead letter now`, {
      suggestion: "Look for it in the channel's dead-letter channel, or in its history when the channel has none.",
    });
  }

  /**
   * Owner of the (dead-letter) channel only. Moves up to maxMessages of its
   * dead letters back to their origin channels with a fresh delivery count;
   * how many moved (docs/decisions.md#dead-letters).
   */
  async redrive(caller: Caller, identifier: string, maxMessages: number | undefined): Promise<number> {
    const max = checkMaxMessages(maxMessages, REDRIVE_MAX_MESSAGES, ", and call again while 'moved' equals it.");
    const channel = namedChannel(await this.channels.findView(identifier, caller.keyId), identifier);
    assertOwner(channel, caller);
    const moved = await this.store.redrive(channel.id, max, this.clock.now());
    for (const origin of moved) this.announce(origin.originChannelId);
    return moved.reduce((sum, origin) => sum + origin.moved, 0);
  }

  /** The channel's queue state now (docs/decisions.md#queue-stats); anyone who can read the channel. */
  async stats(caller: Caller, identifier: string): Promise<QueueStats> {
    const channel = await this.usableChannel(caller, identifier);
    return this.store.stats(channel.id, this.clock.now());
  }

  async heartbeat(caller: Caller, leaseToken: string, leaseSeconds: number | undefined): Promise<{ leaseToken: string; expiresAt: Micros }> {
    const seconds = checkLeaseSeconds(leaseSeconds);
    const now = this.clock.now();
    const extended = await this.store.heartbeat(leaseToken, caller.keyId, now + seconds * MICROS_PER_SECOND, now);
    if (extended) return extended;
    const holder = await this.store.leaseHolder(leaseToken);
    if (holder !== undefined && holder.keyId !== caller.keyId) {
      // A stranger to a restricted channel learns nothing more than that.
      await this.inspect(holder.messageId, caller, now);
      throw new ApiError("forbidden", "This lease is held by another key", {
        suggestion: "Only the key that claimed the message with this lease may extend it.",
      });
    }
    throw new ApiError("lease_expired");
  }

  /** Gives the claim up; with delaySeconds the message is open work again only that much later (a retry with back-off). */
  async release(caller: Caller, messageId: string, actorRef: string | undefined, delaySeconds?: number): Promise<MessageRecord> {
    assertMessageId(messageId);
    const delay = checkDelaySeconds(delaySeconds, Infinity);
    return this.releaseAs(caller, messageId, await this.actors.resolveForClaim(caller, actorRef), delay);
  }

  /**
   * Releases each id on its own, as release() would, in the order given (a
   * repeated id is judged again). The actor is resolved once: a bad actor
   * refuses the whole request, since it applies to every item.
   */
  async releaseBatch(
    caller: Caller,
    messageIds: readonly string[],
    actorRef: string | undefined,
    delaySeconds?: number,
  ): Promise<Array<BatchItemResult<"released">>> {
    checkBatchSize("message_ids", messageIds.length);
    const delay = checkDelaySeconds(delaySeconds, Infinity);
    const actor = await this.actors.resolveForClaim(caller, actorRef);
    return eachOnItsOwn(messageIds, async (messageId) => {
      assertMessageId(messageId);
      await this.releaseAs(caller, messageId, actor, delay);
      return "released" as const;
    });
  }

  private async releaseAs(caller: Caller, messageId: string, actor: ActorRef, delaySeconds: number): Promise<MessageRecord> {
    const now = this.clock.now();
    let availableAt: Micros | null = null;
    if (delaySeconds > 0) {
      // The bound is the TTL of the message's channel, known only once the message is found.
      const found = await this.explainRefusedClaim(caller, messageId, now);
      const channel = await this.channels.findView(found.message.channelId, caller.keyId);
      checkDelaySeconds(delaySeconds, channel && !isAmbiguous(channel) ? channel.ttlSeconds : Infinity);
      availableAt = now + Math.round(delaySeconds * MICROS_PER_SECOND);
    }
    const released = await this.store.release(messageId, caller.keyId, actor, now, availableAt);
    if (released) {
      // Open work again: wake whoever waits for unclaimed messages.
      this.announce(released.channelId);
      return released;
    }
    const found = await this.explainRefusedClaim(caller, messageId, now);
    const claim = effectiveClaim(found.message, now);
    if (!claim) throw new ApiError("not_claimed");
    throw new ApiError("forbidden", "Only the key and actor holding the claim may release it", {
      suggestion: "Release with the same key and actor that claimed the message.",
    });
  }

  async ack(caller: Caller, messageId: string, actorRef: string | undefined, extras: AckExtras = {}): Promise<{ status: AckStatus; message: MessageRecord }> {
    assertMessageId(messageId);
    const checked = checkAckExtras(extras);
    return this.ackAs(caller, messageId, await this.actors.resolveForClaim(caller, actorRef), checked);
  }

  /**
   * Acknowledges each id on its own, as ack() would (see releaseBatch): one
   * statement acknowledges every id it may, and only the ids it left alone
   * are looked at one by one, to answer as ack() would (already
   * acknowledged, or why not). An id given twice is acknowledged at its first
   * place.
   */
  async ackBatch(caller: Caller, messageIds: readonly string[], actorRef: string | undefined, extras: AckExtras = {}): Promise<Array<BatchItemResult<AckStatus>>> {
    checkBatchSize("message_ids", messageIds.length);
    const checked = checkAckExtras(extras);
    const actor = await this.actors.resolveForClaim(caller, actorRef);
    return this.acknowledgeEach(caller, actor, messageIds.map((messageId) => ({ messageId, ...checked })));
  }

  /** ackBatch() for checked items, each with its own result. */
  private async acknowledgeEach(caller: Caller, actor: ActorRef, items: ReadonlyArray<{ messageId: string } & CheckedAck>): Promise<Array<BatchItemResult<AckStatus>>> {
    const first = new Map<string, { messageId: string; ack: NewAck }>();
    for (const { messageId, result, metadata } of items) {
      const id = messageId.toLowerCase();
      if (isUuid(id) && !first.has(id)) first.set(id, { messageId: id, ack: { keyId: caller.keyId, actor, result, metadata } });
    }
    const acked = await this.store.ackMany([...first.values()], this.clock.now());
    for (const channelId of new Set(acked.map((m) => m.channelId))) this.announce(channelId);
    const pending = new Set(acked.map((m) => m.id));
    return eachOnItsOwn(
      items.map((i) => i.messageId),
      async (messageId, index) => {
        assertMessageId(messageId);
        if (pending.delete(messageId.toLowerCase())) return "acknowledged";
        return (await this.ackAs(caller, messageId, actor, items[index]!)).status;
      },
    );
  }

  private async ackAs(caller: Caller, messageId: string, actor: ActorRef, { result, metadata }: CheckedAck): Promise<{ status: AckStatus; message: MessageRecord }> {
    const now = this.clock.now();
    const acked = await this.store.ack(messageId, { keyId: caller.keyId, actor, result, metadata }, now);
    if (acked) {
      // Producers waiting on GET /v1/messages/{id}?wait= for this ack.
      this.announce(acked.channelId);
      return { status: "acknowledged", message: acked };
    }
    const found = await this.inspect(messageId, caller, now);
    // A replay changes nothing, whatever result it carries: the first one stands.
    if (found.message.acknowledgedBy.some((a) => a.id === actor.id)) return { status: "already_acknowledged", message: found.message };
    if (result !== null) {
      if (found.message.result !== null) throw new ApiError("result_already_set");
      if (found.mode === "claimable") {
        const claim = effectiveClaim(found.message, now);
        if (!claim) throw new ApiError("not_claimed", "Only the holder of the claim may send a result; this message is not claimed");
        if (claim.keyId !== caller.keyId || claim.actor.id !== actor.id) {
          throw new ApiError("forbidden", "Only the key and actor holding the claim may send a result", {
            suggestion: "Acknowledge without 'result', or send it with the key and actor that claimed the message.",
          });
        }
      }
    }
    return { status: "already_acknowledged", message: found.message };
  }

  /**
   * One message by id, for anyone who may read its channel: live, or its
   * archived copy once it moved to history (docs/decisions.md#results). With
   * `wait`, waits until the message is acknowledged (or stops being live),
   * then answers with it as it is then; a wait that runs out answers with
   * the message unacknowledged.
   */
  async get(caller: Caller, messageId: string, input: GetInput = {}): Promise<FoundMessage> {
    assertMessageId(messageId);
    const wait = checkWait(input.wait);
    const found = await this.readable(caller, messageId);
    if (wait === 0 || this.settled(found)) return found;
    let latest = found;
    // The first read was just done above: readOrWait's own first read can
    // answer "nothing yet" without a query; the re-read after subscribing
    // (which no wake-up can slip past) does query.
    let readBefore = true;
    const read = async (): Promise<FoundMessage[]> => {
      if (readBefore) {
        readBefore = false;
        return [];
      }
      // Gone meanwhile (its history purged): answer with what was last seen.
      const current = await this.store.find(messageId, caller.keyId);
      if (current === undefined) return [latest];
      latest = current;
      return this.settled(current) ? [current] : [];
    };
    await readOrWait(read, this.longPoll(caller, found.message.channelId, wait, input.signal, false));
    return latest;
  }

  /**
   * How list, receive and get long-poll on a channel: woken by its writes,
   * capped by the server, within the caller's waiter slots. `openWork` also
   * wakes when a delayed message of the channel falls due or a lease on one
   * of its messages runs out.
   */
  private longPoll(caller: Caller, channelId: string, waitSeconds: number, signal: AbortSignal | undefined, openWork: boolean): LongPollOptions {
    return {
      bus: this.options.bus,
      clock: this.clock,
      channelId,
      waitMs: Math.min(waitSeconds, this.options.longPollMaxWaitSeconds) * 1000,
      maxWaiters: this.options.longPollMaxWaiters,
      takeSlot: () => this.waiterSlots.take(caller.keyId),
      signal,
      nextDue: openWork ? () => this.store.nextAvailableAt(channelId, this.clock.now()) : undefined,
    };
  }

  /** Nothing more will happen to the message that a waiter waits for. */
  private settled(found: FoundMessage): boolean {
    return found.archivedAt !== null || found.message.acknowledgedBy.length > 0 || found.message.expiresAt <= this.clock.now();
  }

  /** The message live or archived, when the caller may read its channel (404, then 403, like the other reads). */
  private async readable(caller: Caller, messageId: string): Promise<FoundMessage> {
    const found = await this.store.find(messageId, caller.keyId);
    if (!found) throw new ApiError("message_not_found");
    if (found.access === "restricted" && found.channelOwnerKeyId !== caller.keyId && !found.callerIsMember) {
      throw new ApiError("channel_access_denied");
    }
    return found;
  }

  async retract(caller: Caller, messageId: string): Promise<void> {
    assertMessageId(messageId);
    const now = this.clock.now();
    const found = await this.inspect(messageId, caller, now);
    const isAuthor = found.message.authorKeyId === caller.keyId;
    if (!isAuthor && found.channelOwnerKeyId !== caller.keyId) {
      throw new ApiError("forbidden", "Only the message's author or the channel owner may retract it");
    }
    if (effectiveClaim(found.message, now)) throw new ApiError("message_claimed");
    if (!(await this.store.retract(found.message, now))) throw new ApiError("message_claimed");
    // A producer waiting on GET /v1/messages/{id}?wait= gets the archived copy at once.
    this.announce(found.message.channelId);
  }

  private readonly readsInFlight = new Map<string, Promise<MessageRecord[]>>();
  private readonly waiterSlots: WaiterSlots;

  /**
   * Re-reads caused by one wake-up delivery share one query: when a wake-up
   * releases a thousand long-polls on one cursor, the database answers once
   * instead of a thousand times. Only reads of the same delivery are shared,
   * so each still starts after the write that woke it committed (a plain
   * read, with no delivery, always runs on its own: read-your-writes).
   * Access was checked per caller before; the page does not depend on who asks.
   */
  private readPage(channelId: string, since: Micros | null, limit: number, status: ListFilter, delivery?: number): Promise<MessageRecord[]> {
    if (delivery === undefined) return this.store.list(channelId, since, limit, status, this.clock.now());
    const key = `${delivery}|${channelId}|${since ?? ""}|${limit}|${status}`;
    let read = this.readsInFlight.get(key);
    if (!read) {
      read = this.store.list(channelId, since, limit, status, this.clock.now()).finally(() => this.readsInFlight.delete(key));
      this.readsInFlight.set(key, read);
    }
    return read;
  }

  /** Counted at commit: a delivery an idempotent request rolls back never happened. */
  private countDelivered(messages: readonly MessageRecord[], received: boolean): void {
    if (messages.length === 0) return;
    const redelivered = messages.filter((m) => m.deliveryCount > 1).length;
    this.options.afterCommit(() => this.meter.delivered({ received: received ? messages.length : 0, redelivered }));
  }

  /** Wakes long-polls and watchers of the channel once the write is committed. */
  private announce(channelId: string): void {
    this.options.afterCommit(() => this.options.bus.publish(channelId));
  }

  /** The channel, if it exists and the caller may read and write it. */
  private async usableChannel(caller: Caller, identifier: string): Promise<ChannelView> {
    const load = () => this.channels.findView(identifier, caller.keyId);
    const found = this.options.views ? await this.options.views.find(identifier, caller.keyId, load) : await load();
    const channel = namedChannel(found, identifier);
    assertCanUse(channel, caller);
    return channel;
  }

  /** 404, 410 and 403 in the contract's order; returns the message when none applies. */
  private async inspect(messageId: string, caller: Caller, now: Micros): Promise<MessageInspection> {
    const found = await this.store.inspect(messageId, caller.keyId);
    if (!found) throw new ApiError("message_not_found");
    if (found.message.expiresAt <= now) throw new ApiError("message_expired");
    if (found.access === "restricted" && found.channelOwnerKeyId !== caller.keyId && !found.callerIsMember) {
      throw new ApiError("channel_access_denied");
    }
    return found;
  }

  /** The reasons a claim can be refused that are not about who holds it, in the order of docs/decisions.md#claims. */
  private async explainRefusedClaim(caller: Caller, messageId: string, now: Micros): Promise<MessageInspection> {
    const found = await this.store.inspect(messageId, caller.keyId);
    if (!found) throw new ApiError("message_not_found");
    if (found.message.expiresAt <= now) throw new ApiError("message_expired");
    if (found.mode !== "claimable") throw new ApiError("channel_not_claimable");
    if (found.access === "restricted" && found.channelOwnerKeyId !== caller.keyId && !found.callerIsMember) {
      throw new ApiError("channel_access_denied");
    }
    return found;
  }
}

function assertMessageId(messageId: string): void {
  if (!isUuid(messageId)) throw new ApiError("message_not_found");
}

/** `max_messages` of receive and redrive: an integer within `bounds`; the suggestion ends with `hint`. */
function checkMaxMessages(value: number | undefined, bounds: { min: number; max: number; default: number }, hint: string): number {
  const max = value ?? bounds.default;
  if (!Number.isInteger(max) || max < bounds.min || max > bounds.max) {
    throw new ApiError("invalid_max_messages", `'max_messages' must be an integer from ${bounds.min} to ${bounds.max}`, {
      details: { field: "max_messages" },
      suggestion: `Use an integer from ${bounds.min} to ${bounds.max}${hint}`,
    });
  }
  return max;
}

const newLeaseToken = () => `lease_${randomBytes(18).toString("base64url")}`;

function checkWait(value: number | undefined): number {
  const wait = value ?? 0;
  if (!Number.isFinite(wait) || wait < 0) {
    throw new ApiError("invalid_wait", "'wait' must be a number of seconds, 0 or more", { details: { field: "wait" } });
  }
  return wait;
}

/** The refusal of a claim on an unclaimed message whose available_at is still ahead. */
function delayed(message: MessageRecord, now: Micros): ApiError {
  const retryAfter = Math.max(1, Math.ceil((message.availableAt - now) / MICROS_PER_SECOND));
  return new ApiError("message_delayed", undefined, {
    details: { available_at: formatTimestamp(message.availableAt), retry_after: retryAfter },
    headers: { "Retry-After": String(retryAfter) },
  });
}

/** 0 (none, the default) up to `maxSeconds`: the channel's TTL, past which the message would expire unseen. */
function checkDelaySeconds(value: number | undefined, maxSeconds: number): number {
  const seconds = value ?? 0;
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > maxSeconds) {
    const range = Number.isFinite(maxSeconds) ? `from 0 to ${maxSeconds} (the channel's ttl_seconds)` : "0 or more";
    throw new ApiError("invalid_delay_seconds", `'delay_seconds' must be a number of seconds, ${range}`, {
      details: Number.isFinite(maxSeconds) ? { field: "delay_seconds", max_delay_seconds: maxSeconds } : { field: "delay_seconds" },
    });
  }
  return seconds;
}

function checkLeaseSeconds(value: number | undefined): number {
  const seconds = value ?? LEASE_SECONDS.default;
  if (!Number.isInteger(seconds) || seconds < LEASE_SECONDS.min || seconds > LEASE_SECONDS.max) {
    throw new ApiError("invalid_lease_seconds", `'lease_seconds' must be an integer from ${LEASE_SECONDS.min} to ${LEASE_SECONDS.max}`, {
      details: { field: "lease_seconds" },
    });
  }
  return seconds;
}

/**
 * A read position: a next_cursor from an earlier page (any RFC 3339 time),
 * or "0" for everything live. URLSearchParams turns an unescaped "+" of an
 * offset into a space, so that is read back as "+".
 */
export function parseCursor(field: "since" | "cursor", value: string | undefined): Micros | null {
  if (value === undefined || value === "" || value === "0") return null;
  const parsed = parseTimestamp(value) ?? parseTimestamp(value.replace(" ", "+"));
  if (parsed === undefined) {
    throw new ApiError(field === "since" ? "invalid_since" : "invalid_cursor", `'${field}' must be a next_cursor value, an RFC 3339 timestamp, or 0`, {
      details: { field },
    });
  }
  return parsed;
}

export const MAX_BATCH_ITEMS = 100;

/** 1..MAX_BATCH_ITEMS items in a batch request. */
function checkBatchSize(field: "messages" | "message_ids" | "complete", count: number, min = 1): void {
  if (count < min || count > MAX_BATCH_ITEMS) {
    throw new ApiError("invalid_batch_size", `'${field}' must hold ${min} to ${MAX_BATCH_ITEMS} items; it holds ${count}`, {
      details: { field, max_items: MAX_BATCH_ITEMS, received_items: count },
    });
  }
}

/** The channel's refusal of a write as the error the caller sees. */
function refusal(result: { outcome: CreateRefusal; retryAfter: number | null }, channel: ChannelView): ApiError {
  switch (result.outcome) {
    case "channel_not_found":
      return new ApiError("channel_not_found");
    case "channel_paused": {
      const retryAfter = result.retryAfter ?? 30;
      return new ApiError("channel_paused", undefined, { details: { retry_after: retryAfter }, headers: { "Retry-After": String(retryAfter) } });
    }
    case "channel_write_rate_exceeded": {
      const retryAfter = result.retryAfter ?? 60;
      return new ApiError("channel_write_rate_exceeded", `The channel accepts ${channel.maxWritesPerMinute} messages per minute`, {
        details: { retry_after: retryAfter },
        headers: { "Retry-After": String(retryAfter) },
      });
    }
  }
}

/** The same error, naming the batch item it is about. */
function withIndex(index: number, err: ApiError, field = "messages"): ApiError {
  return new ApiError(err.code, `${field}[${index}]: ${err.message}`, {
    details: { index, ...err.details },
    suggestion: err.suggestion,
    headers: err.headers,
  });
}

function atIndex<T>(index: number, fn: () => T, field?: string): T {
  try {
    return fn();
  } catch (err) {
    throw err instanceof ApiError ? withIndex(index, err, field) : err;
  }
}

async function atIndexAsync<T>(index: number, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof ApiError ? withIndex(index, err) : err;
  }
}

/**
 * Runs `fn` for each id in turn (in order, so a repeated id sees the effect
 * of its earlier occurrence); an ApiError becomes that item's result, any
 * other failure (the database) fails the request.
 */
async function eachOnItsOwn<S extends string>(
  messageIds: readonly string[],
  fn: (messageId: string, index: number) => Promise<S>,
): Promise<Array<BatchItemResult<S>>> {
  const results: Array<BatchItemResult<S>> = [];
  for (const [index, messageId] of messageIds.entries()) {
    try {
      results.push({ messageId, status: await fn(messageId, index) });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      results.push({ messageId, error: err });
    }
  }
  return results;
}
