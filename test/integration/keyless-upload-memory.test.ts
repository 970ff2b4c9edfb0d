/**
 * Keyless uploads cost the service no memory (issue 26, F3): 100 concurrent
 * 10 MiB uploads without a valid key, over HTTP/1.1 and over HTTP/2 (REST,
 * gRPC and /mcp), raise the resident memory of a real service process by
 * less than 64 MiB. Each is refused from its headers and cut off, so the
 * service never holds their bodies (before the fix: RSS 148 → 1,051 MiB).
 * The service runs in a process of its own so that its RSS is its own.
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";

const UPLOADS = 100;
const UPLOAD_BYTES = 10 * 1024 * 1024;
const BUDGET_BYTES = 64 * 1024 * 1024;
const BOGUS_KEY = "ak_AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

let db: TestDatabase;
let svc: ServiceProcess;

beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startServiceProcess({ DATABASE_URL: db.url, AGENTBUS_WORKERS: "false", AGENTBUS_SHUTDOWN_GRACE_MS: "1000" });
}, 60_000);

afterAll(async () => {
  await stopServiceProcess(svc, 10_000);
  await db?.drop();
}, 30_000);

const rssBytes = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

/** The highest RSS of the process while `work` runs, sampled every 20 ms. */
async function peakRssDuring(pid: number, work: () => Promise<unknown>): Promise<number> {
  let peak = rssBytes(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 20);
  try {
    await work();
  } finally {
    clearInterval(sampler);
  }
  return Math.max(peak, rssBytes(pid));
}

/** Streams up to `bytes` into `sink` from one shared chunk, honouring back-pressure, until it is done or closed. */
async function pump(sink: NodeJS.WritableStream & { destroyed?: boolean }, bytes: number, stop: () => boolean): Promise<void> {
  for (let sent = 0; sent < bytes && !stop() && !sink.destroyed; sent += CHUNK.length) {
    if (!sink.write(CHUNK)) await new Promise((resolve) => sink.once("drain", resolve).once("close", resolve).once("error", resolve));
  }
}

/**
 * One keyless HTTP/1.1 upload: its status, once answered, or 0 when the
 * service cut it off before the client read the answer (a client that
 * streams its body without asking first can see its write fail instead).
 * With Expect: 100-continue the client sends its body only once told to.
 */
function http1Upload(path: string, headers: Record<string, string>, askFirst: boolean): Promise<number> {
  return new Promise((resolve) => {
    const url = new URL(path, svc.url);
    let status = 0;
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path,
      method: "POST",
      headers: { "Content-Length": String(UPLOAD_BYTES), ...headers, ...(askFirst ? { Expect: "100-continue" } : {}) },
    });
    req.on("response", (res) => {
      status = res.statusCode ?? 0;
      res.resume();
      res.on("end", () => resolve(status));
    });
    req.on("error", () => resolve(status));
    req.on("close", () => resolve(status));
    if (askFirst) {
      req.on("continue", () => void pump(req, UPLOAD_BYTES, () => status !== 0));
      req.flushHeaders();
    } else void pump(req, UPLOAD_BYTES, () => status !== 0);
  });
}

/** One keyless HTTP/2 upload on `session`: its :status (gRPC answers 200 with grpc-status in trailers). */
function http2Upload(session: http2.ClientHttp2Session, path: string, headers: Record<string, string>): Promise<{ status: number; grpcStatus: string | undefined }> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-length": String(UPLOAD_BYTES), ...headers });
    let status = 0;
    let grpcStatus: string | undefined;
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      grpcStatus = h["grpc-status"] as string | undefined;
    });
    stream.on("trailers", (t) => (grpcStatus = (t["grpc-status"] as string | undefined) ?? grpcStatus));
    stream.on("error", () => undefined);
    stream.on("close", () => resolve({ status, grpcStatus }));
    stream.resume();
    void pump(stream, UPLOAD_BYTES, () => status !== 0);
  });
}

/** The targets of a keyless flood, in turn: REST without a key and with a bogus one, and /mcp. */
const REST_TARGETS: Array<{ path: string; headers: Record<string, string> }> = [
  { path: "/v1/pdf/generate", headers: { "Content-Type": "application/json" } },
  { path: "/v1/pdf/generate", headers: { "Content-Type": "application/json", "X-API-Key": BOGUS_KEY } },
  { path: "/v1/keys", headers: { "Content-Type": "application/json" } },
  { path: "/mcp", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": BOGUS_KEY } },
];

it("100 concurrent keyless 10 MiB uploads over HTTP/1.1 raise the service's RSS by less than 64 MiB", async () => {
  const before = rssBytes(svc.child.pid!);
  let asked: number[] = [];
  let streamed: number[] = [];
  const peak = await peakRssDuring(svc.child.pid!, async () => {
    const upload = (i: number, askFirst: boolean) => http1Upload(REST_TARGETS[i % REST_TARGETS.length]!.path, REST_TARGETS[i % REST_TARGETS.length]!.headers, askFirst);
    [asked, streamed] = await Promise.all([
      Promise.all(Array.from({ length: UPLOADS / 2 }, (_, i) => upload(i, true))),
      Promise.all(Array.from({ length: UPLOADS / 2 }, (_, i) => upload(i, false))),
    ]);
  });
  // A client that asks first is refused before it sends a byte of its body.
  expect(asked.filter((s) => s === 401 || s === 413)).toHaveLength(UPLOADS / 2);
  expect(streamed.filter((s) => s === 401 || s === 413 || s === 0)).toHaveLength(UPLOADS / 2);
  expect(peak - before).toBeLessThan(BUDGET_BYTES);
}, 60_000);

it("100 concurrent keyless 10 MiB uploads over HTTP/2 (REST, gRPC and /mcp streams) raise the service's RSS by less than 64 MiB", async () => {
  const sessions = [http2.connect(svc.url), http2.connect(svc.url)];
  try {
    const before = rssBytes(svc.child.pid!);
    let answers: Array<{ status: number; grpcStatus: string | undefined }> = [];
    const peak = await peakRssDuring(svc.child.pid!, async () => {
      answers = await Promise.all(
        Array.from({ length: UPLOADS }, (_, i) => {
          const session = sessions[i % 2]!;
          if (i % 5 === 4) return http2Upload(session, "/agentbus.v1.JobService/CreatePdfJob", { "content-type": "application/grpc+proto", te: "trailers", "x-api-key": BOGUS_KEY });
          const target = REST_TARGETS[i % REST_TARGETS.length]!;
          return http2Upload(session, target.path, Object.fromEntries(Object.entries(target.headers).map(([k, v]) => [k.toLowerCase(), v])));
        }),
      );
    });
    // gRPC's refusal is UNAUTHENTICATED (16); the others are 401 or 413.
    expect(answers.every((a) => a.grpcStatus === "16" || a.status === 401 || a.status === 413)).toBe(true);
    expect(peak - before).toBeLessThan(BUDGET_BYTES);
  } finally {
    for (const session of sessions) session.close();
  }
}, 60_000);
