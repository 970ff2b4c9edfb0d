/**
 * Long-poll (decision M3): when a read finds nothing, wait for a wake-up on
 * the channel or the deadline, then read again. The subscription is taken
 * before the re-read, so a message that lands between the read and the wait
 * still wakes the waiter: no wake-up is lost.
 */
import type { WakeBus } from "../bus/wake-bus.js";

export interface LongPollOptions {
  bus: WakeBus;
  channelId: string;
  waitMs: number;
  /** Above this many waiters in the process, answer at once instead of waiting. */
  maxWaiters: number;
  /** Ends the wait early (client gone, server shutting down). */
  signal?: AbortSignal;
}

/**
 * `read(delivery)` gets the wake-up's delivery number when it re-reads
 * because of one (reads of the same delivery may be shared), undefined otherwise.
 */
export async function readOrWait<T>(read: (delivery?: number) => Promise<T[]>, options: LongPollOptions): Promise<T[]> {
  const first = await read();
  if (first.length > 0 || options.waitMs <= 0 || options.bus.subscriptions >= options.maxWaiters) return first;
  const deadline = performance.now() + options.waitMs;
  let delivery: number | undefined;
  for (;;) {
    let wake!: (delivery?: number) => void;
    const woken = new Promise<number | undefined>((resolve) => (wake = resolve));
    const unsubscribe = options.bus.subscribe(options.channelId, wake);
    try {
      const data = await read(delivery);
      if (data.length > 0) return data;
      const remaining = deadline - performance.now();
      if (remaining <= 0 || options.signal?.aborted) return data;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => wake();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      delivery = await Promise.race([woken, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), remaining)))]);
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      // A wake-up for data this reader filters out (e.g. status=unclaimed)
      // loops back to waiting for the rest of the time.
      if (performance.now() >= deadline || options.signal?.aborted) return read();
    } finally {
      unsubscribe();
    }
  }
}
