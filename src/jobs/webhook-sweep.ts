/**
 * The safety net of webhook delivery (docs/decisions.md#webhook-delivery): every 30 seconds, one
 * worker looks for outbox rows that are due but that no dispatcher is about
 * to send (a dispatcher died with rows leased, a NOTIFY was missed) and
 * re-arms its timer for the next retry. First attempts never wait for this:
 * they are sent at once after their commit (src/webhooks/dispatcher.ts).
 */
import type { JobKind } from "./types.js";

export const webhookSweepJob: JobKind = {
  name: "webhook-sweep",
  every: "30 seconds",
  lockLifetimeMs: 30_000,
  async run(_run, { webhooks }) {
    await webhooks?.sweep();
  },
};
