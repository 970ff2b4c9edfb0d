/** Webhook settings (docs/decisions.md#webhook-delivery, #outbound-addresses) and the signature scheme (#webhook-requests). */
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/platform/config.js";
import { signature, webhookHeaders } from "../../src/webhooks/payload.js";

describe("webhook configuration", () => {
  it("defaults: private targets refused, 10 s per attempt, about a day of retries, 16 in flight", () => {
    const c = loadConfig({});
    expect(c.allowPrivateTargets).toBe(false);
    expect(c.webhookTimeoutMs).toBe(10_000);
    expect(c.webhookRetryScheduleMs).toEqual([5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000]);
    const total = c.webhookRetryScheduleMs.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).toBeGreaterThan(20);
    expect(total / 3_600_000).toBeLessThan(26);
    expect(c.webhookConcurrency).toBe(16);
  });

  it("gives one owning key a quarter of the webhook slots unless told otherwise, at least one", () => {
    expect(loadConfig({}).webhookOwnerConcurrency).toBe(4);
    expect(loadConfig({ AGENTBUS_WEBHOOK_CONCURRENCY: "40" }).webhookOwnerConcurrency).toBe(10);
    expect(loadConfig({ AGENTBUS_WEBHOOK_CONCURRENCY: "3" }).webhookOwnerConcurrency).toBe(1);
    expect(loadConfig({ AGENTBUS_WEBHOOK_OWNER_CONCURRENCY: "6" }).webhookOwnerConcurrency).toBe(6);
    expect(() => loadConfig({ AGENTBUS_WEBHOOK_OWNER_CONCURRENCY: "0" })).toThrow(/AGENTBUS_WEBHOOK_OWNER_CONCURRENCY/);
  });

  it("reads a schedule in ms, s, m and h, and names the variable when it is malformed", () => {
    expect(loadConfig({ AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "150ms, 2s,1.5m,1h" }).webhookRetryScheduleMs).toEqual([150, 2_000, 90_000, 3_600_000]);
    expect(loadConfig({ AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" }).allowPrivateTargets).toBe(true);
    for (const bad of ["5", "5 s", "5s,,1m", "-1s", "1d"]) {
      expect(() => loadConfig({ AGENTBUS_WEBHOOK_RETRY_SCHEDULE: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ AGENTBUS_WEBHOOK_RETRY_SCHEDULE: bad }), bad).toThrow(/AGENTBUS_WEBHOOK_RETRY_SCHEDULE/);
    }
    expect(() => loadConfig({ AGENTBUS_WEBHOOK_TIMEOUT_MS: "0" })).toThrow(/AGENTBUS_WEBHOOK_TIMEOUT_MS/);
  });
});

describe("webhook signature", () => {
  it("is sha256=<lowercase hex HMAC-SHA256(secret, raw body)>", () => {
    const body = '{"message":{"id":"x","content":"héllo"}}';
    const expected = createHmac("sha256", "s3cret").update(Buffer.from(body, "utf8")).digest("hex");
    expect(signature("s3cret", body)).toBe(`sha256=${expected}`);
    // RFC 4231 test case 2.
    expect(signature("Jefe", "what do ya want for nothing?")).toBe("sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  });

  it("is sent only with a secret (both X-Service-Signature and webhook-signature), next to the event, delivery and timestamp headers", () => {
    const at = 1_767_225_600_123_456;
    const unsigned = webhookHeaders("message.created", "d-1", "{}", null, at);
    expect(unsigned).toEqual({
      "Content-Type": "application/json",
      "User-Agent": "agentbus-webhook/1",
      "X-Service-Event": "message.created",
      "X-Service-Delivery": "d-1",
      "X-Service-Timestamp": "1767225600",
      "webhook-id": "d-1",
      "webhook-timestamp": "1767225600",
    });
    const signed = webhookHeaders("mention", "d-2", "{}", "k", at);
    expect(signed["X-Service-Signature"]).toBe(signature("k", "{}"));
    expect(signed["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
  });
});
