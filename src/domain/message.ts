/** A message as the rules see it. */
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";

export interface ActorRef {
  id: string;
  name: string;
}

export interface Acknowledgement extends ActorRef {
  occurredAt: Micros;
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
  actor: ActorRef | null;
  actorLabel: string | null;
  content: string;
  metadata: { [key: string]: JsonValue };
  mentions: ActorRef[];
  createdAt: Micros;
  expiresAt: Micros;
  claim: Claim | null;
  acknowledgedBy: Acknowledgement[];
}

/**
 * The claim that still holds at `now`: a lease that ran out before anyone
 * acknowledged the message no longer holds (docs/decisions.md#leases-and-retract).
 */
export function effectiveClaim(message: MessageRecord, now: Micros): Claim | null {
  const { claim } = message;
  if (!claim) return null;
  if (claim.leaseExpiresAt !== null && claim.leaseExpiresAt <= now && message.acknowledgedBy.length === 0) return null;
  return claim;
}

export const isActive = (message: MessageRecord, now: Micros): boolean => message.expiresAt > now;
