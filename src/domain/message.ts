/** A message as the rules see it. */
import type { Claim, MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";

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
