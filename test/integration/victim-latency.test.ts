/**
 * One key's flood does not slow another key (issue 26, item 2): while one
 * key floods a kind of request, another key's median for the same kind
 * stays within 3x its idle median, measured here. The service runs in a
 * process of its own (the flood's client work is this process's, not the
 * service's), with the default request limit; each flood is bounded in
 * count and time. The other floods of the item are measured by their own
 * files, in the same way: schema-heavy posts (schema-fairness.test.ts) and
 * webhooks to slow receivers (webhook-fairness.test.ts).
 *
 * A median of a few milliseconds on a 2-core machine shared with PostgreSQL
 * and the flood's own client moves with the scheduler when it spans only a
 * few tens of milliseconds: the requests of a few milliseconds are measured
 * 100 times each way (about half a second), the PDFs (over 100 ms each) 9
 * times. Over 30 requests the body flood's ratio ranged from 1.3x to 3.5x;
 * over 100, 1.35x to 2.2x.
 */
import { randomBytes } from "node:crypto";
import { Worker } from "node:worker_threads";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { submitPdf, submitPdfJob, waitForJob } from "../support/pdf.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mintKey, rest } from "../support/server.js";

const BOUND = 3;
/** How many times a request of a few milliseconds is measured, idle and under a flood. */
const ROUNDS = 100;
const BOGUS_KEY = "ak_AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";

let db: TestDatabase;
let svc: ServiceProcess;
let url: string;
beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startServiceProcess({ DATABASE_URL: db.url, AGENTBUS_WORKERS: "true", AGENTBUS_KEY_MINT_LIMIT: "0", AGENTBUS_SHUTDOWN_GRACE_MS: "1000" }, 60_000);
  url = svc.url;
}, 90_000);
afterAll(async () => {
  await stopServiceProcess(svc, 10_000);
  await db?.drop();
}, 30_000);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** The victim's median over `n` calls of `op`, one after another, in ms. */
async function medianOf(n: number, op: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await op();
    times.push(performance.now() - started);
  }
  return median(times);
}

/**
 * Measures the victim's idle median, then runs `flood` in `workers` parallel
 * loops on a thread of its own (so that its client work does not slow this
 * thread's measurements) while measuring the victim again, and stops it:
 * the victim's idle median and its median under the flood. `flood` is the
 * body of an async function of (url, stopped) run on that thread, in plain
 * JavaScript.
 */
async function underFlood(op: () => Promise<unknown>, n: number, workers: number, flood: string, args: Record<string, string> = {}): Promise<{ idle: number; flooded: number }> {
  await medianOf(3, op);
  const idle = await medianOf(n, op);
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const thread = new Worker(
    `const { workerData } = require("node:worker_threads");
     // The flood's client is another machine's in life: at the lowest CPU
     // priority here, it does not take the cores from the service it floods
     // (on 2 cores it would otherwise measure the machine, not the service).
     try {
       const tid = Number(require("node:fs").readlinkSync("/proc/thread-self").split("/").pop());
       if (tid > 0) require("node:os").setPriority(tid, 19);
     } catch {}
     const http = require("node:http");
     const { randomBytes } = require("node:crypto");
     const { url, args, stop, workers } = workerData;
     const stopped = () => Atomics.load(stop, 0) === 1;
     const loop = async () => { ${flood} };
     Promise.all(Array.from({ length: workers }, () => loop().catch(() => undefined))).then(() => process.exit(0));`,
    { eval: true, workerData: { url, args, stop, workers } },
  );
  const ended = new Promise((resolve) => thread.once("exit", resolve));
  // The flood in full swing before measuring.
  await new Promise((r) => setTimeout(r, 500));
  const flooded = await medianOf(n, op);
  Atomics.store(stop, 0, 1);
  await Promise.race([ended, new Promise((r) => setTimeout(r, 10_000))]);
  await thread.terminate();
  console.log(`[victim-latency] ${expect.getState().currentTestName ?? ""}: idle p50 ${idle.toFixed(1)} ms, under the flood ${flooded.toFixed(1)} ms (${(flooded / idle).toFixed(2)}x)`);
  return { idle, flooded };
}

/** Resolves once every pdf job `key` had submitted has ended. */
async function drained(key: string): Promise<void> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const res = await submitPdf(url, key, { content: "<p>last</p>" });
    if (res.status === 202) {
      await waitForJob(url, key, res.body.job_id as number, Math.max(1000, deadline - performance.now()));
      return;
    }
    if (res.status !== 429 || performance.now() > deadline) throw new Error(`the attacker's queue did not drain: ${res.status} ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("another key's requests while one key floods", () => {
  it("receives: the victim's receive stays within 3x while a key holds its long-polls and spends its request budget on receives", async () => {
    const attacker = await mintKey(url, `att-recv-${randomBytes(3).toString("hex")}`);
    const victim = await mintKey(url, `vic-recv-${randomBytes(3).toString("hex")}`);
    const theirs = await createChannel(url, attacker);
    const mine = await createChannel(url, victim);
    // One for each receive: the warm-up and two rounds of 100.
    for (let i = 0; i < 210; i++) await postMessage(url, victim, mine, { content: `task ${i}` });
    const op = async () => {
      const got = await rest<{ data: ReceivedJson[] }>(url, "POST", `/v1/channels/${mine}/messages:receive`, { key: victim, body: { lease_seconds: 30 } });
      expect(got.body.data).toHaveLength(1);
    };
    const { idle, flooded } = await underFlood(op, ROUNDS, 40, `
      while (!stopped()) {
        const res = await fetch(url + "/v1/channels/" + args.channel + "/messages:receive", {
          method: "POST", headers: { "X-API-Key": args.key, "Content-Type": "application/json" }, body: JSON.stringify({ wait: 2, max_messages: 100 }),
        });
        await res.arrayBuffer();
      }`, { channel: theirs, key: attacker });
    expect(flooded, `idle ${idle} ms, flooded ${flooded} ms`).toBeLessThanOrEqual(BOUND * idle);
  }, 60_000);

  it("keyless large bodies: the victim's post stays within 3x while 25 keyless 10 MiB uploads arrive at once, again and again", async () => {
    const victim = await mintKey(url, `vic-body-${randomBytes(3).toString("hex")}`);
    const ch = await createChannel(url, victim);
    const op = () => postMessage(url, victim, ch, { content: "still here" });
    const { idle, flooded } = await underFlood(op, ROUNDS, 25, `
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const target = new URL("/v1/pdf/generate", url);
      while (!stopped()) {
        await new Promise((resolve) => {
          const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: "POST",
            headers: { "Content-Type": "application/json", "Content-Length": String(10 * 1024 * 1024), "X-API-Key": args.bogus } });
          let answered = false;
          req.on("response", (res) => { answered = true; res.resume(); res.on("end", resolve); });
          req.on("error", resolve);
          req.on("close", resolve);
          const pump = () => { while (!answered && !req.destroyed) if (!req.write(chunk)) return void req.once("drain", pump); };
          pump();
        });
      }`, { bogus: BOGUS_KEY });
    expect(flooded, `idle ${idle} ms, flooded ${flooded} ms`).toBeLessThanOrEqual(BOUND * idle);
  }, 60_000);

  it("keyless MCP: the victim's MCP tool call stays within 3x while 40 loops open sessions with keys that are not keys", async () => {
    const victim = await mintKey(url, `vic-mcp-${randomBytes(3).toString("hex")}`);
    const client = new Client({ name: "victim", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", url), { requestInit: { headers: { "X-API-Key": victim } } }));
    try {
      const op = () => client.callTool({ name: "list_my_channels", arguments: {} });
      const { idle, flooded } = await underFlood(op, ROUNDS, 40, `
        const initialize = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } });
        while (!stopped()) {
          const res = await fetch(url + "/mcp", {
            method: "POST",
            headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": randomBytes(16).toString("hex") },
            body: initialize,
          });
          await res.arrayBuffer();
        }`);
      expect(flooded, `idle ${idle} ms, flooded ${flooded} ms`).toBeLessThanOrEqual(BOUND * idle);
    } finally {
      await client.close();
    }
  }, 60_000);

  it("PDFs: the victim's one-line PDF, submitted to completed, stays within 3x while a key keeps its job queue full of slow renders", async () => {
    const attacker = await mintKey(url, `att-pdf-${randomBytes(3).toString("hex")}`);
    const victim = await mintKey(url, `vic-pdf-${randomBytes(3).toString("hex")}`);
    const op = async () => expect((await waitForJob(url, victim, await submitPdfJob(url, victim, { content: "<p>one line</p>" }))).status).toBe("completed");
    // A page Chromium takes a while to lay out and print.
    const slow = `<!doctype html><body>${"<table>" + "<tr><td>cell</td><td>cell</td><td>cell</td></tr>".repeat(3000) + "</table>"}</body>`;
    const { idle, flooded } = await underFlood(op, 9, 4, `
      while (!stopped()) {
        const res = await fetch(url + "/v1/pdf/generate", {
          method: "POST", headers: { "X-API-Key": args.key, "Content-Type": "application/json" }, body: JSON.stringify({ content: args.page }),
        });
        await res.arrayBuffer();
        // The key's queue is full (429 job_limit_exceeded): wait for room.
        if (res.status === 429) await new Promise((r) => setTimeout(r, 100));
      }`, { key: attacker, page: slow });
    try {
      expect(flooded, `idle ${idle} ms, flooded ${flooded} ms`).toBeLessThanOrEqual(BOUND * idle);
    } finally {
      // The flood's queued renders outlive it: a second measurement would
      // take its idle median while they still ran. A job the attacker's key
      // submits once its queue has room ends after the ones before it.
      await drained(attacker);
    }
  }, 120_000);
});
