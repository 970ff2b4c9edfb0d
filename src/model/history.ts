/** A channel's history: its messages that ended (expired, retracted, dead-lettered, redriven away, cancelled). */
import type { ArchiveReason, MessageRecord } from "./messages.js";
import type { Micros } from "./time.js";

export interface HistoryRecord extends MessageRecord {
  archivedAt: Micros;
  reason: ArchiveReason;
}
