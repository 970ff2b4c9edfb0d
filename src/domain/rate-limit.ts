/**
 * Fixed-window counters per key (request limits, key minting per address).
 * In-process: each replica counts on its own, so with N replicas a client can
 * reach N times the limit; a shared store replaces this when Redis is set.
 */
import type { Clock } from "./time.js";

export interface RateDecision {
  allowed: boolean;
  /** Seconds until the window resets (for Retry-After). */
  retryAfterSeconds: number;
  remaining: number;
}

export class FixedWindowLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private lastSweep = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Counts one hit for `key`; a limit of 0 means unlimited. */
  hit(key: string): RateDecision {
    if (this.limit <= 0) return { allowed: true, retryAfterSeconds: 0, remaining: Number.POSITIVE_INFINITY };
    const now = this.clock.now() / 1000;
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.windowMs) {
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    w.count++;
    const retryAfterSeconds = Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000));
    return { allowed: w.count <= this.limit, retryAfterSeconds, remaining: Math.max(0, this.limit - w.count) };
  }

  // Drops finished windows now and then so idle keys do not accumulate.
  private sweep(now: number) {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, w] of this.windows) if (now - w.start >= this.windowMs) this.windows.delete(key);
  }
}
