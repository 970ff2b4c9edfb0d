/** A channel's history: its expired and retracted messages. */
import type { MessageRecord } from "./messages.js";
import type { Micros } from "./time.js";

export interface HistoryRecord extends MessageRecord {
  archivedAt: Micros;
  reason: "expired" | "retracted";
}
