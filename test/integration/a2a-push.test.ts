/**
 * A2A push notifications (docs/decisions.md#a2a): a config set with
 * @a2a-js/sdk's client sends the task's changes to a receiver on 127.0.0.1
 * through the webhook dispatcher: A2A's content type, the config's token and
 * authentication, the task as a StreamResponse, up to its final state.
 */
import type { Client } from "@a2a-js/sdk/client";
import { StreamResponse, TaskState } from "@a2a-js/sdk";
import { a2aClient, userMessage } from "../support/a2a.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookReceiver } from "../fakes/webhook-receiver.js";
import { eventually } from "../support/eventually.js";
import { createChannel, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
let hook: WebhookReceiver;
let owner: string;
let sender: string;
let stranger: string;
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true", AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "150ms,200ms" });
  hook = await WebhookReceiver.start();
  [owner, sender, stranger] = await Promise.all(["push-owner", "push-sender", "push-stranger"].map((l) => mintKey(server.url, l)));
});
afterAll(async () => {
  await server?.close();
  await hook?.close();
});

const clientOf = (channel: string, key: string) => a2aClient(server.url, channel, key);

async function send(client: Client, text: string): Promise<string> {
  const task = await client.sendMessage({ tenant: "", message: userMessage(text), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }, metadata: undefined });
  if (!("status" in task)) throw new Error("expected a task");
  return task.id;
}

const published = () => createChannel(server.url, owner, { a2a: { enabled: true } });
const pushesOf = (taskId: string) =>
  hook.requests.filter((r) => r.body.includes(taskId)).map((r) => ({ headers: r.headers, event: StreamResponse.fromJSON(JSON.parse(r.body)) }));

describe("A2A push notifications", () => {
  it("are offered on the card", async () => {
    const ch = await published();
    expect((await (await clientOf(ch, sender)).getAgentCard()).capabilities?.pushNotifications).toBe(true);
  });

  it("send the task's changes to the config's URL with its token and authentication, up to completed", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const taskId = await send(client, "notify me");
    const config = await client.createTaskPushNotificationConfig({ tenant: "", id: "cfg-1", taskId, url: `${hook.url}/a2a`, token: "tok-1", authentication: { scheme: "Bearer", credentials: "secret-1" } });
    expect(config).toMatchObject({ id: "cfg-1", taskId, url: `${hook.url}/a2a`, token: "tok-1", authentication: { scheme: "Bearer", credentials: "" } });
    // Set, it sends the task as it stands.
    await eventually(async () => pushesOf(taskId).length >= 1, 10_000);
    const got = await rest<{ data: ReceivedJson[] }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key: owner, body: { lease_seconds: 60 } });
    await eventually(async () => pushesOf(taskId).length >= 2, 10_000);
    await rest(server.url, "POST", `/v1/messages/${taskId}/ack`, { key: owner, body: { lease_token: got.body.data[0]!.lease_token, result: "done" } });
    await eventually(async () => pushesOf(taskId).some((p) => p.event.payload?.$case === "task" && p.event.payload.value.status?.state === TaskState.TASK_STATE_COMPLETED), 10_000);
    const pushes = pushesOf(taskId);
    for (const p of pushes) {
      expect(p.headers["content-type"]).toBe("application/a2a+json");
      expect(p.headers["x-a2a-notification-token"]).toBe("tok-1");
      expect(p.headers.authorization).toBe("Bearer secret-1");
    }
    const states = pushes.map((p) => (p.event.payload?.$case === "task" ? p.event.payload.value.status?.state : undefined));
    expect(states[0]).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(states).toContain(TaskState.TASK_STATE_WORKING);
    const last = pushes.at(-1)!.event.payload;
    expect(last?.$case === "task" && last.value.artifacts[0]?.parts[0]?.content).toEqual({ $case: "text", value: "done" });
    // The sender's notifications are not in the channel owner's webhook log.
    const log = await rest<{ data: unknown[] }>(server.url, "GET", `/v1/channels/${ch}/webhook-deliveries`, { key: owner });
    expect(log.status).toBe(200);
    expect(log.body.data).toEqual([]);
  });

  it("are read, listed and deleted by the key that set them, and by no other", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const taskId = await send(client, "configs");
    await client.createTaskPushNotificationConfig({ tenant: "", id: "a", taskId, url: `${hook.url}/x`, token: "", authentication: undefined });
    expect((await client.getTaskPushNotificationConfig({ tenant: "", taskId, id: "a" })).url).toBe(`${hook.url}/x`);
    expect((await client.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" })).configs.map((c) => c.id)).toEqual(["a"]);
    const other = await clientOf(ch, stranger);
    expect((await other.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" })).configs).toEqual([]);
    await expect(other.deleteTaskPushNotificationConfig({ tenant: "", taskId, id: "a" })).rejects.toThrow();
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId, id: "a" });
    expect((await client.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" })).configs).toEqual([]);
  });

  it("are refused for a task of a restricted channel the key cannot read", async () => {
    const ch = await createChannel(server.url, owner, { access: "restricted", a2a: { enabled: true } });
    const taskId = await send(await clientOf(ch, owner), "private");
    const other = await clientOf(ch, stranger);
    await expect(other.createTaskPushNotificationConfig({ tenant: "", id: "x", taskId, url: `${hook.url}/y`, token: "", authentication: undefined })).rejects.toThrow(/task/i);
  });
});
