import { describe, expect, it } from "vitest";
import { sharedStatus, type StatusSources } from "../../src/server/status.js";

function sources(overrides: Partial<StatusSources> = {}) {
  const calls = { database: 0 };
  let now = 1_000_000_000;
  const s: StatusSources = {
    version: "1.2.3",
    startedAt: now,
    now: () => now,
    database: async () => {
      calls.database++;
      return "ok";
    },
    databaseKind: "embedded",
    wakeBusKind: "postgres-notify",
    components: async () => ({}),
    workers: { lastSeen: async () => ({ lastSeenAt: null, recent: 0 }) },
    languageModelConfigured: false,
    publicMinting: async () => true,
    ...overrides,
  };
  return { s, calls, advance: (ms: number) => (now += ms * 1000) };
}

describe("sharedStatus", () => {
  it("computes one report for any number of requests within a second", async () => {
    const { s, calls, advance } = sources();
    const status = sharedStatus(s);
    await Promise.all(Array.from({ length: 50 }, () => status()));
    expect(calls.database).toBe(1);
    advance(999);
    await status();
    expect(calls.database).toBe(1);
    advance(1);
    await status();
    expect(calls.database).toBe(2);
  });

  it("does not keep a report that failed", async () => {
    let fail = true;
    const { s } = sources({
      database: async () => {
        if (fail) throw new Error("down");
        return "ok";
      },
    });
    const status = sharedStatus(s);
    await expect(status()).rejects.toThrow("down");
    fail = false;
    await expect(status()).resolves.toMatchObject({ database: { state: "ok" } });
  });

  it("reports the workers degraded when none was seen for two minutes", async () => {
    const { s, advance } = sources({ workers: { lastSeen: async () => ({ lastSeenAt: 1_000_000_000, recent: 0 }) } });
    advance(121_000);
    expect((await sharedStatus(s)()).job_workers.state).toBe("degraded");
  });
});
