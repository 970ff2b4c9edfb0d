/** Waiting and backing off for the long-running helpers (worker, follower). */
import { Code } from "@connectrpc/connect";
import { isAgentbusError } from "./errors.js";

/** Resolves after `ms`, or at once when `signal` aborts (never rejects: stopping is not an error). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * Exponential backoff with full jitter, so that many clients cut off by the
 * same outage do not all come back in the same instant.
 */
export function backoffMs(attempt: number, minMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.max(0, attempt - 1));
  return minMs + Math.random() * Math.max(0, ceiling - minMs);
}

/**
 * Failures that may pass on their own: the service or the network was
 * unavailable, overloaded, restarting, or the connection was cut. Everything
 * else (bad key, no access, unknown channel, invalid input) will fail the same
 * way again, so retrying would only hide it.
 */
const TRANSIENT = new Set<Code>([Code.Unavailable, Code.Unknown, Code.Internal, Code.Aborted, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Canceled]);

export function isTransient(err: unknown): boolean {
  return isAgentbusError(err) && TRANSIENT.has(err.grpcCode);
}
