/**
 * What the work-queue rules count for /metrics (docs/decisions.md#queue-stats).
 * Totals across channels: a per-channel label would grow with every channel
 * anyone creates.
 */
export interface QueueMeter {
  /** Messages handed out: `received` of them by a receive, `redelivered` of them delivered at least once before. */
  delivered(counts: { received: number; redelivered: number }): void;
  /** Messages moved out of their channel past max_deliveries. */
  deadLettered(count: number): void;
}

/** For processes and tests that export no metrics. */
export const noQueueMeter: QueueMeter = {
  delivered() {},
  deadLettered() {},
};
