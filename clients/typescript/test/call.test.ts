/** call(): post a task to a work queue and await the worker's result. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { call, CallAbandonedError, CallTimeoutError, ChannelMode, runWorker } from "../src/index.js";
import { clientWithNewKey } from "./helpers.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

async function workQueue() {
  const { client } = await clientWithNewKey(server.url);
  const { id } = await client.channels.createChannel({ name: "rpc", mode: ChannelMode.CLAIMABLE });
  return { client, channel: id };
}

describe("call", () => {
  it("returns the result the worker acked the task with, and the acknowledged message", async () => {
    const { client, channel } = await workQueue();
    const { client: workerClient } = await clientWithNewKey(server.url);
    const stop = new AbortController();
    const worker = runWorker({ client: workerClient, channel, waitSeconds: 2, signal: stop.signal, handle: (m) => m.content.toUpperCase() });
    try {
      const { result, message } = await call(client, channel, "shout this", { timeoutSeconds: 20 });
      expect(result).toBe("SHOUT THIS");
      expect(message).toMatchObject({ content: "shout this", result: "SHOUT THIS" });
      expect(message.acknowledgedBy).toHaveLength(1);
    } finally {
      stop.abort();
      await worker;
    }
  });

  it("waits for a worker that starts after the task was posted", async () => {
    const { client, channel } = await workQueue();
    const pending = call(client, channel, "later", { timeoutSeconds: 20 });
    const { client: workerClient } = await clientWithNewKey(server.url);
    const stop = new AbortController();
    const worker = runWorker({ client: workerClient, channel, waitSeconds: 2, signal: stop.signal, handle: () => ({ done: true }) });
    try {
      expect((await pending).result).toBe('{"done":true}');
    } finally {
      stop.abort();
      await worker;
    }
  });

  it("rejects with CallTimeoutError when no one acknowledges the task in time, leaving the task posted", async () => {
    const { client, channel } = await workQueue();
    const outcome = await call(client, channel, "nobody home", { timeoutSeconds: 1 }).catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(CallTimeoutError);
    const timeout = outcome as CallTimeoutError;
    expect(timeout.timeoutSeconds).toBe(1);
    const stored = await client.messages.getMessage({ messageId: timeout.messageId });
    expect(stored).toMatchObject({ content: "nobody home", active: true, acknowledgedBy: [] });
  });

  it("rejects with CallAbandonedError when the task is retracted before anyone acknowledged it", async () => {
    const { client, channel } = await workQueue();
    const pending = call(client, channel, "never mind", { timeoutSeconds: 20 }).catch((e: unknown) => e);
    // The task is the channel's only message; retract it once it is there.
    const posted = await eventually(async () => (await client.messages.listMessages({ identifier: channel, since: "0" })).data[0]?.id);
    await client.messages.retractMessage({ messageId: posted });
    const outcome = await pending;
    expect(outcome).toBeInstanceOf(CallAbandonedError);
    expect((outcome as CallAbandonedError).task.id).toBe(posted);
  });
});
