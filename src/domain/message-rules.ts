/**
 * The bounds and input rules every message use case shares: sizes, lease and
 * receive bounds, waits, delays, cursors, batch sizes, and how a batch item's
 * error names its item (docs/decisions.md#channels-and-messages).
 */
import { randomBytes } from "node:crypto";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import { isUuid } from "../model/ids.js";
import type { CreateRefusal, MessageRecord } from "../model/messages.js";
import { formatTimestamp, MICROS_PER_SECOND, parseTimestamp, type Micros } from "../model/time.js";

export const MAX_METADATA_BYTES = 16 * 1024;
/** The most a result may be, in UTF-8 bytes (docs/decisions.md#results). */
export const MAX_RESULT_BYTES = 64 * 1024;
export const MAX_PAGE_SIZE = 100;
export const LEASE_SECONDS = { min: 30, max: 3600, default: 300 } as const;
export const RECEIVE_MAX_MESSAGES = { min: 1, max: 100, default: 1 } as const;
export const REDRIVE_MAX_MESSAGES = { min: 1, max: 1000, default: 100 } as const;
export const MAX_BATCH_ITEMS = 100;

export const byteLength = (text: string) => Buffer.byteLength(text, "utf8");

/** One item of a batch ack or release: its status, or the error the single call would have thrown. */
/** cancelRequested: an acknowledged message had been cancelled while it was worked (docs/decisions.md#cancel). */
export type BatchItemResult<S extends string> = { messageId: string; status: S; cancelRequested?: boolean } | { messageId: string; error: ApiError };

/** What an acknowledgement may carry besides who sends it (docs/decisions.md#results). */
export interface AckExtras {
  result?: string | undefined;
  metadata?: { [key: string]: JsonValue } | undefined;
}

/** An acknowledgement's result and metadata, within their size limits. */
export interface CheckedAck {
  result: string | null;
  metadata: { [key: string]: JsonValue };
}

export function checkAckExtras(extras: AckExtras): CheckedAck {
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
  checkMetadataSize(metadata);
  return { result, metadata };
}

/** 422 metadata_too_large past MAX_METADATA_BYTES of JSON. */
export function checkMetadataSize(metadata: { [key: string]: JsonValue }): void {
  const metadataBytes = byteLength(JSON.stringify(metadata));
  if (metadataBytes > MAX_METADATA_BYTES) {
    throw new ApiError("metadata_too_large", `'metadata' is ${metadataBytes} bytes; the limit is ${MAX_METADATA_BYTES}`, {
      details: { max_metadata_bytes: MAX_METADATA_BYTES, received_bytes: metadataBytes },
    });
  }
}

export function assertMessageId(messageId: string): void {
  if (!isUuid(messageId)) throw new ApiError("message_not_found");
}

/** `max_messages` of receive and redrive: an integer within `bounds`; the suggestion ends with `hint`. */
export function checkMaxMessages(value: number | undefined, bounds: { min: number; max: number; default: number }, hint: string): number {
  const max = value ?? bounds.default;
  if (!Number.isInteger(max) || max < bounds.min || max > bounds.max) {
    throw new ApiError("invalid_max_messages", `'max_messages' must be an integer from ${bounds.min} to ${bounds.max}`, {
      details: { field: "max_messages" },
      suggestion: `Use an integer from ${bounds.min} to ${bounds.max}${hint}`,
    });
  }
  return max;
}

export const newLeaseToken = () => `lease_${randomBytes(18).toString("base64url")}`;

export function checkWait(value: number | undefined): number {
  const wait = value ?? 0;
  if (!Number.isFinite(wait) || wait < 0) {
    throw new ApiError("invalid_wait", "'wait' must be a number of seconds, 0 or more", { details: { field: "wait" } });
  }
  return wait;
}

/** The refusal of a claim on an unclaimed message whose available_at is still ahead. */
export function delayed(message: MessageRecord, now: Micros): ApiError {
  const retryAfter = Math.max(1, Math.ceil((message.availableAt - now) / MICROS_PER_SECOND));
  return new ApiError("message_delayed", undefined, {
    details: { available_at: formatTimestamp(message.availableAt), retry_after: retryAfter },
    headers: { "Retry-After": String(retryAfter) },
  });
}

/** 0 (none, the default) up to `maxSeconds`: the channel's TTL, past which the message would expire unseen. */
export function checkDelaySeconds(value: number | undefined, maxSeconds: number): number {
  const seconds = value ?? 0;
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > maxSeconds) {
    const range = Number.isFinite(maxSeconds) ? `from 0 to ${maxSeconds} (the channel's ttl_seconds)` : "0 or more";
    throw new ApiError("invalid_delay_seconds", `'delay_seconds' must be a number of seconds, ${range}`, {
      details: Number.isFinite(maxSeconds) ? { field: "delay_seconds", max_delay_seconds: maxSeconds } : { field: "delay_seconds" },
    });
  }
  return seconds;
}

export function checkLeaseSeconds(value: number | undefined): number {
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

/** 1..MAX_BATCH_ITEMS items in a batch request. */
export function checkBatchSize(field: "messages" | "message_ids" | "complete", count: number, min = 1): void {
  if (count < min || count > MAX_BATCH_ITEMS) {
    throw new ApiError("invalid_batch_size", `'${field}' must hold ${min} to ${MAX_BATCH_ITEMS} items; it holds ${count}`, {
      details: { field, max_items: MAX_BATCH_ITEMS, received_items: count },
    });
  }
}

/** The channel's refusal of a write as the error the caller sees. */
export function refusal(result: { outcome: CreateRefusal; retryAfter: number | null }, channel: ChannelView): ApiError {
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
export function withIndex(index: number, err: ApiError, field = "messages"): ApiError {
  return new ApiError(err.code, `${field}[${index}]: ${err.message}`, {
    details: { index, ...err.details },
    suggestion: err.suggestion,
    headers: err.headers,
  });
}

export function atIndex<T>(index: number, fn: () => T, field?: string): T {
  try {
    return fn();
  } catch (err) {
    throw err instanceof ApiError ? withIndex(index, err, field) : err;
  }
}

export async function atIndexAsync<T>(index: number, fn: () => Promise<T>): Promise<T> {
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
export async function eachOnItsOwn<S extends string>(
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
