/** WatchMessages: a stream of the channel's messages, over gRPC, Connect and gRPC-Web. */
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { ManualClock } from "../support/clock.js";
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

/**
 * Reads `count` messages from a watch, then stops it; `opened` receives the
 * cursor of the opening response (the one without a message).
 */
async function take(transport: Transport, identifier: string, since: string | undefined, count: number, apiKey = key, opened?: (cursor: string) => void) {
  const client = createClient(MessageService, transport);
  const abort = new AbortController();
  const got: Array<{ content: string; cursor: string }> = [];
  // Real time: a bound on a real stream, so that a server that stops sending fails the test instead of hanging it.
  const timer = setTimeout(() => abort.abort(), 15_000);
  try {
    let first = true;
    for await (const item of client.watchMessages({ identifier, since }, { headers: { "x-api-key": apiKey }, signal: abort.signal })) {
      if (first) {
        // Always first, and only first: the stream's starting position.
        expect(item.message).toBeUndefined();
        opened?.(item.cursor);
        first = false;
        if (count === 0) break;
        continue;
      }
      got.push({ content: item.message!.content, cursor: item.cursor });
      if (got.length === count) break;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return got;
}

/**
 * Starts take(); `opened` settles once the stream has sent its opening
 * response: what is written from then on comes after the stream's cursor, so
 * it must arrive.
 */
function watching(transport: Transport, identifier: string, since: string | undefined, count: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const messages = take(transport, identifier, since, count, key, () => open());
  return { opened: Promise.race([opened, messages.then(() => {})]), messages };
}

/** The cursor a new watch opens with. */
async function openingCursor(transport: Transport, identifier: string, since: string | undefined): Promise<string> {
  let cursor: string | undefined;
  await take(transport, identifier, since, 0, key, (c) => (cursor = c));
  if (cursor === undefined) throw new Error("the watch sent no opening response");
  return cursor;
}

describe.each(transports)("WatchMessages over %s", (_name, transport) => {
  it("streams the messages after since, then new ones as they are created", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "old" });
    const watch = watching(transport(), ch, "0", 3);
    await watch.opened;
    await postMessage(server.url, key, ch, { content: "new 1" });
    await postMessage(server.url, key, ch, { content: "new 2" });
    expect((await watch.messages).map((m) => m.content)).toEqual(["old", "new 1", "new 2"]);
  });

  it("starts with new messages only when since is absent", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "before" });
    const watch = watching(transport(), ch, undefined, 1);
    await watch.opened;
    await postMessage(server.url, key, ch, { content: "after" });
    expect((await watch.messages).map((m) => m.content)).toEqual(["after"]);
  });

  it("resumes from the last cursor seen with no gap and no duplicate", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    for (const c of ["a", "b", "c"]) await postMessage(server.url, key, ch, { content: c });
    const first = await take(transport(), ch, "0", 2);
    await postMessage(server.url, key, ch, { content: "d" });
    const second = await take(transport(), ch, first[1]!.cursor, 2);
    expect([...first, ...second].map((m) => m.content)).toEqual(["a", "b", "c", "d"]);
  });

  it("opens with the cursor it starts from: the newest message's when since is absent, since itself otherwise, 0 on an empty channel", async () => {
    const empty = await createChannel(server.url, key, { mode: "broadcast" });
    expect(await openingCursor(transport(), empty, undefined)).toBe("0");
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "one" });
    const newest = await postMessage(server.url, key, ch, { content: "two" });
    expect(await openingCursor(transport(), ch, undefined)).toBe(newest.created_at);
    expect(await openingCursor(transport(), ch, "0")).toBe("0");
  });

  it("loses nothing written between a drop before the first message and the resume from the opening cursor", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "before" });
    const start = await openingCursor(transport(), ch, undefined);
    for (const c of ["while away 1", "while away 2"]) await postMessage(server.url, key, ch, { content: c });
    expect((await take(transport(), ch, start, 2)).map((m) => m.content)).toEqual(["while away 1", "while away 2"]);
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
    const watch = watching(createGrpcTransport({ baseUrl: server.url }), ch, "0", 400);
    await watch.opened;
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 100; i++) await postMessage(server.url, key, ch, { content: `${w}:${i}` });
      }),
    );
    const seen = await watch.messages;
    expect(seen).toHaveLength(400);
    expect(new Set(seen.map((m) => m.content)).size).toBe(400);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.cursor > seen[i - 1]!.cursor).toBe(true);
  }, 60_000);
});

/** Reads `count` Server-Sent Events from the REST stream route. */
async function sse(path: string, count: number, headers: Record<string, string> = {}, onOpen?: () => void) {
  const abort = new AbortController();
  // Real time: a bound on a real stream, so that a server that stops sending fails the test instead of hanging it.
  const timer = setTimeout(() => abort.abort(), 15_000);
  const res = await fetch(`${server.url}${path}`, { headers: { "X-API-Key": key, ...headers }, signal: abort.signal });
  const events: Array<{ id: string; event: string; data: Record<string, unknown> }> = [];
  const opens: Array<{ id: string; data: Record<string, unknown> }> = [];
  if (res.status !== 200) {
    clearTimeout(timer);
    return { res, events, opens, body: (await res.json()) as Record<string, unknown> };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    // count 0: until the open event.
    const enough = () => (count === 0 ? opens.length > 0 : events.length >= count);
    while (!enough()) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while (!enough() && (end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(
          block.split("\n").filter((l) => !l.startsWith(":") && l.includes(":")).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trimStart()]),
        );
        if (fields.data === undefined) continue;
        const data = JSON.parse(fields.data) as Record<string, unknown>;
        if (fields.event === "open") {
          opens.push({ id: fields.id ?? "", data });
          onOpen?.();
        }
        else events.push({ id: fields.id ?? "", event: fields.event ?? "", data });
      }
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { res, events, opens, body: undefined };
}

describe("REST Server-Sent Events at …/messages:stream", () => {
  it("streams messages as events whose id is the cursor and whose data is the message JSON", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const posted = await postMessage(server.url, key, ch, { content: "first" });
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const reading = sse(`/v1/channels/${ch}/messages:stream?since=0`, 2, {}, () => open());
    await Promise.race([opened, reading]);
    await postMessage(server.url, key, ch, { content: "second" });
    const { res, events } = await reading;
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(events.map((e) => e.data.content)).toEqual(["first", "second"]);
    expect(events[0]).toMatchObject({ id: posted.created_at, event: "message", data: { id: posted.id, claimed_by: null } });
  });

  it("opens with an open event whose id is the starting cursor, so a reconnect before any message loses nothing", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const last = await postMessage(server.url, key, ch, { content: "old" });
    const { opens, events } = await sse(`/v1/channels/${ch}/messages:stream`, 0);
    expect(events).toEqual([]);
    expect(opens).toEqual([{ id: last.created_at, data: { cursor: last.created_at } }]);
    await postMessage(server.url, key, ch, { content: "missed?" });
    const resumed = await sse(`/v1/channels/${ch}/messages:stream`, 1, { "Last-Event-ID": opens[0]!.id });
    expect(resumed.events.map((e) => e.data.content)).toEqual(["missed?"]);
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

describe("keep-alive comments of an idle event stream", () => {
  it("sends one every 15 s of the server's clock, and none before", async () => {
    const clock = new ManualClock("real");
    const timed = await startTestServer({}, { clock });
    const abort = new AbortController();
    // Real time: a bound on a real stream, so that a server that stops sending fails the test instead of hanging it.
    const timer = setTimeout(() => abort.abort(), 15_000);
    try {
      const owner = await mintKey(timed.url);
      const ch = await createChannel(timed.url, owner, { mode: "broadcast" });
      const res = await fetch(`${timed.url}/v1/channels/${ch}/messages:stream`, { headers: { "X-API-Key": owner }, signal: abort.signal });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      const beats = () => text.split(": keep-alive\n\n").length - 1;
      const readUntil = async (seen: () => boolean) => {
        while (!seen()) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`the stream ended after: ${text}`);
          text += decoder.decode(value, { stream: true });
        }
      };
      await readUntil(() => text.includes("event: open"));
      await clock.advance(14_999);
      // Events travel in order on one stream: a beat due before this message would be read before it.
      await postMessage(timed.url, owner, ch, { content: "just before the beat" });
      await readUntil(() => text.includes("just before the beat"));
      expect(beats()).toBe(0);
      await clock.advance(1);
      await readUntil(() => beats() === 1);
      await clock.advance(15_000);
      await readUntil(() => beats() === 2);
    } finally {
      clearTimeout(timer);
      abort.abort();
      await timed.close();
    }
  });
});
