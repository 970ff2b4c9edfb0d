import { setTimeout as delay } from "node:timers/promises";

/** Waits `ms`, or less when `signal` aborts first (then it resolves, it does not throw). */
export const pause = (ms: number, signal?: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);
