/** Schedules (docs/decisions.md#schedules). */
import type { JsonValue } from "./json.js";
import type { Micros } from "./time.js";

/** What each tick posts. */
export interface ScheduledMessage {
  content: string;
  metadata: { [key: string]: JsonValue };
  groupKey: string | null;
  priority: number | null;
}

export interface ScheduleRecord {
  id: string;
  channelId: string;
  createdByKeyId: string;
  cron: string;
  timezone: string;
  message: ScheduledMessage;
  paused: boolean;
  /** The next tick; null while paused (or when the expression fires no more). */
  nextRunAt: Micros | null;
  lastRunAt: Micros | null;
  lastMessageId: string | null;
  lastError: string | null;
  runs: number;
  createdAt: Micros;
  updatedAt: Micros;
}

/** A due schedule as a tick takes it: with what its creating key is now. */
export interface DueSchedule extends ScheduleRecord {
  /** The creating key's agent label; null when the key was revoked. */
  creatorLabel: string | null;
  /** Whether the creating key still holds messages:write (a key may narrow its scopes after it made the schedule). */
  creatorMayPost: boolean;
}
