/**
 * What the message use cases share: their stores and settings, the channel
 * lookup and access check, the wake-up announcement after commit, how a
 * long-poll on a channel is set up, the shared re-read of a wake-up, and
 * the order in which a refused operation on one message is explained.
 */
import type { ActorRef } from "../model/actors.js";
import type { Caller } from "../model/caller.js";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { FoundMessage, ListFilter, MessageInspection, MessageRecord } from "../model/messages.js";
import type { Clock, Micros } from "../model/time.js";
import type { ChannelStore } from "../ports/channels.js";
import type { MessageStore } from "../ports/messages.js";
import { noQueueMeter, type QueueMeter } from "../ports/queue-meter.js";
import type { WakeBus } from "../ports/wake-bus.js";
import { assertCanUse, namedChannel } from "./channel.js";
import type { ChannelViewCache } from "./channel-view-cache.js";
import { WaiterSlots, type LongPollOptions } from "./long-poll.js";

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
  /** Refuses posts past the author's storage quotas (docs/decisions.md#quotas); none by default. */
  quotas?: { admitMessages(caller: Caller, messages: number, bytes: number): Promise<void> };
}

export class MessageContext {
  readonly meter: QueueMeter;
  readonly waiterSlots: WaiterSlots;
  private readonly readsInFlight = new Map<string, Promise<MessageRecord[]>>();

  constructor(
    readonly store: MessageStore,
    readonly channels: ChannelStore,
    readonly actors: ActorDirectory,
    readonly clock: Clock,
    readonly options: MessagesOptions,
  ) {
    this.waiterSlots = new WaiterSlots(options.longPollMaxWaitersPerKey);
    this.meter = options.meter ?? noQueueMeter;
  }

  /** The channel, if it exists and the caller may read and write it. */
  async usableChannel(caller: Caller, identifier: string): Promise<ChannelView> {
    const load = () => this.channels.findView(identifier, caller.keyId);
    const found = this.options.views ? await this.options.views.find(identifier, caller.keyId, load) : await load();
    const channel = namedChannel(found, identifier);
    assertCanUse(channel, caller);
    return channel;
  }

  /** Wakes long-polls and watchers of the channel once the write is committed. */
  /** The message live or archived, when the caller may read its channel (404, then 403, like the other reads). */
  async findReadable(caller: Caller, messageId: string): Promise<FoundMessage> {
    const found = await this.store.find(messageId, caller.keyId);
    if (!found) throw new ApiError("message_not_found");
    if (found.access === "restricted" && found.channelOwnerKeyId !== caller.keyId && !found.callerIsMember) {
      throw new ApiError("channel_access_denied");
    }
    return found;
  }

  /**
   * A watch stream's waiter slot, held while it is open: past the key's
   * slots it is refused before the stream opens (a stream has no "answer at
   * once"). Given back when `signal` aborts, or by calling the result.
   */
  takeStreamSlot(caller: Caller, signal: AbortSignal | undefined): () => void {
    const release = this.waiterSlots.take(caller.keyId);
    if (!release) {
      const max = this.options.longPollMaxWaitersPerKey;
      throw new ApiError("too_many_waiters", `This key already holds ${max} open watches and long-polls on this server`, {
        details: { max_waiters_per_key: max },
      });
    }
    signal?.addEventListener("abort", release, { once: true });
    // Already aborted, the event will not fire again: give the slot back now.
    if (signal?.aborted) release();
    return release;
  }

  announce(channelId: string): void {
    this.options.afterCommit(() => this.options.bus.publish(channelId));
  }

  /** Counted at commit: a delivery an idempotent request rolls back never happened. */
  countDelivered(messages: readonly MessageRecord[], received: boolean): void {
    if (messages.length === 0) return;
    const redelivered = messages.filter((m) => m.deliveryCount > 1).length;
    this.options.afterCommit(() => this.meter.delivered({ received: received ? messages.length : 0, redelivered }));
  }

  /**
   * How list, receive and get long-poll on a channel: woken by its writes,
   * capped by the server, within the caller's waiter slots. `openWork` also
   * wakes when a delayed message of the channel falls due or a lease on one
   * of its messages runs out.
   */
  longPoll(caller: Caller, channelId: string, waitSeconds: number, signal: AbortSignal | undefined, openWork: boolean, recheckMs?: number): LongPollOptions {
    return {
      bus: this.options.bus,
      clock: this.clock,
      channelId,
      waitMs: Math.min(waitSeconds, this.options.longPollMaxWaitSeconds) * 1000,
      maxWaiters: this.options.longPollMaxWaiters,
      takeSlot: () => this.waiterSlots.take(caller.keyId),
      signal,
      nextDue: openWork ? (after) => this.store.nextAvailableAt(channelId, after) : undefined,
      recheckMs,
    };
  }

  /**
   * Re-reads caused by one wake-up delivery share one query: when a wake-up
   * releases a thousand long-polls on one cursor, the database answers once
   * instead of a thousand times. Only reads of the same delivery are shared,
   * so each still starts after the write that woke it committed (a plain
   * read, with no delivery, always runs on its own: read-your-writes).
   * Access was checked per caller before; the page does not depend on who asks.
   */
  readPage(channelId: string, since: Micros | null, limit: number, status: ListFilter, delivery?: number): Promise<MessageRecord[]> {
    if (delivery === undefined) return this.store.list(channelId, since, limit, status, this.clock.now());
    const key = `${delivery}|${channelId}|${since ?? ""}|${limit}|${status}`;
    let read = this.readsInFlight.get(key);
    if (!read) {
      read = this.store.list(channelId, since, limit, status, this.clock.now()).finally(() => this.readsInFlight.delete(key));
      this.readsInFlight.set(key, read);
    }
    return read;
  }

  /** 404, 410 and 403 in the contract's order; returns the message when none applies. */
  async inspect(messageId: string, caller: Caller, now: Micros): Promise<MessageInspection> {
    const found = await this.store.inspect(messageId, caller.keyId);
    if (!found) throw new ApiError("message_not_found");
    if (found.message.expiresAt <= now) throw new ApiError("message_expired");
    if (found.access === "restricted" && found.channelOwnerKeyId !== caller.keyId && !found.callerIsMember) {
      throw new ApiError("channel_access_denied");
    }
    return found;
  }

  /** The reasons a claim can be refused that are not about who holds it, in the order of docs/decisions.md#claims. */
  async explainRefusedClaim(caller: Caller, messageId: string, now: Micros): Promise<MessageInspection> {
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
