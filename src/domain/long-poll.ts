/**
 * Long-poll (docs/decisions.md#long-poll): when a read finds nothing, wait for a wake-up on
 * the channel or the deadline, then read again. The subscription is taken
 * before the re-read, so a message that lands between the read and the wait
 * still wakes the waiter: no wake-up is lost.
 */
import type { WakeBus } from "../ports/wake-bus.js";
import type { Clock, Micros, Timer } from "../model/time.js";

/**
 * Per-key count of the waits a process holds (long-polls and watch
 * streams), so that one key cannot take every waiter the process allows
 * (AGENTBUS_LONGPOLL_MAX_WAITERS) and leave the other keys answered at once.
 */
export class WaiterSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly maxPerKey: number) {}

  /** Takes one of the key's slots: its release (idempotent), or undefined when the key holds all of them. */
  take(keyId: string): (() => void) | undefined {
    const count = this.held.get(keyId) ?? 0;
    if (count >= this.maxPerKey) return undefined;
    this.held.set(keyId, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(keyId) ?? 1) - 1;
      if (left > 0) this.held.set(keyId, left);
      else this.held.delete(keyId);
    };
  }

  /** Slots the key holds now. */
  heldBy(keyId: string): number {
    return this.held.get(keyId) ?? 0;
  }
}

export interface LongPollOptions {
  bus: WakeBus;
  /** Measures the wait and ends it at the deadline. */
  clock: Clock;
  channelId: string;
  /** More topics whose wake-ups end the wait too (a message's own: its progress). */
  alsoOn?: readonly string[] | undefined;
  waitMs: number;
  /** Above this many waiters in the process, answer at once instead of waiting. */
  maxWaiters: number;
  /** Takes one of the caller's waiter slots; undefined when it holds all of them (answer at once, like the process cap). */
  takeSlot?: () => (() => void) | undefined;
  /** Ends the wait early (client gone, server shutting down). */
  signal?: AbortSignal;
  /**
   * When data the reader waits for becomes readable with no write to
   * announce it (a delayed message falling due, a lease running out), on the clock's wall time;
   * null when nothing is pending. The wait ends then at the latest, so every
   * replica wakes its own waiters on time (docs/decisions.md#delays).
   * `after` is when the read it follows began: what falls due after that
   * counts, even if it is already due when this runs, so nothing that fell due
   * between the read and this look-up is left for the end of the wait.
   */
  nextDue?: (after: Micros) => Promise<Micros | null>;
  /** Reads again at least this often (ms), whatever announces itself: for what frees room with no wake-up here. */
  recheckMs?: number | undefined;
}

/**
 * `read(delivery)` gets the wake-up's delivery number when it re-reads
 * because of one (reads of the same delivery may be shared), undefined otherwise.
 */
export async function readOrWait<T>(read: (delivery?: number) => Promise<T[]>, options: LongPollOptions): Promise<T[]> {
  const first = await read();
  if (first.length > 0 || options.waitMs <= 0 || options.bus.subscriptions >= options.maxWaiters) return first;
  const release = options.takeSlot ? options.takeSlot() : () => {};
  if (!release) return first;
  try {
    return await waitAndRead(read, options);
  } finally {
    release();
  }
}

async function waitAndRead<T>(read: (delivery?: number) => Promise<T[]>, options: LongPollOptions): Promise<T[]> {
  const { clock } = options;
  const deadline = clock.monotonicMs() + options.waitMs;
  let delivery: number | undefined;
  for (;;) {
    let wake!: (delivery?: number) => void;
    const woken = new Promise<number | undefined>((resolve) => (wake = resolve));
    const unsubscribes = [options.channelId, ...(options.alsoOn ?? [])].map((topic) => options.bus.subscribe(topic, wake));
    const unsubscribe = () => {
      for (const u of unsubscribes) u();
    };
    try {
      const readAt = clock.now();
      const data = await read(delivery);
      if (data.length > 0) return data;
      const remaining = deadline - clock.monotonicMs();
      if (remaining <= 0 || options.signal?.aborted) return data;
      const due = options.nextDue ? await options.nextDue(readAt) : null;
      const untilDue = due === null ? remaining : Math.max(0, Math.ceil((due - clock.now()) / 1000));
      delivery = await nextWake(woken, wake, clock, Math.min(remaining, untilDue, options.recheckMs ?? remaining), options.signal);
      // Nobody is left to answer (the client went away, or the server is
      // stopping): no last read, which for a receive would lease work to no one.
      if (options.signal?.aborted) return [];
      // A wake-up for data this reader filters out (e.g. status=unclaimed)
      // loops back to waiting for the rest of the time.
      if (clock.monotonicMs() >= deadline) return read();
    } finally {
      unsubscribe();
    }
  }
}

/**
 * Waits for a wake-up (`woken`, which `wake` resolves), for `ms` on the
 * clock, or for `signal` to abort, whichever comes first: the wake-up's
 * delivery number, or undefined. Long-polls and watch streams both wait so.
 */
export async function nextWake(
  woken: Promise<number | undefined>,
  wake: (delivery?: number) => void,
  clock: Clock,
  ms: number,
  signal: AbortSignal | undefined,
): Promise<number | undefined> {
  let timer: Timer | undefined;
  const onAbort = () => wake();
  signal?.addEventListener("abort", onAbort, { once: true });
  // Aborted while the caller was still reading: the event has fired already and would never reach the listener.
  if (signal?.aborted) wake();
  try {
    return await Promise.race([woken, new Promise<undefined>((resolve) => (timer = clock.setTimer(ms, () => resolve(undefined))))]);
  } finally {
    timer?.cancel();
    signal?.removeEventListener("abort", onAbort);
  }
}
