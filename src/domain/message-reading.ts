/**
 * Reading live messages: pages by cursor (with long-poll), following a
 * channel as messages are committed, one message by id (waiting for its
 * acknowledgement), and the channel's queue state
 * (docs/decisions.md#long-poll, #watch, #results, #queue-stats).
 */
import type { Caller } from "../model/caller.js";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import { FINISHED_STATES, messageState, type FoundMessage, type ListFilter, type MessageRecord, type QueueStats } from "../model/messages.js";
import { formatTimestamp, MICROS_PER_SECOND, parseTimestamp, type Micros } from "../model/time.js";
import { nextWake, readOrWait } from "./long-poll.js";
import { messageTopic } from "./message-progress.js";
import type { MessageContext } from "./message-context.js";
import { assertMessageId, checkWait, MAX_PAGE_SIZE, parseCursor } from "./message-rules.js";
import { validatePageLimit } from "./paging.js";


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

export interface GetInput {
  /** Long-poll seconds to wait for an acknowledgement; capped by the server. */
  wait?: number | undefined;
  /** With wait: answer also on progress newer than this (RFC 3339, the progress.updated_at last seen). */
  progressAfter?: string | undefined;
  signal?: AbortSignal | undefined;
}

/** progress_after: an RFC 3339 time (a progress.updated_at as the service wrote it). */
function parseProgressAfter(text: string): Micros {
  const at = parseTimestamp(text);
  if (at === undefined) {
    throw new ApiError("invalid_progress_after", "'progress_after' is an RFC 3339 time: the progress.updated_at you last saw", {
      suggestion: "Pass the message's progress.updated_at unchanged.",
    });
  }
  return at;
}

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

export interface OpenedWatch {
  /** Where the stream starts: resuming from it later misses nothing written since. */
  cursor: string;
  messages: AsyncGenerator<MessageRecord>;
  /** Gives back the watch's waiter slot; idempotent. Also done when `messages` ends or the signal aborts. */
  close: () => void;
}

/** How often an idle watch re-reads and re-checks the caller's access. */
const WATCH_RECHECK_MS = 15_000;

export class MessageReading {
  constructor(private readonly ctx: MessageContext) {}

  async list(caller: Caller, identifier: string, input: ListInput): Promise<Page> {
    const limit = validatePageLimit(input.limit);
    // `cursor` is accepted as another name for `since`.
    const [field, given] = input.since !== undefined ? (["since", input.since] as const) : (["cursor", input.cursor] as const);
    const since = parseCursor(field, given);
    const wait = checkWait(input.wait);
    const channel = await this.ctx.usableChannel(caller, identifier);
    // Unclaimed work of a claimable channel is what a receive could lease: an
    // acknowledged message is finished even if nobody claimed it first.
    const filter = input.status === "unclaimed" && channel.mode === "claimable" ? "open" : input.status;
    let sharedRead = false;
    const read = (delivery?: number) => {
      sharedRead = delivery !== undefined;
      return this.ctx.readPage(channel.id, since, limit, filter, delivery);
    };
    // Delayed messages are listed at once unless the filter is open work.
    const data = await readOrWait(read, this.ctx.longPoll(caller, channel.id, wait, input.signal, input.status === "unclaimed"));
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
    const channel = await this.ctx.usableChannel(caller, identifier);
    const start = since === undefined ? await this.ctx.store.channelHead(channel.id) : given;
    // An empty channel starts at "0", which replays exactly what comes later.
    const cursor = since ?? (start === null ? "0" : formatTimestamp(start));
    // A watch holds a wake-up subscription for as long as it is open: it counts against the key's waiter slots.
    const release = this.ctx.takeStreamSlot(caller, signal);
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
    const { clock, options } = this.ctx;
    let channel = opened;
    let cursor = start;
    let lastCheck = clock.monotonicMs();
    // The wake-up that caused the next read: watchers woken together on one
    // cursor share that read, like long-polls (readPage).
    let delivery: number | undefined;
    while (!signal?.aborted) {
      let wake!: (delivery?: number) => void;
      const woken = new Promise<number | undefined>((resolve) => (wake = resolve));
      const unsubscribe = options.bus.subscribe(channel.id, wake);
      try {
        const page = await this.ctx.readPage(channel.id, cursor, MAX_PAGE_SIZE, "all", delivery);
        delivery = undefined;
        for (const message of page) {
          yield message;
          cursor = message.createdAt;
        }
        if (page.length === MAX_PAGE_SIZE) continue;
        delivery = await nextWake(woken, wake, clock, WATCH_RECHECK_MS, signal);
      } finally {
        unsubscribe();
      }
      // A member removed while watching stops receiving within the recheck interval.
      // By the id it opened: a name (or a re-taken alias) may name another channel by now.
      if (clock.monotonicMs() - lastCheck >= WATCH_RECHECK_MS) {
        channel = await this.ctx.usableChannel(caller, channel.id);
        lastCheck = clock.monotonicMs();
      }
    }
  }

  /**
   * A message's live dependents (docs/decisions.md#dependencies), for anyone
   * who may read it: those of channels the caller may read, oldest first.
   */
  async dependents(caller: Caller, messageId: string): Promise<MessageRecord[]> {
    assertMessageId(messageId);
    const found = await this.ctx.findReadable(caller, messageId);
    return this.ctx.store.dependentsOf(found.message.id, caller.keyId);
  }

  /** A trace's live messages the caller may read (docs/decisions.md#trace-context); 422 invalid_trace_id for anything but 32 hex digits. */
  async inTrace(caller: Caller, traceId: string): Promise<MessageRecord[]> {
    const id = traceId.toLowerCase();
    if (!/^[0-9a-f]{32}$/.test(id)) throw new ApiError("invalid_trace_id", "'trace_id' is 32 hex digits, the second field of a traceparent", { details: { field: "trace_id" } });
    return this.ctx.store.inTrace(id, caller.keyId);
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
    const progressAfter = input.progressAfter === undefined ? undefined : parseProgressAfter(input.progressAfter);
    const found = await this.ctx.findReadable(caller, messageId);
    // Waiting for progress too: newer progress than the caller saw answers (docs/decisions.md#progress).
    const changed = (m: FoundMessage) => this.settled(m) || (progressAfter !== undefined && (m.message.progress?.updatedAt ?? 0) > progressAfter);
    if (wait === 0 || changed(found)) return found;
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
      const current = await this.ctx.store.find(messageId, caller.keyId);
      if (current === undefined) return [latest];
      latest = current;
      return changed(current) ? [current] : [];
    };
    // A cancelled message in flight is cancelled when its lease ends, which
    // nothing announces: the wait ends then, to read it again.
    const lease = found.message.cancelRequestedAt === null ? null : (found.message.claim?.leaseExpiresAt ?? null);
    const untilLapse = lease === null ? Infinity : Math.max(0, (lease - this.ctx.clock.now()) / MICROS_PER_SECOND) + 0.05;
    const poll = this.ctx.longPoll(caller, found.message.channelId, Math.min(wait, untilLapse), input.signal, false);
    await readOrWait(read, progressAfter === undefined ? poll : { ...poll, alsoOn: [messageTopic(found.message.id)] });
    if (untilLapse < wait && !changed(latest)) latest = (await this.ctx.store.find(messageId, caller.keyId)) ?? latest;
    return latest;
  }

  /** The channel's queue state now (docs/decisions.md#queue-stats); anyone who can read the channel. */
  async stats(caller: Caller, identifier: string): Promise<{ channelId: string; stats: QueueStats }> {
    const channel = await this.ctx.usableChannel(caller, identifier);
    return { channelId: channel.id, stats: await this.ctx.store.stats(channel.id, this.ctx.clock.now()) };
  }

  /** Nothing more will happen to the message that a waiter waits for: archived, or in a state it cannot leave (docs/decisions.md#message-state). */
  private settled(found: FoundMessage): boolean {
    return found.archivedAt !== null || FINISHED_STATES.has(messageState(found.message, this.ctx.clock.now()));
  }


}
