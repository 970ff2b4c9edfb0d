/** `agentbus serve` as a process: start-up, configuration errors, and SIGTERM draining. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTestDatabase, useTestDatabase } from "../support/database.js";
import { initialisedDataDir } from "../support/data-dir.js";
import { isAlive, spawnCli, startServiceProcess } from "../support/process.js";
import { mintKey } from "../support/server.js";

const db = useTestDatabase();

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
    // Real time: the partial request reaches a real process over a real socket.
    await new Promise((r) => setTimeout(r, 200));
    svc.signal("SIGTERM");
    // Real time: the real process handles SIGTERM.
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

describe("Ctrl-C in a terminal", () => {
  it("SIGINT to the whole process group stops cleanly: exit 0, a handful of lines, no stack, no PostgreSQL left", async () => {
    const dataDir = await initialisedDataDir("agentbus-ctrl-c-");
    try {
      const svc = await startServiceProcess({ AGENTBUS_DATA_DIR: dataDir }, 60_000, { group: true });
      expect((await fetch(`${svc.url}/health`)).status).toBe(200);
      const postmaster = Number(readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n")[0]);
      const before = svc.lines.length;
      // The terminal signals every process of its foreground group: the service and anything it left in the group.
      svc.signalGroup("SIGINT");
      const exit = await svc.exited;
      const shutdown = svc.lines.slice(before);
      expect(exit.code, shutdown.join("\n") + svc.stderr()).toBe(0);
      expect(shutdown.length, shutdown.join("\n")).toBeLessThanOrEqual(6);
      expect(shutdown.map((l) => (JSON.parse(l) as { level: string }).level).filter((l) => l !== "info"), shutdown.join("\n")).toEqual([]);
      expect(shutdown.join("\n") + svc.stderr()).not.toMatch(/stack|\n\s+at /);
      expect(svc.stderr()).toBe("");
      expect(isAlive(postmaster), "PostgreSQL left running").toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});

/** One HTTP/1.1 exchange on a connection of its own, recorded byte for byte. */
interface Exchange {
  kind: "write" | "long-poll" | "probe";
  startedAt: number;
  endedAt: number;
  status?: number;
  /** Content-Length as sent, when it was. */
  declared?: number;
  body: Buffer;
  /** The body ended cleanly (not cut mid-way). */
  complete: boolean;
  /** Set when no response (or only part of one) arrived: the socket error's code. */
  error?: string;
}

function exchange(base: string, kind: Exchange["kind"], method: string, path: string, key: string, body?: unknown): Promise<Exchange> {
  const url = new URL(path, base);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const record: Exchange = { kind, startedAt: performance.now(), endedAt: 0, body: Buffer.alloc(0), complete: false };
  return new Promise((resolve) => {
    const done = (error?: string) => {
      if (record.endedAt) return;
      record.endedAt = performance.now();
      if (error) record.error = error;
      resolve(record);
    };
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: url.pathname + url.search,
        // A connection per request: no keep-alive reuse races to excuse.
        agent: false,
        headers: { "X-API-Key": key, ...(payload ? { "Content-Type": "application/json", "Content-Length": payload.length } : {}) },
      },
      (res) => {
        record.status = res.statusCode;
        if (res.headers["content-length"] !== undefined) record.declared = Number(res.headers["content-length"]);
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          record.body = Buffer.concat(chunks);
          record.complete = res.complete;
          done();
        });
        res.on("error", (err: NodeJS.ErrnoException) => {
          record.body = Buffer.concat(chunks);
          done(err.code ?? err.message);
        });
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    req.end(payload);
  });
}

describe("SIGTERM under load", () => {
  it("completes every response it started, refuses new connections, ends long-polls and streams early, exits 0", async () => {
    const graceMs = 4_000;
    const svc = await startServiceProcess({
      DATABASE_URL: db.url,
      AGENTBUS_SHUTDOWN_GRACE_MS: String(graceMs),
      AGENTBUS_RATE_LIMIT: "0",
      AGENTBUS_KEY_MINT_LIMIT: "0",
    });
    const key = await mintKey(svc.url);
    const created = await exchange(svc.url, "probe", "POST", "/v1/channels", key, { name: `sigterm-${Date.now()}`, mode: "broadcast" });
    expect(created.status, created.body.toString()).toBe(201);
    const channel = (JSON.parse(created.body.toString()) as { id: string }).id;

    const exchanges: Exchange[] = [];
    let running = true;
    const loops: Array<Promise<void>> = [];
    for (let w = 0; w < 4; w++) {
      loops.push(
        (async () => {
          for (let i = 0; running; i++) {
            const x = await exchange(svc.url, "write", "POST", `/v1/channels/${channel}/messages`, key, { content: `w${w}-${i}` });
            exchanges.push(x);
            // Once the port is closed every attempt is refused at once; stop hammering it.
            // Real time: a refused connection to a real process; do not spin.
            if (x.error) await new Promise((r) => setTimeout(r, 50));
          }
        })(),
      );
    }
    // Long-polls on a channel nobody writes to: they only end at their deadline or at shutdown.
    const quietCreated = await exchange(svc.url, "probe", "POST", "/v1/channels", key, { name: `quiet-${Date.now()}`, mode: "broadcast" });
    expect(quietCreated.status, quietCreated.body.toString()).toBe(201);
    const quiet = JSON.parse(quietCreated.body.toString()) as { id: string };
    const longPolls = Array.from({ length: 4 }, () => exchange(svc.url, "long-poll", "GET", `/v1/channels/${quiet.id}/messages?since=0&wait=20`, key));

    // An SSE watch of the busy channel.
    const stream = await new Promise<{ res: http.IncomingMessage; text: () => string; ended: Promise<"end" | string> }>((resolve, reject) => {
      const url = new URL(`/v1/channels/${channel}/messages:stream`, svc.url);
      const req = http.get({ host: url.hostname, port: url.port, path: url.pathname, agent: false, headers: { "X-API-Key": key } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        const ended = new Promise<"end" | string>((r) => {
          res.on("end", () => r(res.complete ? "end" : "incomplete"));
          res.on("error", (err: NodeJS.ErrnoException) => r(err.code ?? err.message));
        });
        resolve({ res, text: () => text, ended });
      });
      req.on("error", reject);
    });
    expect(stream.res.statusCode).toBe(200);

    // Real time: the stream to a real process is established and idle.
    await new Promise((r) => setTimeout(r, 1_500));
    const signalledAt = performance.now();
    svc.signal("SIGTERM");
    // Real time: the real process handles SIGTERM.
    await new Promise((r) => setTimeout(r, 300));
    // Shutdown has begun: a new connection is refused.
    const late = await exchange(svc.url, "probe", "GET", "/health", key);
    const exit = await svc.exited;
    running = false;
    await Promise.all(loops);
    const polls = await Promise.all(longPolls);
    const streamEnd = await stream.ended;

    expect(late.status, "a connection opened after SIGTERM was served").toBeUndefined();
    expect(late.error).toBe("ECONNREFUSED");
    expect(exit.code).toBe(0);
    expect(exit.afterMs).toBeLessThan(graceMs + 3_000);

    // Every response that started arrived whole: status, declared length and parseable JSON.
    const answered = exchanges.filter((x) => x.status !== undefined);
    for (const x of answered) {
      expect(x.error, `response cut: ${x.status} ${x.body.toString().slice(0, 100)}`).toBeUndefined();
      expect(x.complete).toBe(true);
      expect(x.declared).toBe(x.body.length);
      expect(() => JSON.parse(x.body.toString("utf8"))).not.toThrow();
      expect(x.status).toBe(201);
    }
    // What got no response at all was attempted around or after the moment the
    // listener closed (a request still in the socket, unparsed, is cut with
    // its idle connection). The margin allows for a busy 2-core machine.
    const unanswered = exchanges.filter((x) => x.status === undefined);
    for (const x of unanswered) {
      expect(x.startedAt, `request started ${Math.round(signalledAt - x.startedAt)} ms before SIGTERM got ${x.error}`).toBeGreaterThan(signalledAt - 500);
      expect(["ECONNREFUSED", "ECONNRESET"]).toContain(x.error);
    }
    expect(answered.filter((x) => x.startedAt < signalledAt).length).toBeGreaterThan(10);

    // Long-polls ended early (well before their 20 s) with a valid, empty page.
    for (const p of polls) {
      expect(p.status).toBe(200);
      expect(p.complete).toBe(true);
      expect(p.declared).toBe(p.body.length);
      expect(JSON.parse(p.body.toString("utf8"))).toMatchObject({ data: [], next_cursor: "0" });
      expect(p.endedAt - signalledAt).toBeLessThan(graceMs);
    }
    // The stream ended with a proper end of the chunked body, after whole events only.
    expect(streamEnd).toBe("end");
    const events = stream.text().split("\n\n").filter((e) => e.startsWith("id:"));
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      const data = /^data: (.*)$/m.exec(e)?.[1];
      expect(() => JSON.parse(data ?? "")).not.toThrow();
    }
    expect(stream.text().endsWith("\n\n")).toBe(true);
    console.log(
      `[sigterm-under-load] ${JSON.stringify({
        answered: answered.length,
        refused_after_sigterm: unanswered.length,
        exit_after_ms: Math.round(exit.afterMs),
        long_polls_ended_after_ms: polls.map((p) => Math.round(p.endedAt - signalledAt)),
        stream_events: events.length,
      })}`,
    );
  }, 60_000);
});
