/** What the schedules use case needs from storage (schedules, schedule_runs). */
import type { Micros } from "../model/time.js";
import type { DueSchedule, ScheduleRecord } from "../model/schedules.js";

export interface ScheduleStore {
  /** Runs fn in one transaction (a savepoint inside one). */
  atomically<T>(fn: () => Promise<T>): Promise<T>;
  /** Inserts it unless its creator has `maxPerKey` schedules; one key's creates are serialised. */
  insert(schedule: ScheduleRecord, maxPerKey: number): Promise<"inserted" | "limit_reached">;
  find(id: string): Promise<ScheduleRecord | undefined>;
  /** A channel's schedules, or (channelId null) those a key created; oldest first. */
  list(filter: { channelId: string } | { createdByKeyId: string }): Promise<ScheduleRecord[]>;
  /** Saves the changeable fields and next_run_at (row-locked by the caller's transaction via find(id, lock)). */
  save(schedule: ScheduleRecord): Promise<void>;
  delete(id: string): Promise<boolean>;
  /**
   * Inside atomically(): the schedules due at `now` (next_run_at <= now, not
   * paused), at most `limit`, their rows locked and skipped by any other
   * process doing the same.
   */
  takeDue(now: Micros, limit: number): Promise<DueSchedule[]>;
  /**
   * Records the tick (schedule, scheduledFor) unless it is recorded already
   * (false: another run has it); then the schedule's next tick and outcome.
   */
  recordRun(run: { scheduleId: string; scheduledFor: Micros; ranAt: Micros; messageId: string | null; error: string | null; nextRunAt: Micros | null }): Promise<boolean>;
  /** When the next tick of any schedule is due; null when none. */
  nextDue(): Promise<Micros | null>;
}
