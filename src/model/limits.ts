/** Shared limits (docs/decisions.md#shared-limits). */
import type { Micros } from "./time.js";

/** At most `count` deliveries in any window of `perSeconds`. */
export interface LimitRate {
  count: number;
  perSeconds: number;
}

/** A limit's bounds; at least one is set. */
export interface LimitBounds {
  /** Messages holding the limit at once; null: no bound. */
  maxInFlight: number | null;
  /** Null: no rate bound. */
  rate: LimitRate | null;
}

export interface LimitRecord extends LimitBounds {
  id: string;
  /** The key that created it: the owner (a later key with the same label is not). */
  ownerKeyId: string;
  /** Unique among the owner's limits. */
  name: string;
  createdAt: Micros;
  updatedAt: Micros;
}

/** A limit with its live use at a moment. */
export interface LimitView extends LimitRecord {
  /** Delivered messages holding it now (leased, not finished, lease not lapsed). */
  inFlight: number;
  /** Deliveries in the rate window ending now; 0 without a rate. */
  usedInWindow: number;
}
