/** followChannel: every message in order over WatchMessages, resuming from its cursor after a drop. */
import type { Interceptor } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { ChannelMode, createClient, followChannel, type AgentbusClient, type FollowedMessage, type TransportKind } from "../src/index.js";
import { clientWithNewKey } from "./helpers.js";
import { startCuttableProxy, type CuttableProxy } from "./proxy.js";

let server: TestServer;
let proxy: CuttableProxy;
beforeAll(async () => {
  server = await startTestServer();
  proxy = await startCuttableProxy(server.url);
});
afterAll(async () => {
  await proxy?.close();
  await server?.close();
});

/** Calls `seen` when a streaming call receives its first response. */
function onFirstStreamResponse(seen: () => void): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (!res.stream) return res;
    const source = res.message;
    return {
      ...res,
      message: (async function* () {
        for await (const item of source) {
          seen();
          yield item;
        }
      })(),
    };
  };
}

/** Collects what a follower yields, in the background, until `stop()`. */
function collect(iterable: AsyncIterable<FollowedMessage>) {
  const got: FollowedMessage[] = [];
  const done = (async () => {
    for await (const item of iterable) got.push(item);
  })();
  return { got, done };
}

async function broadcastChannel(client: AgentbusClient): Promise<string> {
  return (await client.channels.createChannel({ name: "news", mode: ChannelMode.BROADCAST })).id;
}

async function post(client: AgentbusClient, channel: string, contents: string[]): Promise<void> {
  for (const content of contents) await client.messages.createMessage({ identifier: channel, content });
}

const transports: TransportKind[] = ["grpc", "connect", "grpc-web"];

describe.each(transports)("followChannel over %s", (transport) => {
  it("yields the channel's messages in order with increasing cursors, from since=0", async () => {
    const { client, key } = await clientWithNewKey(server.url);
    const channel = await broadcastChannel(client);
    await post(client, channel, ["one", "two"]);
    const abort = new AbortController();
    const follower = collect(followChannel({ client: createClient({ baseUrl: server.url, apiKey: key, transport }), channel, since: "0", signal: abort.signal }));
    await expect.poll(() => follower.got.length).toBe(2);
    await post(client, channel, ["three", "four"]);
    await expect.poll(() => follower.got.length).toBe(4);
    abort.abort();
    await follower.done;
    expect(follower.got.map((f) => f.message.content)).toEqual(["one", "two", "three", "four"]);
    const cursors = follower.got.map((f) => f.cursor);
    expect(cursors.slice().sort()).toEqual(cursors);
    expect(new Set(cursors).size).toBe(4);
  });

  it("resumes from its last cursor after the connection drops, without gaps or duplicates", async () => {
    const { client, key } = await clientWithNewKey(server.url);
    const channel = await broadcastChannel(client);
    const reconnects: Array<{ cursor: string | undefined }> = [];
    const abort = new AbortController();
    const follower = collect(
      followChannel({
        client: createClient({ baseUrl: proxy.url, apiKey: key, transport }),
        channel,
        since: "0",
        signal: abort.signal,
        minBackoffMs: 50,
        maxBackoffMs: 300,
        onReconnect: (e) => reconnects.push({ cursor: e.cursor }),
      }),
    );
    await post(client, channel, ["before 1", "before 2"]);
    await expect.poll(() => follower.got.length).toBe(2);
    // Cut the network, and keep it cut while more messages are written.
    proxy.cut({ refuse: true });
    await expect.poll(() => reconnects.length).toBeGreaterThan(0);
    await post(client, channel, ["during 1", "during 2", "during 3"]);
    proxy.reopen();
    await expect.poll(() => follower.got.length, { timeout: 15_000 }).toBe(5);
    await post(client, channel, ["after"]);
    await expect.poll(() => follower.got.length).toBe(6);
    abort.abort();
    await follower.done;
    expect(follower.got.map((f) => f.message.content)).toEqual(["before 1", "before 2", "during 1", "during 2", "during 3", "after"]);
    expect(reconnects[0]?.cursor).toBe(follower.got[1]?.cursor);
  });
});

describe("followChannel", () => {
  it("started without since, loses nothing written while the connection is down before its first message", async () => {
    const { client, key } = await clientWithNewKey(server.url);
    const channel = await broadcastChannel(client);
    await post(client, channel, ["history"]);
    const reconnects: Array<{ cursor: string | undefined }> = [];
    const abort = new AbortController();
    let resolveOpened!: () => void;
    const opened = { promise: new Promise<void>((r) => (resolveOpened = r)), resolve: () => resolveOpened() };
    const follower = collect(
      followChannel({
        client: createClient({ baseUrl: proxy.url, apiKey: key, interceptors: [onFirstStreamResponse(() => opened.resolve())] }),
        channel,
        signal: abort.signal,
        minBackoffMs: 50,
        maxBackoffMs: 300,
        onReconnect: (e) => reconnects.push({ cursor: e.cursor }),
      }),
    );
    // Once the stream has opened (the service sent its starting cursor), cut it.
    await opened.promise;
    proxy.cut({ refuse: true });
    await expect.poll(() => reconnects.length).toBeGreaterThan(0);
    await post(client, channel, ["while down"]);
    proxy.reopen();
    await expect.poll(() => follower.got.length, { timeout: 15_000 }).toBe(1);
    abort.abort();
    await follower.done;
    expect(follower.got.map((f) => f.message.content)).toEqual(["while down"]);
    expect(reconnects[0]?.cursor).toBeDefined();
  });

  it("ends without an error when the caller breaks out of the loop", async () => {
    const { client } = await clientWithNewKey(server.url);
    const channel = await broadcastChannel(client);
    await post(client, channel, ["only"]);
    const got: string[] = [];
    for await (const { message } of followChannel({ client, channel, since: "0" })) {
      got.push(message.content);
      break;
    }
    expect(got).toEqual(["only"]);
  });

  it("rejects with the service's error when the channel does not exist, without retrying", async () => {
    const { client } = await clientWithNewKey(server.url);
    let reconnects = 0;
    const read = async () => {
      for await (const _ of followChannel({ client, channel: "no-such-channel", onReconnect: () => reconnects++ })) break;
    };
    await expect(read()).rejects.toMatchObject({ name: "AgentbusError", code: "channel_not_found" });
    expect(reconnects).toBe(0);
  });
});
