/**
 * Storage of webhooks: actor webhooks, the outbox of pending deliveries
 * (written by the message write path and by approvals), the per-destination
 * circuit breaker and the delivery log.
 */
import type { Micros } from "../model/time.js";
import type {
  ActorOwner,
  ActorWebhookRecord,
  ArchivedMessage,
  AttemptRecord,
  BreakerSettings,
  ClaimedDelivery,
  ClaimLimits,
  DeliveryLogRecord,
} from "../model/webhooks.js";

export interface WebhookStore {
  // Actor webhooks
  /** The actor a UUID names, with the key that created it; undefined when none. */
  findActorOwner(actorId: string): Promise<ActorOwner | undefined>;
  upsertActorWebhook(actorId: string, url: string, secret: string | null, now: Micros): Promise<ActorWebhookRecord>;
  findActorWebhook(actorId: string): Promise<ActorWebhookRecord | undefined>;
  deleteActorWebhook(actorId: string): Promise<boolean>;

  // The sender's side
  /** Leases up to `limit` due rows until `leaseUntil`, within the per-destination and per-owner limits, owners taking turns. */
  claimDue(now: Micros, limit: number, leaseUntil: Micros, limits: ClaimLimits): Promise<ClaimedDelivery[]>;
  /** A claimed row its destination's breaker holds back: logged deferred, due again at `until`, the claim not counted. */
  deferDelivery(d: Pick<AttemptRecord, "deliveryId" | "channelId" | "actorId" | "event" | "messageId" | "attempt">, now: Micros, until: Micros): Promise<void>;
  /** The breaker's bookkeeping after an attempt to `destination`. */
  recordDestinationOutcome(destination: string, answered: boolean, now: Micros, breaker: BreakerSettings): Promise<void>;
  /** A message that is no longer live, as archived. */
  findArchivedMessage(messageId: string): Promise<ArchivedMessage | undefined>;
  /** Logs an attempt and moves the outbox row on (deleted when nothing follows). */
  recordAttempt(a: AttemptRecord): Promise<void>;
  /** Drops an outbox row without an attempt (its webhook was removed). */
  dropDelivery(deliveryId: string, attempt: number): Promise<void>;
  /** The earliest next_attempt_at in the outbox; null when empty. */
  nextDue(): Promise<Micros | null>;

  // The owner's log
  /** The channel webhook's attempts, newest first, before the id `before` (exclusive; null for the newest). */
  listDeliveries(channelId: string, before: string | null, limit: number): Promise<DeliveryLogRecord[]>;
}
