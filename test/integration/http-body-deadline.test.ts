/**
 * A request body must arrive whole within AGENTBUS_BODY_TIMEOUT_SECONDS, on
 * HTTP/1.1 and on HTTP/2; one HTTP/2 connection may open only
 * AGENTBUS_HTTP2_MAX_STREAMS streams at once. Responses that take long after
 * the request arrived (long-polls, watches) are not affected.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import net from "node:net";
import http2 from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";
import { beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const DEADLINE_MS = 600;
const MAX_STREAMS = 8;
const server = useTestServer({
  AGENTBUS_BODY_TIMEOUT_SECONDS: String(DEADLINE_MS / 1000),
  AGENTBUS_HTTP2_MAX_STREAMS: String(MAX_STREAMS),
  AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "5",
});
let key: string;
let channel: string;

beforeAll(async () => {
  key = await mintKey(server.url);
  channel = await createChannel(server.url, key);
});

const port = () => Number(new URL(server.url).port);

describe("a request body trickled over HTTP/1.1", () => {
  it("is answered 408 request_timeout once the body deadline passes, and the connection is closed", async () => {
    const started = performance.now();
    const { out, closedAfterMs } = await new Promise<{ out: string; closedAfterMs: number }>((resolve, reject) => {
      const socket = net.connect(port(), "127.0.0.1", () =>
        socket.write(`POST /v1/channels/${channel}/messages HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`),
      );
      // One byte every 50 ms: neither the idle timeout nor the header deadline applies.
      const drip = setInterval(() => socket.writable && socket.write(" "), 50);
      let text = "";
      socket.on("data", (c: Buffer) => (text += c.toString("utf8")));
      const done = () => {
        clearInterval(drip);
        resolve({ out: text, closedAfterMs: performance.now() - started });
      };
      socket.on("close", done);
      socket.on("error", (err) => (text === "" ? reject(err) : done()));
    });
    const [head = "", body = ""] = out.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
    expect(head).toMatch(/connection: close/i);
    expect(JSON.parse(body)).toMatchObject({ error: "request_timeout", message: expect.any(String) });
    // Closed by the server (the client never stops dripping), not by a 5-minute default.
    expect(closedAfterMs).toBeLessThan(10_000);
  });

  it("does not hit a body that arrives in time, however slow the answer (long-poll)", async () => {
    const empty = await createChannel(server.url, key);
    const started = performance.now();
    const res = await rest(server.url, "GET", `/v1/channels/${empty}/messages?since=0&wait=2`, { key });
    expect(res.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThan(DEADLINE_MS);
  });
});

describe("a request body trickled over HTTP/2", () => {
  it("gets 408 request_timeout on its stream, which is then closed, while the connection serves other streams", async () => {
    const session = http2.connect(server.url);
    try {
      const stream = session.request({ ":method": "POST", ":path": `/v1/channels/${channel}/messages`, "x-api-key": key, "content-type": "application/json" });
      stream.write("{");
      const drip = setInterval(() => !stream.destroyed && stream.write(" "), 50);
      let status = 0;
      let body = "";
      stream.on("response", (h) => (status = Number(h[":status"])));
      stream.on("data", (c: Buffer) => (body += c.toString("utf8")));
      const closed = new Promise<number>((resolve) => stream.on("close", () => resolve(stream.rstCode ?? -1)));
      stream.on("error", () => {});
      const rstCode = await closed;
      clearInterval(drip);
      expect(status).toBe(408);
      expect(JSON.parse(body)).toMatchObject({ error: "request_timeout" });
      // Reset (CANCEL: see releaseAfterResponse) so the client stops sending, once it has the answer.
      expect(rstCode).toBe(http2.constants.NGHTTP2_CANCEL);

      // The same connection still works.
      const health = session.request({ ":path": "/health" });
      const healthStatus = await new Promise<number>((resolve) => health.on("response", (h) => resolve(Number(h[":status"]))));
      health.resume();
      expect(healthStatus).toBe(200);
    } finally {
      session.close();
    }
  });

  it("does not cut a WatchMessages stream that lives past the deadline", async () => {
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const abort = new AbortController();
    const seen: string[] = [];
    const watching = (async () => {
      for await (const item of client.watchMessages({ identifier: channel }, { headers: { "x-api-key": key }, signal: abort.signal })) {
        if (item.message) {
          seen.push(item.message.content);
          abort.abort();
        }
      }
    })().catch((err: unknown) => {
      if (!abort.signal.aborted) throw err;
    });
    // Real time: the body deadline is a socket deadline of the real listener.
    await sleep(DEADLINE_MS * 3);
    expect((await rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key, body: { content: "late" } })).status).toBe(201);
    await watching;
    expect(seen).toEqual(["late"]);
  });
});

describe("HTTP/2 concurrent streams", () => {
  it("advertises the stream cap in SETTINGS", async () => {
    const session = http2.connect(server.url);
    try {
      const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
      expect(settings.maxConcurrentStreams).toBe(MAX_STREAMS);
    } finally {
      session.close();
    }
  });

  it("refuses streams beyond the cap with REFUSED_STREAM, and the service stays healthy for others", async () => {
    const opened = MAX_STREAMS * 4;
    const frames = await rawH2Flood(port(), opened, `/v1/channels/${channel}/messages`);
    const refused = frames.filter((f) => f.type === RST_STREAM && f.errorCode === REFUSED_STREAM);
    expect(refused.length).toBeGreaterThanOrEqual(opened - MAX_STREAMS);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});

// A misbehaving client: raw HTTP/2 frames, ignoring the server's SETTINGS
// (Node's and nghttp2's clients queue streams beyond the cap instead).
const RST_STREAM = 0x3;
const REFUSED_STREAM = 0x7;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK "literal header field without indexing, new name", no Huffman; fine for short ASCII. */
function hpack(headers: Array<[string, string]>): Buffer {
  return Buffer.concat(
    headers.map(([name, value]) => Buffer.concat([Buffer.from([0x00, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)])),
  );
}

async function rawH2Flood(p: number, streams: number, path: string): Promise<Array<{ type: number; streamId: number; errorCode?: number }>> {
  const socket = net.connect(p, "127.0.0.1");
  await new Promise((r) => socket.once("connect", r));
  const block = hpack([
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", "x"],
    ["content-type", "application/json"],
  ]);
  const out = [Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, Buffer.alloc(0))];
  // HEADERS with END_HEADERS but not END_STREAM: every stream waits for a body.
  for (let i = 0; i < streams; i++) out.push(frame(0x1, 0x4, 1 + 2 * i, block));
  socket.write(Buffer.concat(out));
  const frames: Array<{ type: number; streamId: number; errorCode?: number }> = [];
  let buffered = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 9) {
      const length = buffered.readUIntBE(0, 3);
      if (buffered.length < 9 + length) break;
      const type = buffered[3]!;
      const streamId = buffered.readUInt32BE(5) & 0x7fffffff;
      const payload = buffered.subarray(9, 9 + length);
      if (type === 0x4 && (buffered[4]! & 0x1) === 0) socket.write(frame(0x4, 0x1, 0, Buffer.alloc(0))); // SETTINGS ack
      frames.push({ type, streamId, errorCode: type === RST_STREAM ? payload.readUInt32BE(0) : undefined });
      buffered = buffered.subarray(9 + length);
    }
  });
  socket.on("error", () => {});
  // Real time: frames from a real HTTP/2 server arrive over a real socket.
  await sleep(300);
  socket.destroy();
  return frames;
}
