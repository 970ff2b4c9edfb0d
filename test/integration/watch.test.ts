/** WatchMessages: a stream of the channel's messages, over gRPC, Connect and gRPC-Web. */
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { mintKey, startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
let key: string;
beforeAll(async () => {
  server = await startTestServer();
  key = await mintKey(server.url);
});
afterAll(async () => {
  await server?.close();
});

const transports: Array<[string, () => Transport]> = [
  ["gRPC", () => createGrpcTransport({ baseUrl: server.url })],
  ["Connect", () => createConnectTransport({ baseUrl: server.url, httpVersion: "2" })],
  ["gRPC-Web", () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" })],
];

/** Reads `count` messages from a watch, then stops it. */
async function take(transport: Transport, identifier: string, since: string | undefined, count: number, apiKey = key) {
  const client = createClient(MessageService, transport);
  const abort = new AbortController();
  const got: Array<{ content: string; cursor: string }> = [];
  const timer = setTimeout(() => abort.abort(), 15_000);
  try {
    for await (const item of client.watchMessages({ identifier, since }, { headers: { "x-api-key": apiKey }, signal: abort.signal })) {
      got.push({ content: item.message!.content, cursor: item.cursor });
      if (got.length === count) break;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return got;
}

describe.each(transports)("WatchMessages over %s", (_name, transport) => {
  it("streams the messages after since, then new ones as they are created", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "old" });
    const watching = take(transport(), ch, "0", 3);
    await new Promise((r) => setTimeout(r, 200));
    await postMessage(server.url, key, ch, { content: "new 1" });
    await postMessage(server.url, key, ch, { content: "new 2" });
    expect((await watching).map((m) => m.content)).toEqual(["old", "new 1", "new 2"]);
  });

  it("starts with new messages only when since is absent", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "before" });
    const watching = take(transport(), ch, undefined, 1);
    await new Promise((r) => setTimeout(r, 200));
    await postMessage(server.url, key, ch, { content: "after" });
    expect((await watching).map((m) => m.content)).toEqual(["after"]);
  });

  it("resumes from the last cursor seen with no gap and no duplicate", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    for (const c of ["a", "b", "c"]) await postMessage(server.url, key, ch, { content: c });
    const first = await take(transport(), ch, "0", 2);
    await postMessage(server.url, key, ch, { content: "d" });
    const second = await take(transport(), ch, first[1]!.cursor, 2);
    expect([...first, ...second].map((m) => m.content)).toEqual(["a", "b", "c", "d"]);
  });

  it("refuses a stranger to a restricted channel with PermissionDenied", async () => {
    const ch = await createChannel(server.url, key, { access: "restricted" });
    const stranger = await mintKey(server.url);
    const err = await take(transport(), ch, "0", 1, stranger).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
  });
});

describe("a watcher under concurrent writers", () => {
  it("sees all 400 messages of 4 writers exactly once, in order", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const watching = take(createGrpcTransport({ baseUrl: server.url }), ch, "0", 400);
    await new Promise((r) => setTimeout(r, 200));
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 100; i++) await postMessage(server.url, key, ch, { content: `${w}:${i}` });
      }),
    );
    const seen = await watching;
    expect(seen).toHaveLength(400);
    expect(new Set(seen.map((m) => m.content)).size).toBe(400);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.cursor > seen[i - 1]!.cursor).toBe(true);
  }, 60_000);
});

/** Reads `count` Server-Sent Events from the REST stream route. */
async function sse(path: string, count: number, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 15_000);
  const res = await fetch(`${server.url}${path}`, { headers: { "X-API-Key": key, ...headers }, signal: abort.signal });
  const events: Array<{ id: string; event: string; data: Record<string, unknown> }> = [];
  if (res.status !== 200) {
    clearTimeout(timer);
    return { res, events, body: (await res.json()) as Record<string, unknown> };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    while (events.length < count) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0 && events.length < count) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(
          block.split("\n").filter((l) => !l.startsWith(":") && l.includes(":")).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trimStart()]),
        );
        if (fields.data !== undefined) events.push({ id: fields.id ?? "", event: fields.event ?? "", data: JSON.parse(fields.data) as Record<string, unknown> });
      }
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { res, events, body: undefined };
}

describe("REST Server-Sent Events at …/messages:stream", () => {
  it("streams messages as events whose id is the cursor and whose data is the message JSON", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const posted = await postMessage(server.url, key, ch, { content: "first" });
    const reading = sse(`/v1/channels/${ch}/messages:stream?since=0`, 2);
    await new Promise((r) => setTimeout(r, 200));
    await postMessage(server.url, key, ch, { content: "second" });
    const { res, events } = await reading;
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(events.map((e) => e.data.content)).toEqual(["first", "second"]);
    expect(events[0]).toMatchObject({ id: posted.created_at, event: "message", data: { id: posted.id, claimed_by: null } });
  });

  it("resumes after Last-Event-ID", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const a = await postMessage(server.url, key, ch, { content: "a" });
    await postMessage(server.url, key, ch, { content: "b" });
    const { events } = await sse(`/v1/channels/${ch}/messages:stream?since=0`, 1, { "Last-Event-ID": a.created_at });
    expect(events.map((e) => e.data.content)).toEqual(["b"]);
  });

  it("answers errors before the stream opens as ordinary JSON errors", async () => {
    const missing = await sse("/v1/channels/no-such-channel/messages:stream", 1);
    expect(missing.res.status).toBe(404);
    expect(missing.body).toMatchObject({ error: "channel_not_found" });
    const ch = await createChannel(server.url, key);
    const unauthorized = await sse(`/v1/channels/${ch}/messages:stream`, 1, { "X-API-Key": "" });
    expect(unauthorized.res.status).toBe(401);
  });
});
