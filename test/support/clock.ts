/** Clocks for tests: time that moves when the test says so, instead of sleeping. */
import { MICROS_PER_SECOND, systemClock, type Clock, type Micros, type Timer, type TimerOptions } from "../../src/model/time.js";

/**
 * Wall-clock time that follows real time but can be moved forward, for TTL
 * and lease tests against a running server. Moving it is a step of the wall
 * clock: the monotonic scale and its timers stay real, as a system clock's do
 * when NTP steps it.
 */
export class AdjustableClock implements Clock {
  private offset = 0;

  now(): number {
    return systemClock.now() + this.offset;
  }

  monotonicMs(): number {
    return systemClock.monotonicMs();
  }

  setTimer(ms: number, fn: () => void, options?: TimerOptions): Timer {
    return systemClock.setTimer(ms, fn, options);
  }

  advanceSeconds(seconds: number): void {
    this.offset += seconds * MICROS_PER_SECOND;
  }

  /** Back to real time (PostgreSQL stamps created_at with real time, so later tests need this). */
  reset(): void {
    this.offset = 0;
  }
}

interface PendingTimer {
  at: number;
  order: number;
  fn: () => void;
}

/**
 * Time that stands still until advance() moves it: timers fire in the order
 * they fall due (ties in the order they were set), each at its own instant,
 * with the code they release run in between. Wall and monotonic time move
 * together, unless the wall clock is "real": then only the monotonic scale
 * and its timers wait for advance(), which suits a running server (its
 * PostgreSQL stamps rows in real time).
 */
export class ManualClock implements Clock {
  private elapsedMs = 0;
  private set = 0;
  private readonly timers: PendingTimer[] = [];

  /** `start` is the wall-clock reading at elapsed 0 (default 2026-01-01T00:00:00Z), or "real". */
  constructor(private readonly start: Micros | "real" = Date.UTC(2026, 0, 1) * 1000) {}

  now(): Micros {
    return this.start === "real" ? systemClock.now() : this.start + Math.round(this.elapsedMs * 1000);
  }

  monotonicMs(): number {
    return this.elapsedMs;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const timer: PendingTimer = { at: this.elapsedMs + Math.max(0, ms), order: this.set++, fn };
    this.timers.push(timer);
    return {
      cancel: () => {
        const i = this.timers.indexOf(timer);
        if (i >= 0) this.timers.splice(i, 1);
      },
    };
  }

  /** Timers set and neither fired nor cancelled. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due on the way
   * (also those set by a timer that fired), and lets the code they wake run.
   */
  async advance(ms: number): Promise<void> {
    const target = this.elapsedMs + ms;
    await settle();
    for (;;) {
      const due = this.nextDue(target);
      if (due === undefined) break;
      this.timers.splice(this.timers.indexOf(due), 1);
      this.elapsedMs = due.at;
      due.fn();
      await settle();
    }
    this.elapsedMs = target;
    await settle();
  }

  private nextDue(limit: number): PendingTimer | undefined {
    let first: PendingTimer | undefined;
    for (const t of this.timers) {
      if (t.at > limit) continue;
      if (first === undefined || t.at < first.at || (t.at === first.at && t.order < first.order)) first = t;
    }
    return first;
  }
}

/**
 * Lets every promise chain that waits on nothing but other promises run to
 * its next real wait (a timer of the manual clock, or I/O). Not a sleep: no
 * time passes on any clock a rule reads.
 */
export async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Real time that a test can step forward, wall and monotonic time together,
 * as if that much time had passed at once: pending timers fall due that much
 * sooner (those now due fire at once). For a running server whose waits end
 * at a wall-clock moment (a delayed message's available_at), without sleeping.
 */
export class SteppingClock implements Clock {
  private offsetMs = 0;
  private readonly pending = new Set<{ at: number; arm: () => void; timer: Timer }>();

  now(): Micros {
    return systemClock.now() + Math.round(this.offsetMs * 1000);
  }

  monotonicMs(): number {
    return systemClock.monotonicMs() + this.offsetMs;
  }

  setTimer(ms: number, fn: () => void, options?: TimerOptions): Timer {
    const entry = { at: this.monotonicMs() + Math.max(0, ms), arm: () => {}, timer: { cancel: () => {} } as Timer };
    entry.arm = () => {
      entry.timer = systemClock.setTimer(
        Math.max(0, entry.at - this.monotonicMs()),
        () => {
          this.pending.delete(entry);
          fn();
        },
        options,
      );
    };
    entry.arm();
    this.pending.add(entry);
    return {
      cancel: () => {
        entry.timer.cancel();
        this.pending.delete(entry);
      },
    };
  }

  advanceSeconds(seconds: number): void {
    this.offsetMs += seconds * 1000;
    for (const entry of this.pending) {
      entry.timer.cancel();
      entry.arm();
    }
  }

  /** Back to real time; pending timers keep the moments they were set for. */
  reset(): void {
    this.offsetMs = 0;
    for (const entry of this.pending) {
      entry.timer.cancel();
      entry.arm();
    }
  }
}
