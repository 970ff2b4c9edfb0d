/** Requests Node's HTTP/1.1 parser rejects before the handler still get the usual error body. */
import net from "node:net";
import { describe, expect, it } from "vitest";
import { listen } from "../../src/server/listener.js";
import { useTestServer } from "../support/server.js";

const server = useTestServer();

/** Sends raw bytes on a fresh connection; returns everything the server sent before closing. */
function raw(text: string): Promise<string> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1", () => socket.end(text));
    let out = "";
    socket.on("data", (c: Buffer) => (out += c.toString("utf8")));
    socket.on("close", () => resolve(out));
    socket.on("error", reject);
  });
}

function parse(response: string): { status: number; headers: string; body: Record<string, unknown> } {
  const [head = "", body = ""] = response.split("\r\n\r\n");
  const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
  expect(Buffer.byteLength(body)).toBe(length);
  return { status: Number(head.split(" ")[1]), headers: head, body: JSON.parse(body) as Record<string, unknown> };
}

describe("HTTP/1.1 parse errors", () => {
  it("answers headers over the limit with 431 headers_too_large and a JSON body", async () => {
    const res = parse(await raw(`GET /v1/channels HTTP/1.1\r\nHost: x\r\nX-Huge: ${"h".repeat(20_000)}\r\n\r\n`));
    expect(res.status).toBe(431);
    expect(res.headers).toMatch(/content-type: application\/json/i);
    expect(res.body).toMatchObject({ error: "headers_too_large", message: expect.any(String) });
    expect(res.headers).toMatch(new RegExp(`x-request-id: ${String(res.body.request_id)}`, "i"));
  });

  it("answers a malformed request with 400 bad_request and a JSON body", async () => {
    const res = parse(await raw("NOT A REQUEST\r\n\r\n"));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: "bad_request", message: expect.any(String) });
  });

  it("keeps serving afterwards", async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});

describe("a client that trickles its headers (slowloris)", () => {
  it("is answered 408 request_timeout once the headers deadline passes, though it keeps sending bytes", async () => {
    const listener = await listen({
      host: "127.0.0.1",
      port: 0,
      handler: (_req, res) => res.end(),
      headersTimeoutMs: 500,
      deadlineCheckIntervalMs: 100,
    });
    try {
      const response = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(listener.address.port, "127.0.0.1", () => socket.write("GET / HTTP/1.1\r\nHost: x\r\n"));
        // One header byte every 100 ms: the idle timeout never fires.
        const drip = setInterval(() => socket.writable && socket.write("X"), 100);
        let out = "";
        socket.on("data", (c: Buffer) => (out += c.toString("utf8")));
        socket.on("close", () => {
          clearInterval(drip);
          resolve(out);
        });
        socket.on("error", (err) => {
          clearInterval(drip);
          if (out !== "") resolve(out);
          else reject(err);
        });
      });
      const res = parse(response);
      expect(res.status).toBe(408);
      expect(res.body).toMatchObject({ error: "request_timeout" });
    } finally {
      await listener.close(1_000);
    }
  });
});
