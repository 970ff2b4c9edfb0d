import { Writable } from "node:stream";
import { beforeEach, describe, expect, it } from "vitest";
import { LogLimiter } from "../../src/platform/log-limiter.js";
import { createLogger } from "../../src/platform/logger.js";
import { ManualClock } from "../support/clock.js";

let lines: Array<Record<string, unknown>>;
let limiter: LogLimiter;
let clock: ManualClock;

beforeEach(() => {
  clock = new ManualClock();
  lines = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l !== "") lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  limiter = new LogLimiter(createLogger("info", sink), { intervalMs: 10_000, clock });
});

const refused = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });

describe("LogLimiter", () => {
  it("logs the first occurrence at once, then one summary per interval", async () => {
    for (let i = 0; i < 50; i++) limiter.warn("db down", refused());
    expect(lines.map((l) => l.msg)).toEqual(["db down"]);
    await clock.advance(10_000);
    expect(lines.map((l) => l.msg)).toEqual(["db down", "db down (49 more in the last 10s)"]);
  });

  it("logs expected failures without a stack, and unexpected ones with it", () => {
    limiter.warn("db down", refused());
    limiter.error("bug", new TypeError("x is undefined"));
    expect(lines[0]).toMatchObject({ error: { message: "connect ECONNREFUSED 127.0.0.1:5432", code: "ECONNREFUSED" } });
    expect(lines[0]).not.toHaveProperty("err");
    expect(lines[1]).toMatchObject({ err: { stack: expect.stringContaining("TypeError") } });
  });

  it("logs recovery once, with what was not reported yet, and nothing for a condition never seen", () => {
    limiter.warn("db down", refused());
    limiter.warn("db down", refused());
    limiter.recovered("db down", "db back");
    limiter.recovered("db down", "db back");
    limiter.recovered("never failed", "fine");
    expect(lines.map((l) => [l.msg, l.suppressed])).toEqual([
      ["db down", undefined],
      ["db back", 1],
    ]);
  });

  it("logs at once again after a quiet interval, and still reports the recovery", async () => {
    limiter.warn("db down", refused());
    await clock.advance(25_000);
    limiter.warn("db down", refused());
    limiter.recovered("db down", "db back");
    expect(lines.map((l) => l.msg)).toEqual(["db down", "db down", "db back"]);
  });
});
