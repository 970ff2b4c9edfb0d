/** The fixed window of the request limits, on a manual clock: no test sleeps. */
import { describe, expect, it } from "vitest";
import { FixedWindowLimiter } from "../../src/domain/rate-limit.js";
import { ManualClock } from "../support/clock.js";

describe("FixedWindowLimiter", () => {
  it("refuses a key past its limit until the window has passed", async () => {
    const clock = new ManualClock();
    const limiter = new FixedWindowLimiter(2, 60_000, clock);
    expect(limiter.hit("k").allowed).toBe(true);
    expect(limiter.hit("k").allowed).toBe(true);
    expect(limiter.hit("k").allowed).toBe(false);
    await clock.advance(59_999);
    expect(limiter.hit("k").allowed).toBe(false);
    await clock.advance(1);
    expect(limiter.hit("k")).toMatchObject({ allowed: true, remaining: 1 });
  });

  it("counts the seconds to the window's end in retryAfterSeconds", async () => {
    const clock = new ManualClock();
    const limiter = new FixedWindowLimiter(1, 60_000, clock);
    limiter.hit("k");
    await clock.advance(45_500);
    expect(limiter.hit("k")).toMatchObject({ allowed: false, retryAfterSeconds: 15 });
  });

  it("does not give back a hit released after its window ended", async () => {
    const clock = new ManualClock();
    const limiter = new FixedWindowLimiter(1, 60_000, clock);
    const old = limiter.reserve("k");
    await clock.advance(60_000);
    expect(limiter.hit("k").allowed).toBe(true);
    old.release();
    expect(limiter.hit("k").allowed).toBe(false);
  });
});
