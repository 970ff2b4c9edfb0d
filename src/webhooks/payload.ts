/**
 * What a webhook request carries (docs/decisions.md#webhook-requests): the body, rendered from the
 * stored message exactly as the REST API renders it, and the headers.
 */
import { createHmac } from "node:crypto";
import { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import type { MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";
// The REST renderer, called through its public functions so the webhook body
// is byte for byte what GET /v1/messages… shows (and gets its speed-ups).
import { renderMessageJson } from "../protocol/json-render-text.js";
import { renderMessage } from "../protocol/render-message.js";
import type { ClaimedDelivery, WebhookEvent } from "../model/webhooks.js";
import { traceHeaders, type TraceContext } from "../model/trace.js";

export const USER_AGENT = "agentbus-webhook/1";

/** `{"message": Message}`, or with `mentioned_actor_id` for a mention push. */
export function messageBody(message: MessageRecord, now: Micros, mentionedActorId: string | null): string {
  const rendered = renderMessageJson(MessageSchema, renderMessage(message, now));
  return mentionedActorId === null
    ? `{"message":${rendered}}`
    : `{"message":${rendered},"mentioned_actor_id":${JSON.stringify(mentionedActorId)}}`;
}

/**
 * The trace context a message event's body carries (`message.trace`), as the
 * headers a receiver's tracing picks up (docs/decisions.md#trace-context).
 * Read from the body, not the message, because retries send the body kept
 * from the first attempt and the message may be gone by then.
 */
export function bodyTrace(body: string): TraceContext | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  const trace = (parsed as { message?: { trace?: { traceparent?: unknown; tracestate?: unknown } } } | null)?.message?.trace;
  if (trace === undefined || trace === null || typeof trace.traceparent !== "string") return null;
  return { traceparent: trace.traceparent, tracestate: typeof trace.tracestate === "string" ? trace.tracestate : null };
}

/** `sha256=<lowercase hex HMAC-SHA256(secret, raw body)>`. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`;
}

/**
 * Standard Webhooks' `webhook-signature`: `v1,<base64 HMAC-SHA256 of
 * "{id}.{timestamp}.{body}">`. The key is the UTF-8 bytes of the webhook's
 * secret exactly as it was set (the same key as X-Service-Signature), not a
 * `whsec_`-prefixed base64 string: a Standard Webhooks library verifies it
 * when given `whsec_` + base64(UTF-8 secret).
 */
export function standardSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac("sha256", secret).update(`${id}.${timestampSeconds}.${body}`, "utf8").digest("base64")}`;
}

/**
 * The request's headers. `legacySignatureHeader` (AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER) carries
 * X-Service-Signature's value a second time under the reference's header name, so receivers written
 * for it verify our deliveries unchanged.
 */
export function webhookHeaders(
  event: WebhookEvent,
  deliveryId: string,
  body: string,
  secret: string | null,
  now: Micros,
  legacySignatureHeader?: string,
  /** The body's trace context (bodyTrace), sent as traceparent and tracestate. */
  trace: TraceContext | null = null,
): Record<string, string> {
  const timestamp = Math.floor(now / 1_000_000);
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "User-Agent": USER_AGENT,
    "X-Service-Event": event,
    "X-Service-Delivery": deliveryId,
    // Unix seconds of this attempt (as Standard Webhooks' webhook-timestamp).
    "X-Service-Timestamp": String(timestamp),
    // Standard Webhooks: the id is the delivery id (stable across retries), the
    // timestamp this attempt's, so a receiver can refuse replays (issue 11).
    "webhook-id": deliveryId,
    "webhook-timestamp": String(timestamp),
  };
  Object.assign(headers, traceHeaders(trace));
  if (secret !== null) {
    headers["X-Service-Signature"] = signature(secret, body);
    headers["webhook-signature"] = standardSignature(secret, deliveryId, timestamp, body);
    if (legacySignatureHeader !== undefined) headers[legacySignatureHeader] = headers["X-Service-Signature"];
  }
  return headers;
}

/**
 * An A2A push notification's own headers (docs/decisions.md#a2a): A2A's content type, the config's token as
 * X-A2A-Notification-Token, and its authentication as Authorization. Other events have none.
 */
export function pushHeaders(d: Pick<ClaimedDelivery, "push">): Record<string, string> {
  if (d.push === null) return {};
  const headers: Record<string, string> = { "Content-Type": "application/a2a+json" };
  if (d.push.token !== null) headers["X-A2A-Notification-Token"] = d.push.token;
  if (d.push.authorization !== null && d.push.authorization !== "") headers.Authorization = d.push.authorization;
  return headers;
}
