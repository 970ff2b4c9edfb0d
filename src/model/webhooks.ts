/**
 * The webhooks' vocabulary (migration 0007): actor webhooks, the outbox row
 * as its sender sees it, and the delivery log.
 */
// MessageRecord is still declared in the domain; it moves to the model with the messages aggregate.
import type { MessageRecord } from "./messages.js";
import type { Micros } from "./time.js";

export type WebhookEvent = "message.created" | "mention" | "member_added" | "a2a.task";
export type DeliveryStatus = "delivered" | "failed" | "deferred";

export interface ActorWebhookRecord {
  actorId: string;
  url: string;
  hasSecret: boolean;
  updatedAt: Micros;
}

/** Who created an actor: the only key that may manage its webhook. */
export interface ActorOwner {
  id: string;
  createdByKeyId: string;
}

/** A leased outbox row with where it goes and, for message events, the live message. */
export interface ClaimedDelivery {
  id: string;
  channelId: string;
  /** The key owning the channel, or for a mention push the actor: whose share of the slots it takes. */
  ownerKeyId: string;
  actorId: string | null;
  event: WebhookEvent;
  messageId: string | null;
  /** The body of an earlier attempt (or of member_added); null before the first render. */
  body: string | null;
  /** This attempt's number (1-based). */
  attempt: number;
  /** The target as it is now; null when the webhook was removed meanwhile. */
  url: string | null;
  secret: string | null;
  /** The live message, when the body still has to be rendered and the message is still live. */
  message: MessageRecord | null;
  /** host[:port] of the URL (agentbus_webhook_destination); null without a URL. */
  destination: string | null;
  /** Set while the destination's breaker is open: defer, do not send. */
  openUntil: Micros | null;
  /** An A2A push notification's token and Authorization value (docs/decisions.md#a2a); null for other events. */
  push: { token: string | null; authorization: string | null } | null;
}

export interface ClaimLimits {
  /** Requests this dispatcher may still start per destination it already has in flight. */
  busy: ReadonlyMap<string, number>;
  /** Requests to any other destination. */
  perDestination: number;
  /** Owning keys this dispatcher has served lately: requests in flight now, and when it last started one. */
  owners: ReadonlyMap<string, OwnerLoad>;
  /** Requests in flight per owning key, across its destinations. */
  perOwner: number;
}

/** One owning key's use of a dispatcher's slots. */
export interface OwnerLoad {
  inFlight: number;
  servedAt: Micros;
}

export interface AttemptRecord {
  deliveryId: string;
  channelId: string;
  actorId: string | null;
  event: WebhookEvent;
  messageId: string | null;
  attempt: number;
  status: DeliveryStatus;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
  attemptedAt: Micros;
  /** When the next attempt is due; null when this was the last (delivered, or given up). */
  nextAttemptAt: Micros | null;
  /** The body sent, kept for the retries. */
  body: string | null;
}

/** One logged attempt as its owner reads it: without the body and the actor it was pushed for. */
export interface DeliveryLogRecord extends Omit<AttemptRecord, "actorId" | "body"> {
  id: string;
}

/** The circuit breaker's settings for one destination. */
export interface BreakerSettings {
  threshold: number;
  openMs: number;
  maxOpenMs: number;
}

/** A message that is no longer live: its archived copy and why it was archived. */
export interface ArchivedMessage {
  message: MessageRecord;
  reason: "expired" | "retracted";
}
