/** /health shared by concurrent requests (src/server/health.ts sharedHealth): one check at a time, none kept. */
import { describe, expect, it } from "vitest";
import { sharedHealth, type HealthReport } from "../../src/server/health.js";

const report = (n: number) => ({ status: "ok", state: "ok", database: "ok", db_latency_ms: n, components: {}, public_minting_enabled: true }) as HealthReport;

function deferredChecks() {
  const pending: Array<(r: HealthReport) => void> = [];
  let calls = 0;
  const check = () =>
    new Promise<HealthReport>((resolve) => {
      calls++;
      pending.push(resolve);
    });
  return { check, pending, calls: () => calls };
}

describe("sharedHealth", () => {
  it("gives requests that arrive while a check runs that check's answer", async () => {
    const { check, pending, calls } = deferredChecks();
    const health = sharedHealth(check);
    const answers = Promise.all([health(), health(), health()]);
    expect(calls()).toBe(1);
    pending[0]!(report(1));
    expect((await answers).map((r) => r.db_latency_ms)).toEqual([1, 1, 1]);
  });

  it("keeps no answer: a request after the check finished starts a new one", async () => {
    const { check, pending, calls } = deferredChecks();
    const health = sharedHealth(check);
    const first = health();
    pending[0]!(report(1));
    await first;
    const second = health();
    expect(calls()).toBe(2);
    pending[1]!(report(2));
    expect((await second).db_latency_ms).toBe(2);
  });

  it("starts afresh after a check that failed", async () => {
    let calls = 0;
    const health = sharedHealth(async () => {
      calls++;
      if (calls === 1) throw new Error("pool closed");
      return report(3);
    });
    await expect(health()).rejects.toThrow("pool closed");
    expect((await health()).db_latency_ms).toBe(3);
  });
});
