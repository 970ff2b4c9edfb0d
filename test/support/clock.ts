/** A clock that follows real time but can be moved forward, for TTL and lease tests without sleeping. */
import { MICROS_PER_SECOND, systemClock, type Clock } from "../../src/model/time.js";

export class AdjustableClock implements Clock {
  private offset = 0;

  now(): number {
    return systemClock.now() + this.offset;
  }

  advanceSeconds(seconds: number): void {
    this.offset += seconds * MICROS_PER_SECOND;
  }

  /** Back to real time (PostgreSQL stamps created_at with real time, so later tests need this). */
  reset(): void {
    this.offset = 0;
  }
}
