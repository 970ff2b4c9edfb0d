/**
 * Fixed-window counters per key (request limits, key minting per address).
 * In-process: each replica counts on its own, so with N replicas a client can
 * reach N times the limit; with Redis configured the request limit is
 * counted there instead (src/bus/redis-rate-limiter.ts), and this counts
 * while Redis is unreachable.
 */
import type { Clock } from "../model/time.js";
import type { RateDecision, RequestLimiter } from "../ports/rate-limit.js";

export type { RateDecision } from "../ports/rate-limit.js";

export interface Reservation extends RateDecision {
  /**
   * Gives an allowed hit back (the thing it paid for did not happen). Does
   * nothing after the first call, for a refused hit, or once the window it
   * was counted in has ended.
   */
  release(): void;
}

const unlimited: Reservation = { allowed: true, retryAfterSeconds: 0, remaining: Number.POSITIVE_INFINITY, limit: 0, windowSeconds: 0, release: () => {} };

export class FixedWindowLimiter implements RequestLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private lastSweep = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Counts one hit for `key`; a limit of 0 means unlimited. */
  hit(key: string): RateDecision {
    return this.reserve(key);
  }

  /**
   * Counts one hit for `key` now, synchronously, so concurrent callers cannot
   * all pass a check before any of them is counted; the caller releases it if
   * what it paid for did not happen. A refused hit is not counted, so a
   * release of a concurrent hit frees a slot that a later caller can take.
   */
  reserve(key: string): Reservation {
    if (this.limit <= 0) return unlimited;
    const now = this.clock.now() / 1000;
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.windowMs) {
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    const retryAfterSeconds = Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000));
    const shape = { limit: this.limit, windowSeconds: Math.ceil(this.windowMs / 1000) };
    if (w.count >= this.limit) return { allowed: false, retryAfterSeconds, remaining: 0, ...shape, release: () => {} };
    w.count++;
    const counted = w;
    let released = false;
    return {
      allowed: true,
      retryAfterSeconds,
      remaining: this.limit - w.count,
      ...shape,
      release: () => {
        if (released) return;
        released = true;
        // A new window object replaced this one: the hit has expired anyway.
        if (this.windows.get(key) === counted && counted.count > 0) counted.count--;
      },
    };
  }

  // Drops finished windows now and then so idle keys do not accumulate.
  private sweep(now: number) {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, w] of this.windows) if (now - w.start >= this.windowMs) this.windows.delete(key);
  }
}
