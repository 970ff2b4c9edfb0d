/**
 * Start-up tells the truth: one log line per component, and GET /health
 * with each component's state (ok, degraded, down) beside the fields that
 * clients already read (status, database, db_latency_ms).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitUntil } from "../support/load.js";
import { startServiceProcess } from "../support/process.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { useTestDatabase } from "../support/database.js";
import { rest, startTestServer, useTestServer, type TestServer } from "../support/server.js";

interface Component {
  state: string;
  detail: string;
}
const components = async (server: TestServer) => (await rest<{ components: Record<string, Component> }>(server.url, "GET", "/health")).body.components;

describe("GET /health", () => {
  const server = useTestServer();

  it("keeps status, database and db_latency_ms, and reports every component", async () => {
    const res = await rest(server.url, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", database: "ok", db_latency_ms: expect.any(Number) as unknown });
    expect(Object.keys(res.body.components as object).sort()).toEqual(["database", "job_workers", "language_model", "pdf_renderer", "request_limits", "wake_bus"]);
    expect(res.body.components).toEqual({
      database: { state: "ok", detail: "external PostgreSQL" },
      wake_bus: { state: "ok", detail: "PostgreSQL LISTEN/NOTIFY" },
      request_limits: { state: "ok", detail: "counted in each process" },
      job_workers: { state: "ok", detail: expect.stringContaining("AGENTBUS_WORKERS=false") as unknown },
      pdf_renderer: { state: "ok", detail: "in the worker processes" },
      language_model: { state: "degraded", detail: expect.stringContaining("OPENAI_API_KEY is unset") as unknown },
    });
  });

  it("names no path, host, port, address or version of a component to anyone: those are the operator's, in /status with the admin token", async () => {
    const operator = await startTestServer({ AGENTBUS_ADMIN_TOKEN: "health-admin", OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: "http://llm.example:8443/v1" });
    try {
      const port = new URL(operator.databaseUrl).port;
      for (const path of ["/health", "/status", "/status.html"]) {
        const text = await (await fetch(new URL(path, operator.url))).text();
        expect(text, path).not.toContain(port);
        expect(text, path).not.toMatch(/127\.0\.0\.1|llm\.example|\/tmp\/|@sparticuz|Chromium \d/);
      }
      const asOperator = await rest<{ details: Record<string, string> }>(operator.url, "GET", "/status", { headers: { "X-Admin-Token": "health-admin" } });
      expect(asOperator.body.details).toMatchObject({
        database: `external PostgreSQL at 127.0.0.1:${port}`,
        language_model: "gpt-4o-mini at llm.example:8443",
      });
      const wrong = await rest<Record<string, unknown>>(operator.url, "GET", "/status", { headers: { "X-Admin-Token": "nope" } });
      expect(wrong.body).not.toHaveProperty("details");
    } finally {
      await operator.close();
    }
  });

  it("reports an unconfigured language model as degraded, and the service as degraded but 200", async () => {
    const res = await rest(server.url, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("degraded");
    expect((res.body.components as Record<string, Component>).language_model).toEqual({
      state: "degraded",
      detail: expect.stringContaining("503 llm_not_configured") as unknown,
    });
  });

  it("says a language model is configured, naming the model and host only to the operator, and never its key", async () => {
    const llm = await startTestServer({ AGENTBUS_ADMIN_TOKEN: "llm-admin", OPENAI_API_KEY: "sk-secret-123", OPENAI_BASE_URL: "https://user:pw@llm.example:8443/v1", AGENTBUS_LLM_MODEL: "small-model" });
    try {
      const res = await rest(llm.url, "GET", "/health");
      expect((res.body.components as Record<string, Component>).language_model).toEqual({ state: "ok", detail: "configured" });
      expect(res.body.state).toBe("ok");
      const status = await rest<{ details: Record<string, string> }>(llm.url, "GET", "/status", { headers: { "X-Admin-Token": "llm-admin" } });
      expect(status.body.details.language_model).toBe("small-model at llm.example:8443");
      expect(JSON.stringify([res.body, status.body])).not.toMatch(/sk-secret|pw@|user:/);
    } finally {
      await llm.close();
    }
  });
});

describe("GET /health while Redis is down", () => {
  let redis: TestRedis;
  let server: TestServer;
  beforeAll(async () => {
    redis = await startTestRedis();
    server = await startTestServer({ REDIS_URL: redis.url, OPENAI_API_KEY: "sk-x" });
  });
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  it("reports the wake bus degraded (NOTIFY carries wake-ups) and ok again once Redis is back", async () => {
    await waitUntil(async () => (await components(server)).wake_bus!.state === "ok", 10_000, "subscribed to Redis");
    expect((await components(server)).wake_bus!.detail).toBe("Redis (LISTEN/NOTIFY while it is unreachable)");
    await redis.kill();
    await waitUntil(async () => (await components(server)).wake_bus!.state === "degraded", 10_000, "wake bus degraded");
    const res = await rest(server.url, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", state: "degraded" });
    expect((res.body.components as Record<string, Component>).wake_bus!.detail).toContain("LISTEN/NOTIFY meanwhile");
    await redis.start();
    await waitUntil(async () => (await components(server)).wake_bus!.state === "ok", 20_000, "back on Redis", 100);
  }, 60_000);
});

describe("start-up", () => {
  const db = useTestDatabase();

  it("logs one line per component: database, wake bus, job workers, PDF renderer, language model", async () => {
    const service = await startServiceProcess({ DATABASE_URL: db.url, AGENTBUS_WORKERS: "true" }, 60_000);
    try {
      const messages = () => service.lines.map((l) => JSON.parse(l) as { msg: string; component?: string; state?: string });
      // The renderer's line comes when its Chromium is ready.
      await waitUntil(async () => messages().some((m) => m.component === "pdf_renderer" && m.state !== "starting" && /^PDF renderer: Chromium/.test(m.msg)), 60_000, "the renderer's line");
      const byComponent = (c: string) => messages().filter((m) => m.component === c && !/^PDF renderer: preparing/.test(m.msg)).map((m) => m.msg);
      expect(byComponent("database")).toEqual([expect.stringMatching(/^database: external PostgreSQL at 127\.0\.0\.1:\d+$/)]);
      expect(byComponent("wake_bus")).toEqual(["wake bus: PostgreSQL LISTEN/NOTIFY"]);
      expect(byComponent("request_limits")).toEqual(["request limits: counted in each process"]);
      expect(byComponent("job_workers")).toEqual([expect.stringMatching(/^job workers: on: pdf, job_posting, transcript jobs/)]);
      expect(byComponent("pdf_renderer")).toEqual([expect.stringMatching(/^PDF renderer: Chromium 143\.[\d.]+ from @sparticuz\/chromium 143\.0\.4, fonts Noto/)]);
      expect(byComponent("language_model")).toEqual([expect.stringMatching(/^language model: not configured .*503 llm_not_configured$/)]);
    } finally {
      service.signal("SIGTERM");
      await service.exited;
    }
  }, 90_000);
});
