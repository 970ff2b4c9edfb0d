/** Issue 28 through the client: shared limits (client.limits), a channel's group settings, and call() with a group, a priority and an expiry. */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { call, ChannelDispatch, ChannelMode, isAgentbusError, runWorker, type Limit, type TransportKind } from "../src/index.js";
import { clientWithNewKey } from "./helpers.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

const transports: TransportKind[] = ["grpc", "connect", "grpc-web"];

describe.each(transports)("over %s", (transport) => {
  it("creates, lists, updates and deletes a shared limit, which a channel names with its group settings", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const created: Limit = await client.limits.createLimit({ name: "model", maxInFlight: 5, rate: { count: 100, perSeconds: 60 } });
    expect(created).toMatchObject({ name: "model", maxInFlight: 5, rate: { count: 100, perSeconds: 60 }, inFlight: 0, usedInWindow: 0 });

    const channel = await client.channels.createChannel({
      name: "repos",
      mode: ChannelMode.CLAIMABLE,
      groupConcurrency: 1,
      dispatch: ChannelDispatch.FAIR,
      priorityAgingSeconds: 30,
      limits: ["model"],
    });
    expect(channel).toMatchObject({ groupConcurrency: 1, dispatch: ChannelDispatch.FAIR, priorityAgingSeconds: 30, limits: ["model"] });

    await client.messages.createMessage({ identifier: channel.id, content: "task", groupKey: "repo-a", priority: 2 });
    const received = await client.messages.receiveMessages({ identifier: channel.id, maxMessages: 1 });
    expect(received.data[0]?.message).toMatchObject({ groupKey: "repo-a", priority: 2 });
    expect((await client.limits.getLimit({ name: "model" })).inFlight).toBe(1);
    const stats = await client.messages.getChannelStats({ identifier: channel.id });
    expect(stats.groups).toMatchObject({ count: 1, inFlight: 1 });
    expect(Object.keys(stats.readyByPriority).sort()).toEqual(["1", "2", "3", "4", "5"]);

    const updated = await client.limits.updateLimit({ name: "model", update: { maxInFlight: 10 }, updateMask: { paths: ["max_in_flight"] } });
    expect(updated.maxInFlight).toBe(10);
    expect((await client.limits.listLimits({})).data.map((l) => l.name)).toEqual(["model"]);
    await client.limits.deleteLimit({ name: "model" });
    const gone = await client.limits.getLimit({ name: "model" }).catch((err: unknown) => err);
    expect(isAgentbusError(gone, "limit_not_found")).toBe(true);
  });
});

describe("call() with a group, a priority and an expiry", () => {
  it("posts the task with groupKey, priority and ttlSeconds", async () => {
    const { client } = await clientWithNewKey(server.url);
    const { id: channel } = await client.channels.createChannel({ name: "rpc", mode: ChannelMode.CLAIMABLE });
    const stop = new AbortController();
    const worker = runWorker({ client, channel, waitSeconds: 2, signal: stop.signal, handle: (m) => `${m.groupKey ?? "none"}/${m.priority}` });
    try {
      const { result, message } = await call(client, channel, "summarise", { timeoutSeconds: 20, groupKey: "conversation-7", priority: 1, ttlSeconds: 600 });
      expect(result).toBe("conversation-7/1");
      expect(timestampMs(message.expiresAt!) - timestampMs(message.createdAt!)).toBe(600_000);
    } finally {
      stop.abort();
      await worker;
    }
  });
});
