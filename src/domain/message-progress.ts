/**
 * Progress and following one message (docs/decisions.md#progress): the
 * holder of a lease reports progress (structured data, text to replace or
 * append to); whoever may read the channel follows the message as a stream
 * of `progress`, `state` and `result` events until it is finished.
 *
 * A progress report wakes the message's own topic, not its channel's: a
 * worker streaming output must not wake every long-poll on the queue.
 * Everything else that changes a message (an ack, a release, a cancel)
 * already wakes its channel, so a follower listens to both.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import { FINISHED_STATES, MESSAGE_STATES, messageState, type FoundMessage, type MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";
import { nextWake } from "./long-poll.js";
import type { MessageContext } from "./message-context.js";
import { assertMessageId, byteLength, MAX_METADATA_BYTES } from "./message-rules.js";

/** Bytes of text one report may carry. */
export const MAX_PROGRESS_REPORT_TEXT_BYTES = 65_536;

/** The wake-up topic of one message: progress reports announce themselves there. */
export const messageTopic = (messageId: string): string => `message:${messageId}`;

export interface ProgressInput {
  leaseToken: string;
  data?: { [key: string]: JsonValue } | undefined;
  text?: string | undefined;
  append?: boolean | undefined;
}

export type MessageEventKind = "progress" | "state" | "result";

export interface MessageEvent {
  event: MessageEventKind;
  /** Resume after it: what changed since is sent again, nothing else. */
  cursor: string;
  found: FoundMessage;
}

export interface OpenedMessageWatch {
  events: AsyncIterable<MessageEvent>;
  close(): void;
}


/** What a follower has seen: the progress time, the state, whether a result, whether a cancel was requested. */
interface Seen {
  progress: Micros;
  state: number;
  result: boolean;
  cancel: boolean;
}

const cursorOf = (seen: Seen) => `${seen.progress}.${seen.state}.${seen.result ? 1 : 0}.${seen.cancel ? 1 : 0}`;

function parseSince(since: string | undefined): Seen | null {
  if (since === undefined || since === "") return null;
  const match = /^(\d{1,20})\.(\d)\.([01])\.([01])$/.exec(since);
  if (!match || Number(match[2]) >= MESSAGE_STATES.length) {
    throw new ApiError("invalid_since", "'since' of a message's events is an event id from the stream (Last-Event-ID), unchanged", {
      suggestion: "Pass the id of the last event you received, or leave since out to start with the message as it is.",
    });
  }
  return { progress: Number(match[1]), state: Number(match[2]), result: match[3] === "1", cancel: match[4] === "1" };
}

/** Longest a follower waits without reading the message again (a lapse or a delay running out announces nothing). */
const RECHECK_MS = 30_000;

export class MessageProgressing {
  constructor(private readonly ctx: MessageContext) {}

  async report(caller: Caller, messageId: string, input: ProgressInput): Promise<MessageRecord> {
    assertMessageId(messageId);
    const data = input.data;
    const text = input.text;
    if (data === undefined && text === undefined) {
      throw new ApiError("invalid_progress", "A progress report carries data, text or both");
    }
    const dataBytes = data === undefined ? 0 : byteLength(JSON.stringify(data));
    if (dataBytes > MAX_METADATA_BYTES) {
      throw new ApiError("progress_too_large", `'data' is ${dataBytes} bytes of JSON; the limit is ${MAX_METADATA_BYTES}`, { details: { field: "data", max: MAX_METADATA_BYTES } });
    }
    const textBytes = text === undefined ? 0 : byteLength(text);
    if (textBytes > MAX_PROGRESS_REPORT_TEXT_BYTES) {
      throw new ApiError("progress_too_large", `'text' is ${textBytes} bytes; one report carries at most ${MAX_PROGRESS_REPORT_TEXT_BYTES}`, {
        details: { field: "text", max: MAX_PROGRESS_REPORT_TEXT_BYTES },
      });
    }
    const now = this.ctx.clock.now();
    const reported = await this.ctx.store.reportProgress(messageId, input.leaseToken, caller.keyId, now, {
      data: data ?? null,
      text: text ?? null,
      append: input.append === true,
    });
    if (reported === undefined) {
      await this.ctx.findReadable(caller, messageId);
      throw new ApiError("not_lease_holder");
    }
    this.ctx.announce(messageTopic(reported.id));
    return reported;
  }

  /**
   * Follows one message: checked (404, 403) before the stream opens, and
   * holding one of the key's waiter slots while it is open.
   */
  async openWatch(caller: Caller, messageId: string, since: string | undefined, signal?: AbortSignal): Promise<OpenedMessageWatch> {
    assertMessageId(messageId);
    const seen = parseSince(since);
    const found = await this.ctx.findReadable(caller, messageId);
    const release = this.ctx.takeStreamSlot(caller, signal);
    const events = this.follow(caller, found, seen, signal, release);
    return { events, close: release };
  }

  private async *follow(caller: Caller, first: FoundMessage, since: Seen | null, signal: AbortSignal | undefined, release: () => void): AsyncGenerator<MessageEvent> {
    const { clock, options } = this.ctx;
    let seen = since;
    let found: FoundMessage | undefined;
    try {
      while (!signal?.aborted) {
        let wake!: (delivery?: number) => void;
        const woken = new Promise<number | undefined>((resolve) => (wake = resolve));
        // Subscribed before the read: nothing written after it slips by.
        const topics = [first.message.channelId, messageTopic(first.message.id)];
        const unsubscribe = topics.map((t) => options.bus.subscribe(t, wake));
        try {
          // Read after subscribing (the opening read came before): a change in between is seen now, not at the next one.
          found = await this.ctx.store.find(first.message.id, caller.keyId);
          // Gone (history purged): nothing more will come.
          if (found === undefined) return;
          const now = clock.now();
          const state = found.archivedAt === null ? messageState(found.message, now) : messageState(found.message, found.archivedAt, found.archivedReason);
          const current: Seen = {
            progress: found.message.progress?.updatedAt ?? 0,
            state: MESSAGE_STATES.indexOf(state),
            result: found.message.result !== null,
            cancel: found.message.cancelRequestedAt !== null,
          };
          const changed: MessageEventKind[] = [];
          // A cancel requested of a message in flight is news to its holder, though its state stays.
          if (seen === null || current.state !== seen.state || current.cancel !== seen.cancel) changed.push("state");
          if (current.progress > (seen?.progress ?? 0)) changed.push("progress");
          if (current.result && !(seen?.result ?? false)) changed.push("result");
          seen = current;
          for (const event of changed) yield { event, cursor: cursorOf(current), found };
          if (found.archivedAt !== null || FINISHED_STATES.has(state)) return;
          await nextWake(woken, wake, clock, this.untilNextBoundary(found.message, now), signal);
        } finally {
          for (const u of unsubscribe) u();
        }
      }
    } finally {
      release();
    }
  }

  /** Milliseconds until the message's state may change with no write to announce it: a lease or a delay running out, its expiry. */
  private untilNextBoundary(message: MessageRecord, now: Micros): number {
    const ahead = [message.claim?.leaseExpiresAt ?? null, message.availableAt, message.expiresAt].filter((t): t is Micros => t !== null && t > now);
    if (ahead.length === 0) return RECHECK_MS;
    return Math.min(RECHECK_MS, Math.ceil((Math.min(...ahead) - now) / 1000) + 50);
  }
}
