/**
 * A key's request budget (issue 17, item 7): every REST answer to a keyed
 * request carries RateLimit-Limit/-Remaining/-Reset, a 429 keeps Retry-After,
 * and GET /v1/keys/me (REST and gRPC) reports the budget.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { startTestRedis } from "../support/redis.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let limited: TestServer;
let unlimited: TestServer;
beforeAll(async () => {
  [limited, unlimited] = await Promise.all([startTestServer({ AGENTBUS_RATE_LIMIT: "5" }), startTestServer({ AGENTBUS_RATE_LIMIT: "0" })]);
});
afterAll(async () => {
  await Promise.all([limited?.close(), unlimited?.close()]);
});

const budget = (res: { headers: Headers }) => ({
  limit: res.headers.get("ratelimit-limit"),
  remaining: res.headers.get("ratelimit-remaining"),
  reset: Number(res.headers.get("ratelimit-reset")),
});

describe("the request budget", () => {
  it("comes with every keyed REST answer, counting down, and a 429 keeps Retry-After", async () => {
    const key = await mintKey(limited.url);
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push(budget(await rest(limited.url, "GET", "/v1/channels", { key })));
    expect(seen.map((b) => [b.limit, b.remaining])).toEqual([
      ["5", "4"],
      ["5", "3"],
      ["5", "2"],
      ["5", "1"],
      ["5", "0"],
    ]);
    for (const b of seen) expect(b.reset).toBeGreaterThan(0);
    const refused = await rest<{ error: string }>(limited.url, "GET", "/v1/channels", { key });
    expect([refused.status, refused.body.error]).toEqual([429, "rate_limit_exceeded"]);
    expect(budget(refused)).toMatchObject({ limit: "5", remaining: "0" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("is reported by GET /v1/keys/me, as this request left it", async () => {
    const key = await mintKey(limited.url);
    await rest(limited.url, "GET", "/v1/channels", { key });
    const me = await rest<{ rate_limit: Record<string, number> }>(limited.url, "GET", "/v1/keys/me", { key });
    expect(me.body.rate_limit).toEqual({ limit: 5, remaining: 3, reset_seconds: expect.any(Number), window_seconds: 60 });
  });

  it("is reported over gRPC too", async () => {
    const key = await mintKey(limited.url);
    const info = await createClient(KeyService, createGrpcTransport({ baseUrl: limited.url })).getCurrentKey({}, { headers: { "x-api-key": key } });
    expect(info.rateLimit).toMatchObject({ limit: 5, remaining: 4, windowSeconds: 60 });
  });

  it("is absent where the service sets no request limit", async () => {
    const key = await mintKey(unlimited.url);
    const me = await rest<{ rate_limit: unknown }>(unlimited.url, "GET", "/v1/keys/me", { key });
    expect(me.body.rate_limit).toBeNull();
    expect(me.headers.get("ratelimit-limit")).toBeNull();
  });
});

describe("the request budget across replicas (Redis)", () => {
  it("is one budget for a key on every replica, and the process counts while Redis is down", async () => {
    const redis = await startTestRedis();
    const a = await startTestServer({ AGENTBUS_RATE_LIMIT: "4", REDIS_URL: redis.url });
    const b = await startTestServer({ AGENTBUS_RATE_LIMIT: "4", REDIS_URL: redis.url, DATABASE_URL: a.databaseUrl });
    try {
      const key = await mintKey(a.url);
      const remaining = [];
      for (const server of [a, b, a, b]) {
        const res = await rest(server.url, "GET", "/v1/channels", { key });
        expect(res.status).toBe(200);
        remaining.push(res.headers.get("ratelimit-remaining"));
      }
      expect(remaining).toEqual(["3", "2", "1", "0"]);
      expect((await rest(a.url, "GET", "/v1/channels", { key })).status).toBe(429);
      expect((await rest(b.url, "GET", "/v1/channels", { key })).status).toBe(429);

      await redis.kill();
      const other = await mintKey(a.url);
      const local = await rest(a.url, "GET", "/v1/channels", { key: other });
      expect(local.status).toBe(200);
      expect(local.headers.get("ratelimit-remaining")).toBe("3");
    } finally {
      await Promise.all([a.close(), b.close()]);
      await redis.stop();
    }
  }, 30_000);
});

