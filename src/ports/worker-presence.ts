/** When the job workers were last seen at work, from the job table every worker writes. */
import type { Micros } from "../model/time.js";

export interface WorkerPresence {
  /** The latest run any worker finished or started, and how many workers ran something in the last `windowSeconds`. */
  lastSeen(windowSeconds: number): Promise<{ lastSeenAt: Micros | null; recent: number }>;
}
