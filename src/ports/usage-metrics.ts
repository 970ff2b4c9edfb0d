/** What the usage figures need from storage: counts over what a key owns. */
import type { Micros } from "../model/time.js";

export interface OwnedFigures {
  channelsOwned: number;
  /** Live (unexpired) messages in the channels the key owns. */
  messages: number;
  /** Of those, claimed (lease not lapsed) and not acknowledged. */
  claimed: number;
  acknowledged: number;
  /** Shared sessions the key owns that have not expired. */
  activeSessions: number;
}

export interface UsageMetricsStore {
  ownedFigures(keyId: string, now: Micros): Promise<OwnedFigures>;
}
