/**
 * GET /status and /status.html (issue 17, item 5): version, uptime and each
 * component's state, whether public minting is open, when the job workers
 * were last seen, and nothing secret.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SERVICE_VERSION } from "../../src/platform/version.js";
import { rest, startTestServer, type TestServer } from "../support/server.js";

const ADMIN = "status-test-admin-token";
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(
    { AGENTBUS_WORKERS: "true", AGENTBUS_ADMIN_TOKEN: ADMIN },
    { jobs: { processEveryMs: 200, intervals: { purge: "1 second", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } } },
  );
});
afterAll(async () => {
  await server?.close();
});

interface Status {
  service: string;
  version: string;
  state: string;
  started_at: string;
  uptime_seconds: number;
  database: { state: string; kind: string };
  wake_bus: { state: string; kind: string };
  job_workers: { state: string; last_seen_at: string | null; seen_last_minute: number };
  pdf_renderer: { state: string };
  language_model: { configured: boolean };
  public_minting_enabled: boolean | null;
}

describe("GET /status", () => {
  it("reports the version, uptime and every component's state, without an API key", async () => {
    const res = await rest<Status>(server.url, "GET", "/status");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      service: "agentbus",
      version: SERVICE_VERSION,
      database: { state: "ok" },
      wake_bus: { state: "ok", kind: "postgres-notify" },
      language_model: { configured: false },
      public_minting_enabled: true,
    });
    expect(["embedded", "external"]).toContain(res.body.database.kind);
    expect(res.body.uptime_seconds).toBeGreaterThanOrEqual(0);
    expect(Date.parse(res.body.started_at)).toBeLessThanOrEqual(Date.now());
  });

  it("tells when the job workers were last seen at work", async () => {
    let status: Status | undefined;
    for (let i = 0; i < 100 && (status?.job_workers.last_seen_at ?? null) === null; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await rest<Status>(server.url, "GET", "/status")).body;
    }
    expect(status?.job_workers).toMatchObject({ state: "ok", last_seen_at: expect.any(String), seen_last_minute: 1 });
  });

  it("follows the minting switch within a second (the report is shared for a second)", async () => {
    await rest(server.url, "POST", "/v1/admin/minting", { body: { enabled: false }, headers: { "X-Admin-Token": ADMIN } });
    try {
      const started = Date.now();
      let enabled: boolean | null = true;
      while (enabled !== false && Date.now() - started < 3000) {
        enabled = (await rest<Status>(server.url, "GET", "/status")).body.public_minting_enabled;
        if (enabled !== false) await new Promise((r) => setTimeout(r, 100));
      }
      expect(enabled).toBe(false);
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      await rest(server.url, "POST", "/v1/admin/minting", { body: { enabled: true }, headers: { "X-Admin-Token": ADMIN } });
    }
  });

  it("names no address, path, host or token", async () => {
    const text = JSON.stringify((await rest<Status>(server.url, "GET", "/status")).body);
    const database = new URL(server.databaseUrl);
    for (const secret of [server.databaseUrl, database.password, `:${database.port}`, database.hostname, ADMIN, "/tmp", process.cwd()]) {
      if (secret !== "") expect(text).not.toContain(secret);
    }
  });
});

describe("GET /status.html", () => {
  it("is a small page of its own: inline style only, no scripts, nothing fetched", async () => {
    const res = await fetch(new URL("/status.html", server.url));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    const html = await res.text();
    expect(html).toContain("agentbus is <span");
    expect(html).toContain(SERVICE_VERSION);
    expect(html).toMatch(/public key minting<\/th><td class="(open|closed)">(open|closed)/);
    expect(html).not.toMatch(/<script|<link|<img|https?:\/\//);
  });
});
