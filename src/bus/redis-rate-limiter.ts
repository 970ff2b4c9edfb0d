/**
 * The per-key request limit counted in Redis, so it holds across replicas
 * (issue 17): one counter per key and window, INCR then PEXPIRE NX (the first
 * hit of a window starts its clock) and PTTL, in one round trip. Redis is an
 * accelerator here, not a dependency: when it does not answer within
 * `timeoutMs` (down, unreachable, slow), the process's own counter answers,
 * as the wake bus falls back to LISTEN/NOTIFY.
 *
 * A Redis that accepts connections but stops answering (issue 26, F13) would
 * otherwise cost every keyed request the whole timeout: the first request
 * that waits it out drops the connection, and until a new one is ready
 * (ioredis reconnects by itself, and "ready" needs Redis to answer) requests
 * are counted here at once, without waiting. `healthy` says which it is, for
 * /health and /status.
 */
import { Redis } from "ioredis";
import type { RateDecision, RequestLimiter } from "../ports/rate-limit.js";

export interface RedisRateLimiterOptions {
  url: string;
  limit: number;
  windowMs: number;
  /** Counts while Redis cannot. */
  fallback: RequestLimiter;
  timeoutMs?: number;
}

export class RedisRateLimiter implements RequestLimiter {
  private readonly redis: Redis;
  private readonly timeoutMs: number;

  constructor(private readonly options: RedisRateLimiterOptions) {
    this.timeoutMs = options.timeoutMs ?? 100;
    // No offline queue: while disconnected a command fails at once and the fallback counts.
    this.redis = new Redis(options.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 2_000 });
    this.redis.on("error", () => {});
  }

  /** Counting in Redis: connected, and it answered the last time it was asked. */
  get healthy(): boolean {
    return this.redis.status === "ready";
  }

  async hit(key: string): Promise<RateDecision> {
    const { limit, windowMs } = this.options;
    // Not ready (down, or reconnecting after it stopped answering): no waiting on it.
    if (limit <= 0 || !this.healthy) return this.options.fallback.hit(key);
    const counter = `agentbus:ratelimit:${key}`;
    let timer: NodeJS.Timeout | undefined;
    try {
      const replies = await Promise.race([
        this.redis.multi().incr(counter).pexpire(counter, windowMs, "NX").pttl(counter).exec(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new RedisTimeout()), this.timeoutMs))),
      ]);
      const count = Number(replies?.[0]?.[1]);
      const ttl = Number(replies?.[2]?.[1]);
      if (!Number.isFinite(count)) throw new Error("unexpected Redis reply");
      return {
        allowed: count <= limit,
        remaining: Math.max(0, limit - count),
        retryAfterSeconds: Math.max(1, Math.ceil((ttl > 0 ? ttl : windowMs) / 1000)),
        limit,
        windowSeconds: Math.ceil(windowMs / 1000),
      };
    } catch (err) {
      // It did not answer in time: start over on a new connection, which is not
      // ready (and costs no request a wait) until Redis answers again.
      if (err instanceof RedisTimeout && this.redis.status === "ready") this.redis.disconnect(true);
      return this.options.fallback.hit(key);
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    this.redis.disconnect();
  }
}

class RedisTimeout extends Error {
  constructor() {
    super("Redis did not answer in time");
  }
}
