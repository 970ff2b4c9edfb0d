/**
 * Request bodies are judged before they are read (issue 26, F3;
 * docs/operations.md#body-limits): a call without a valid key is refused
 * from its headers and its body cut off, over HTTP/1.1, HTTP/2, gRPC and
 * Connect; a request without a key may send only a small body; and the bytes
 * the process holds for bodies still arriving are bounded per key and in all.
 */
import http from "node:http";
import http2 from "node:http2";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { JobService, PdfFormat } from "../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { mintKey, rest, startTestServer, useTestServer, type TestServer } from "../support/server.js";

const TEN_MIB = 10 * 1024 * 1024;
const BOGUS_KEY = "ak_AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";

/**
 * Sends the headers of a large POST over HTTP/1.1 and only the first chunk
 * of its body; resolves with the answer and whether the server then closed
 * the connection, without the rest of the body ever being sent.
 */
function http1Upload(base: string, path: string, headers: Record<string, string>, declared = TEN_MIB): Promise<{ status: number; body: Record<string, unknown>; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "Content-Type": "application/json", "Content-Length": String(declared), ...headers } });
    req.on("error", () => undefined);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const closed = new Promise<boolean>((done) => {
          if (req.socket?.destroyed) return done(true);
          req.socket?.once("close", () => done(true));
          setTimeout(() => done(false), 3_000).unref();
        });
        void closed.then((c) => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>, closed: c }));
      });
    });
    req.on("close", () => undefined);
    req.write(Buffer.alloc(16 * 1024, 0x20), (err) => err && reject(err));
  });
}

/** The same over an HTTP/2 stream: the answer, and whether the stream was reset while the session lived on. */
function http2Upload(session: http2.ClientHttp2Session, path: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown>; reset: boolean }> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/json", "content-length": String(TEN_MIB), ...headers });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => undefined);
    stream.on("close", () => resolve({ status, body: JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>, reset: stream.rstCode === http2.constants.NGHTTP2_NO_ERROR && !stream.endAfterHeaders }));
    stream.write(Buffer.alloc(16 * 1024, 0x20));
  });
}

describe("a request without a valid key", () => {
  const server = useTestServer();
  let key: string;
  beforeAll(async () => {
    key = await mintKey(server.url, "bodies");
  });

  it.each([
    ["no key", {}],
    ["an invalid key", { "X-API-Key": BOGUS_KEY }],
    ["a malformed key", { "X-API-Key": "x".repeat(40) }],
  ])("with %s is answered 401 over HTTP/1.1 before its body is read, and its connection closed", async (_what, headers) => {
    const res = await http1Upload(server.url, "/v1/pdf/generate", headers);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: "unauthorized" });
    expect(res.closed).toBe(true);
  });

  it("is answered 401 over HTTP/2 before its body is read, its stream reset, the connection serving on", async () => {
    const session = http2.connect(server.url);
    try {
      const res = await http2Upload(session, "/v1/pdf/generate", { "x-api-key": BOGUS_KEY });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: "unauthorized" });
      const ok = await new Promise<number>((resolve) => {
        const s = session.request({ ":method": "GET", ":path": "/v1/keys/me", "x-api-key": key });
        s.on("response", (h) => resolve(Number(h[":status"])));
        s.resume();
      });
      expect(ok).toBe(200);
    } finally {
      session.close();
    }
  });

  it("over gRPC gets Unauthenticated without its 10 MB message being read", async () => {
    const jobs = createClient(JobService, createGrpcTransport({ baseUrl: server.url }));
    // 10 MB, not 10 MiB: a Node client's own session refuses to buffer past 10 MB of unsent data.
    const err = await jobs.createPdfJob({ content: "x".repeat(10_000_000), format: PdfFormat.HTML }, { headers: { "x-api-key": BOGUS_KEY } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code, String(err)).toBe(Code.Unauthenticated);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("unauthorized");
  });

  it("over Connect gets the unauthorized error in Connect's own shape", async () => {
    const jobs = createClient(JobService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    const err = await jobs.createPdfJob({ content: "x".repeat(1024 * 1024), format: PdfFormat.HTML }, { headers: { "x-api-key": BOGUS_KEY } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.Unauthenticated);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("unauthorized");
  });
});

describe("the keyless body limit", () => {
  const server = useTestServer();

  it("refuses a mint over REST whose body passes 16 KiB with 413, naming the limit", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "a", padding: "x".repeat(20 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: "payload_too_large", max_body_bytes: 16 * 1024 });
  });

  it("refuses the same over gRPC", async () => {
    const keys = createClient(KeyService, createGrpcTransport({ baseUrl: server.url }));
    const err = await keys.createKey({ agentLabel: "x".repeat(20 * 1024) }).catch((e: unknown) => e);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("payload_too_large");
  });

  it("still takes an ordinary mint", async () => {
    expect((await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "small-body" } })).status).toBe(201);
  });
});

describe("the body budget", () => {
  let server: TestServer;
  let greedy: string;
  let other: string;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_MAX_BUFFERED_BYTES_PER_KEY: String(256 * 1024), AGENTBUS_MAX_BUFFERED_BYTES: String(400 * 1024) });
    greedy = await mintKey(server.url, "greedy");
    other = await mintKey(server.url, "other");
  });
  afterAll(async () => server.close());

  /** A PDF upload of 1 MiB that sends `sent` bytes now and holds the rest back until `finish` is called. */
  function heldUpload(key: string, sent: number): { answer: Promise<number>; finish: () => void } {
    const total = 1024 * 1024;
    const url = new URL("/v1/pdf/generate", server.url);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "X-API-Key": key, "Content-Type": "application/json", "Content-Length": String(total) } });
    req.on("error", () => undefined);
    const answer = new Promise<number>((resolve) => req.on("response", (res) => (res.resume(), resolve(res.statusCode ?? 0))));
    const head = `{"format":"html","content":"`;
    req.write(head + "x".repeat(sent - head.length));
    return { answer, finish: () => req.end("x".repeat(total - sent - 2) + `"}`) };
  }

  it("refuses a key's upload past its share with 429 too_many_request_bytes while another key's goes through", async () => {
    const first = heldUpload(greedy, 200 * 1024);
    // The first upload's bytes are held by the server once it has read them.
    await new Promise((r) => setTimeout(r, 300));
    const second = await rest(server.url, "POST", "/v1/pdf/generate", { key: greedy, body: { format: "html", content: "y".repeat(100 * 1024) } });
    expect(second.status).toBe(429);
    expect(second.body).toMatchObject({ error: "too_many_request_bytes", suggestion: expect.any(String) });
    expect(second.headers.get("retry-after")).toBe("1");
    const theirs = await rest(server.url, "POST", "/v1/pdf/generate", { key: other, body: { format: "html", content: "z".repeat(100 * 1024) } });
    expect(theirs.status).not.toBe(429);
    first.finish();
    // Over the key's share itself (1 MiB of 256 KiB): refused, and then the share is free again.
    expect(await first.answer).toBe(429);
    const later = await rest(server.url, "POST", "/v1/pdf/generate", { key: greedy, body: { format: "html", content: "w".repeat(100 * 1024) } });
    expect(later.status).not.toBe(429);
  });

  it("answers 503 server_busy when all requests together would pass the process's total", async () => {
    const third = await mintKey(server.url, "third");
    const a = heldUpload(greedy, 200 * 1024);
    const b = heldUpload(other, 200 * 1024);
    await new Promise((r) => setTimeout(r, 300));
    const res = await rest(server.url, "POST", "/v1/pdf/generate", { key: third, body: { format: "html", content: "v".repeat(50 * 1024) } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "server_busy" });
    a.finish();
    b.finish();
    await Promise.all([a.answer, b.answer]);
  });
});

describe("an upload the client abandons", () => {
  const server = useTestServer({ AGENTBUS_LOG_LEVEL: "debug" });

  it("is logged at debug without a stack, summed up: 50 abandoned uploads are not 50 lines, and none is an error", async () => {
    const key = await mintKey(server.url, "abandoner");
    const url = new URL("/v1/pdf/generate", server.url);
    await Promise.all(
      Array.from({ length: 50 }, () =>
        new Promise<void>((resolve) => {
          const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "X-API-Key": key, "Content-Type": "application/json", "Content-Length": "100000" } });
          req.on("error", () => resolve());
          req.on("close", () => resolve());
          req.write('{"format":"html","content":"', () => setTimeout(() => req.destroy(), 50));
        }),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const gone = server.logs.filter((l) => String(l.msg).includes("went away"));
    expect(server.logs.filter((l) => l.level === "error")).toEqual([]);
    expect(gone.length).toBeGreaterThan(0);
    expect(gone.length).toBeLessThanOrEqual(2);
    expect(gone.every((l) => l.level === "debug" && l.err === undefined)).toBe(true);
  });
});
