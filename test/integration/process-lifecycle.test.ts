/** `agentbus serve` as a process: start-up, configuration errors, and SIGTERM draining. */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/database.js";
import { spawnCli, startServiceProcess } from "../support/process.js";

let db: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe("configuration", () => {
  it("refuses a bad value at start, naming the variable", async () => {
    const cli = spawnCli(["serve"], { PORT: "not-a-port" });
    expect(await cli.exited).toBe(2);
    expect(cli.stderr()).toContain("PORT");
  });
});

describe("agentbus migrate", () => {
  it("applies the migrations to an empty database and exits 0", async () => {
    const empty = await createTestDatabase({ migrate: false });
    try {
      const cli = spawnCli(["migrate"], { DATABASE_URL: empty.url });
      expect(await cli.exited).toBe(0);
      const { rows } = await empty.pool.query("SELECT count(*)::int AS n FROM schema_migrations");
      expect(rows[0].n).toBeGreaterThan(0);
      const again = spawnCli(["migrate"], { DATABASE_URL: empty.url });
      expect(await again.exited).toBe(0);
      expect(again.lines.join("\n")).toContain("up to date");
    } finally {
      await empty.drop();
    }
  });
});

describe("SIGTERM", () => {
  it("lets an in-flight request finish, then exits 0 within a few seconds", async () => {
    const svc = await startServiceProcess({ DATABASE_URL: db.url, AGENTBUS_SHUTDOWN_GRACE_MS: "3000" });
    const { port } = new URL(svc.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    const body = JSON.stringify({ agent_label: "in-flight" });
    let response = "";
    socket.on("data", (chunk) => (response += chunk.toString("utf8")));
    socket.write(`POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body.slice(0, 5));
    await new Promise((r) => setTimeout(r, 200));
    svc.signal("SIGTERM");
    await new Promise((r) => setTimeout(r, 300));
    socket.write(body.slice(5));
    const exit = await svc.exited;
    expect(response).toMatch(/^HTTP\/1\.1 201/);
    expect(exit.code).toBe(0);
    expect(exit.afterMs).toBeLessThan(5_000);
    socket.destroy();
  });

  it("closes idle HTTP/2 sessions instead of waiting on them", async () => {
    const svc = await startServiceProcess({ DATABASE_URL: db.url, AGENTBUS_SHUTDOWN_GRACE_MS: "5000" });
    const session = http2.connect(svc.url);
    await new Promise<void>((resolve, reject) => {
      const stream = session.request({ ":path": "/health" });
      stream.on("error", reject);
      stream.resume();
      stream.on("end", () => resolve());
    });
    const closed = new Promise((r) => session.once("close", r));
    svc.signal("SIGTERM");
    const exit = await svc.exited;
    await closed;
    expect(exit.code).toBe(0);
    expect(exit.afterMs).toBeLessThan(3_000);
  });

  it("stops the embedded PostgreSQL it started", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "agentbus-life-"));
    try {
      const svc = await startServiceProcess({ AGENTBUS_DATA_DIR: dataDir }, 60_000);
      const health = await fetch(`${svc.url}/health`);
      expect(health.status).toBe(200);
      expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(true);
      svc.signal("SIGTERM");
      const exit = await svc.exited;
      expect(exit.code).toBe(0);
      expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});
