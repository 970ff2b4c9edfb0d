/**
 * Running schedules' ticks (docs/decisions.md#schedules). Every service
 * process runs a ticker; each looks for due schedules at least once a
 * second (sooner when the next tick is sooner), takes them with their rows
 * locked FOR UPDATE SKIP LOCKED (a schedule another process holds is not
 * waited for), posts each one's message as its creating key in a
 * savepoint, and records the tick under its (schedule, tick) key in the
 * same transaction, with the schedule's next tick. Post, record and next
 * tick commit together or not at all, so a tick runs once across processes
 * and restarts. A schedule whose ticks were missed (nothing ran) posts once
 * for the first missed tick, then takes its next tick from now.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { DueSchedule, ScheduledMessage } from "../model/schedules.js";
import type { Clock, Micros, Timer } from "../model/time.js";
import type { ScheduleStore } from "../ports/schedules.js";
import { nextTick } from "./schedules.js";

/** Posts a tick's message to the channel as `caller`; its id. */
export type PostScheduled = (caller: Caller, channelId: string, message: ScheduledMessage) => Promise<string>;

export interface ScheduleTickerOptions {
  clock: Clock;
  post: PostScheduled;
  /** A failure of the ticker itself (the database went away): logged, retried at the next look. */
  onError: (err: unknown) => void;
  /** The longest wait between looks: a schedule made or changed on another process is seen within it. */
  pollMs?: number;
  /** Schedules taken per transaction. */
  batchSize?: number;
}

const DEFAULT_POLL_MS = 1_000;
const DEFAULT_BATCH = 20;

export class ScheduleTicker {
  private timer: Timer | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;

  constructor(
    private readonly store: ScheduleStore,
    private readonly options: ScheduleTickerOptions,
  ) {}

  /** Runs every tick due now; how many ran. */
  async runDue(): Promise<number> {
    const batch = this.options.batchSize ?? DEFAULT_BATCH;
    let ran = 0;
    for (;;) {
      const now = this.options.clock.now();
      const taken = await this.store.atomically(async () => {
        const due = await this.store.takeDue(now, batch);
        for (const schedule of due) await this.runTick(schedule, now);
        return due.length;
      });
      ran += taken;
      if (taken < batch) return ran;
    }
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimer(ms, () => {
      this.running = this.look().finally(() => (this.running = undefined));
    }, { unref: true });
  }

  private async look(): Promise<void> {
    const poll = this.options.pollMs ?? DEFAULT_POLL_MS;
    let wait = poll;
    try {
      // One indexed read while nothing is due; the locking transaction only when something is.
      let next = await this.store.nextDue();
      if (next !== null && next <= this.options.clock.now()) {
        await this.runDue();
        next = await this.store.nextDue();
      }
      if (next !== null) wait = Math.min(poll, Math.max(0, Math.ceil((next - this.options.clock.now()) / 1000)));
    } catch (err) {
      this.options.onError(err);
    }
    this.schedule(wait);
  }

  private async runTick(schedule: DueSchedule, now: Micros): Promise<void> {
    const scheduledFor = schedule.nextRunAt!;
    // Ticks missed while nothing ran: this one run stands for them all; the next is the first after now.
    const nextRunAt = nextTick(schedule.cron, schedule.timezone, Math.max(now, scheduledFor));
    let messageId: string | null = null;
    let error: string | null = null;
    if (schedule.creatorLabel === null) error = "key_revoked";
    // Its key gave up posting (narrowed its scopes): the schedule posts only what the key itself may.
    else if (!schedule.creatorMayPost) error = "insufficient_scope";
    else {
      const caller: Caller = { keyId: schedule.createdByKeyId, agentLabel: schedule.creatorLabel, ownerId: schedule.creatorLabel };
      try {
        // A savepoint: a refused post (a paused channel, a quota) rolls back alone, and the tick is still recorded.
        messageId = await this.store.atomically(() => this.options.post(caller, schedule.channelId, schedule.message));
      } catch (err) {
        // A refusal is the tick's outcome; anything else is logged too. A lost
        // database fails the record below as well, and the tick runs again.
        if (!(err instanceof ApiError)) this.options.onError(err);
        error = err instanceof ApiError ? err.code : "internal_error";
      }
    }
    const recorded = await this.store.recordRun({ scheduleId: schedule.id, scheduledFor, ranAt: now, messageId, error, nextRunAt });
    // Another run has this tick: roll this one back, its post with it.
    if (!recorded) throw new Error(`schedule ${schedule.id}: tick ${scheduledFor} already ran`);
  }
}
