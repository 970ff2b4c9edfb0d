/** A key's request count in fixed windows: in the process, or shared through Redis by every replica. */
export interface RateDecision {
  allowed: boolean;
  /** Seconds until the window resets (for Retry-After). */
  retryAfterSeconds: number;
  remaining: number;
  /** Hits allowed per window; 0 when unlimited. */
  limit: number;
  windowSeconds: number;
}

export interface RequestLimiter {
  /** Counts one hit for `key` and says whether it is within the limit. */
  hit(key: string): RateDecision | Promise<RateDecision>;
}
