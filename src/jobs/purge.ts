/**
 * Every minute: archive expired messages, drop history past retention,
 * expired idempotency records, channel events and dead invitations
 * (docs/decisions.md#expiry-and-history), and webhook destinations' breakers idle for a week.
 * The SQL is in store/purge.ts.
 */
import type { JobKind } from "./types.js";

export const purgeJob: JobKind = {
  name: "purge",
  every: "1 minute",
  // A batch takes milliseconds and each one extends the lock, so a crashed
  // worker's purge is picked up by another within half a minute.
  lockLifetimeMs: 30_000,
  async run(run, { purge, clock }) {
    const counts = await purge.purge(clock.now(), { signal: run.signal, onBatch: () => run.touch() });
    if (Object.values(counts).some((n) => n > 0)) run.logger.info({ ...counts }, "purged");
  },
};
