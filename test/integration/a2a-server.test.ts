/**
 * A published channel as an A2A 1.0 agent (docs/decisions.md#a2a), driven
 * by @a2a-js/sdk's own client over the JSON-RPC binding: card discovery,
 * send (blocking and not), stream, get, list, cancel, and refusals for a
 * key the channel does not admit. Workers are plain agentbus workers.
 */
import type { Client } from "@a2a-js/sdk/client";
import { TaskState, type Message, type StreamResponse } from "@a2a-js/sdk";
import { a2aClient, userMessage } from "../support/a2a.js";
import { beforeAll, describe, expect, it } from "vitest";
import { createChannel, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let owner: string;
let sender: string;
let worker: string;
let stranger: string;
beforeAll(async () => {
  [owner, sender, worker, stranger] = await Promise.all(["a2a-owner", "a2a-sender", "a2a-worker", "a2a-stranger"].map((l) => mintKey(url(), l)));
});

const published = (extra: Record<string, unknown> = {}) =>
  createChannel(url(), owner, {
    description: "Summarises text",
    a2a: { enabled: true, name: "Summariser", skills: [{ id: "summarise", name: "Summarise", description: "Summarises a text", tags: ["text"], examples: ["Summarise this"] }] },
    ...extra,
  });

const clientOf = (channel: string, key: string) => a2aClient(url(), channel, key);

const send = (client: Client, message: Message, returnImmediately = true) =>
  client.sendMessage({ tenant: "", message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined });

const taskOf = (result: Awaited<ReturnType<Client["sendMessage"]>>) => {
  if (!("status" in result)) throw new Error("expected a task");
  return result;
};

async function receiveOne(channel: string): Promise<ReceivedJson> {
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${channel}/messages:receive`, { key: worker, body: { lease_seconds: 60, wait: 5 } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data).toHaveLength(1);
  return res.body.data[0]!;
}

const ack = (id: string, token: string, result: string) => rest(url(), "POST", `/v1/messages/${id}/ack`, { key: worker, body: { lease_token: token, result } });

describe("the agent card", () => {
  it("serves a valid A2A 1.0 card for a published channel, without a key", async () => {
    const ch = await published();
    const res = await fetch(`${url()}/a2a/${ch}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card = (await res.json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      name: "Summariser",
      description: "Summarises text",
      supportedInterfaces: [{ url: `${url()}/a2a/${ch}`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
      capabilities: { streaming: true },
      securitySchemes: { agentbus_api_key: { apiKeySecurityScheme: { location: "header", name: "X-API-Key" } } },
      skills: [{ id: "summarise", name: "Summarise", tags: ["text"], examples: ["Summarise this"] }],
    });
  });

  it("is found by the SDK's card resolver", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    expect((await client.getAgentCard()).name).toBe("Summariser");
  });

  it("answers 404 for a channel that is not published", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "GET", `/a2a/${ch}/.well-known/agent-card.json`);
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "agent_not_found" });
  });

  it("answers 404 once the owner turns publishing off", async () => {
    const ch = await published();
    const off = await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { a2a: { enabled: false } } });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect((await rest(url(), "GET", `/a2a/${ch}/.well-known/agent-card.json`)).status).toBe(404);
  });

  it("answers 404 for a path that is not a channel id", async () => {
    expect((await rest(url(), "GET", "/a2a/not-a-uuid/.well-known/agent-card.json")).status).toBe(404);
  });
});

describe("the a2a channel field", () => {
  it("is shown on the channel", async () => {
    const ch = await published();
    const res = await rest<{ a2a: unknown }>(url(), "GET", `/v1/channels/${ch}`, { key: owner });
    expect(res.body.a2a).toMatchObject({ enabled: true, name: "Summariser", skills: [{ id: "summarise" }] });
  });

  it("refuses publishing a broadcast channel with 422 invalid_a2a", async () => {
    const res = await rest(url(), "POST", "/v1/channels", { key: owner, body: { name: "b", mode: "broadcast", a2a: { enabled: true } } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_a2a", field: "a2a.enabled" });
  });

  it("is changed by the owner only", async () => {
    const ch = await published();
    const res = await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: stranger, body: { a2a: { enabled: false } } });
    expect([403, 404]).toContain(res.status);
  });
});

describe("SendMessage", () => {
  it("posts the message on the channel and answers a submitted task whose id is the message id", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const task = taskOf(await send(client, userMessage("Summarise: the cat sat", { contextId: "ctx-1", metadata: { lang: "en" } })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(task.contextId).toBe("ctx-1");
    const got = await receiveOne(ch);
    expect(got.message.id).toBe(task.id);
    expect(got.message.content).toBe("Summarise: the cat sat");
    expect(got.message.metadata).toMatchObject({ a2a: { context_id: "ctx-1", metadata: { lang: "en" } } });
  });

  it("keeps parts other than text in the message's metadata", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const message = userMessage("see data");
    message.parts.push({ content: { $case: "data", value: { n: 3 } }, metadata: undefined, filename: "", mediaType: "application/json" });
    const task = taskOf(await send(client, message));
    const got = await receiveOne(ch);
    expect(got.message.metadata).toMatchObject({ a2a: { parts: [{ data: { n: 3 } }] } });
    expect(task.history[0]?.parts).toHaveLength(2);
  });

  it("stores a retried message (same messageId) once", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const message = userMessage("once");
    const a = taskOf(await send(client, message));
    const b = taskOf(await send(client, message));
    expect(b.id).toBe(a.id);
    const list = await rest<{ data: unknown[] }>(url(), "GET", `/v1/channels/${ch}/messages?since=0`, { key: owner });
    expect(list.body.data).toHaveLength(1);
  });

  it("waits, when not told to return at once, and answers the completed task with the result as its artifact", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const pending = send(client, userMessage("sum 1 2"), false);
    const got = await receiveOne(ch);
    await ack(got.message.id, got.lease_token, JSON.stringify({ sum: 3 }));
    const task = taskOf(await pending);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts[0]?.parts[0]?.content).toEqual({ $case: "data", value: { sum: 3 } });
  });

  it("refuses a key that may not write to a restricted channel, and posts nothing", async () => {
    const ch = await published({ access: "restricted" });
    const client = await clientOf(ch, stranger);
    await expect(send(client, userMessage("let me in"))).rejects.toThrow();
    const list = await rest<{ data: unknown[] }>(url(), "GET", `/v1/channels/${ch}/messages?since=0`, { key: owner });
    expect(list.body.data).toHaveLength(0);
  });

  it("answers 401 without a key", async () => {
    const ch = await published();
    const res = await rest(url(), "POST", `/a2a/${ch}`, { body: { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } } });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: "unauthorized" });
  });
});

describe("SendStreamingMessage", () => {
  it("streams the task, working, progress, the artifact and completed, then ends", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const events: StreamResponse[] = [];
    const done = (async () => {
      for await (const event of client.sendMessageStream({ tenant: "", message: userMessage("long job"), configuration: undefined, metadata: undefined })) events.push(event);
    })();
    for (let i = 0; i < 250 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    const got = await receiveOne(ch);
    const progress = await rest(url(), "POST", `/v1/messages/${got.message.id}/progress`, { key: worker, body: { lease_token: got.lease_token, text: "half way", data: { pct: 50 } } });
    expect(progress.status).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    await ack(got.message.id, got.lease_token, "the summary");
    await done;
    const kinds = events.map((e) => e.payload?.$case);
    expect(kinds[0]).toBe("task");
    expect(kinds.at(-1)).toBe("statusUpdate");
    const states = events.flatMap((e) => (e.payload?.$case === "statusUpdate" ? [e.payload.value.status?.state] : []));
    expect(states).toContain(TaskState.TASK_STATE_WORKING);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    const texts = events.flatMap((e) => (e.payload?.$case === "statusUpdate" ? (e.payload.value.status?.message?.parts ?? []).map((p) => p.content) : []));
    expect(texts).toContainEqual({ $case: "text", value: "half way" });
    const artifact = events.find((e) => e.payload?.$case === "artifactUpdate");
    expect(artifact?.payload?.$case === "artifactUpdate" && artifact.payload.value.artifact?.parts[0]?.content).toEqual({ $case: "text", value: "the summary" });
  });
});

describe("GetTask, ListTasks, CancelTask", () => {
  it("gets a task by id, with its state as it stands", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const task = taskOf(await send(client, userMessage("get me")));
    await receiveOne(ch);
    const got = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    expect(got.history[0]?.parts[0]?.content).toEqual({ $case: "text", value: "get me" });
  });

  it("answers TaskNotFound for a message of another channel", async () => {
    const ch = await published();
    const other = await published();
    const client = await clientOf(ch, sender);
    const elsewhere = taskOf(await send(await clientOf(other, sender), userMessage("elsewhere")));
    await expect(client.getTask({ tenant: "", id: elsewhere.id, historyLength: undefined })).rejects.toThrow(/not found|No task/i);
  });

  it("lists the caller's tasks only, filtered by context", async () => {
    const ch = await published();
    const mine = await clientOf(ch, sender);
    const theirs = await clientOf(ch, worker);
    const a = taskOf(await send(mine, userMessage("a", { contextId: "c1" })));
    taskOf(await send(mine, userMessage("b", { contextId: "c2" })));
    taskOf(await send(theirs, userMessage("c", { contextId: "c1" })));
    const listed = await mine.listTasks({ tenant: "", contextId: "c1", status: 0, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
    expect(listed.tasks.map((t) => t.id)).toEqual([a.id]);
  });

  it("pages the caller's tasks without skipping or repeating one", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(taskOf(await send(client, userMessage(`t${i}`))).id);
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await client.listTasks({ tenant: "", contextId: "", status: 0, pageSize: 2, pageToken, historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
      seen.push(...page.tasks.map((t) => t.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen).toEqual(ids);
  });

  it("cancels a task not yet taken", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const task = taskOf(await send(client, userMessage("never mind")));
    const cancelled = await client.cancelTask({ tenant: "", id: task.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("answers TaskNotCancelable for a finished task", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const task = taskOf(await send(client, userMessage("quick")));
    const got = await receiveOne(ch);
    await ack(got.message.id, got.lease_token, "done");
    await expect(client.cancelTask({ tenant: "", id: task.id, metadata: undefined })).rejects.toThrow(/cancel/i);
  });

  it("answers TaskNotFound to a key that cannot read the channel", async () => {
    const ch = await published({ access: "restricted" });
    const task = taskOf(await send(await clientOf(ch, owner), userMessage("secret")));
    const client = await clientOf(ch, stranger);
    await expect(client.getTask({ tenant: "", id: task.id, historyLength: undefined })).rejects.toThrow(/not found|No task/i);
  });
});

describe("SubscribeToTask", () => {
  it("follows a task already sent until it completes", async () => {
    const ch = await published();
    const client = await clientOf(ch, sender);
    const task = taskOf(await send(client, userMessage("follow me")));
    const events: StreamResponse[] = [];
    const done = (async () => {
      for await (const event of client.resubscribeTask({ tenant: "", id: task.id })) events.push(event);
    })();
    // Subscribed (the task came first) before the worker finishes it.
    for (let i = 0; i < 250 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(events).toHaveLength(1);
    const got = await receiveOne(ch);
    await ack(got.message.id, got.lease_token, "followed");
    await done;
    expect(events[0]?.payload?.$case).toBe("task");
    const last = events.at(-1)?.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});

describe("bad requests", () => {
  const rpc = (ch: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${url()}/a2a/${ch}`, { method: "POST", headers: { "Content-Type": "application/json", "A2A-Version": "1.0", "X-API-Key": sender, ...headers }, body });

  it("answers a body that is not JSON with the SDK's JSON-RPC error for a malformed request, not a 500", async () => {
    const ch = await published();
    const res = await rpc(ch, "{not json");
    expect(res.status).toBe(200);
    expect([-32700, -32602]).toContain(((await res.json()) as { error: { code: number } }).error.code);
  });

  it("answers an unknown method with method not found", async () => {
    const ch = await published();
    const res = await rpc(ch, JSON.stringify({ jsonrpc: "2.0", id: 7, method: "Nope", params: {} }));
    expect(((await res.json()) as { id: number; error: { code: number } })).toMatchObject({ id: 7, error: { code: -32601 } });
  });

  it("answers a request without A2A-Version (0.3) with version not supported", async () => {
    const ch = await published();
    const res = await rpc(ch, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }), { "A2A-Version": "" });
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32009);
  });

  it("refuses a body over the limit with 413", async () => {
    const ch = await published();
    const res = await rpc(ch, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { parts: [{ text: "x".repeat(2 * 1024 * 1024) }] } } }));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: "payload_too_large" });
  });

  it("answers a message over the content limit with invalid params carrying the catalog's code", async () => {
    const ch = await published();
    const res = await rpc(ch, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "big", role: "ROLE_USER", parts: [{ text: "x".repeat(300 * 1024) }] } } }));
    const body = (await res.json()) as { error: { code: number; data: Array<{ metadata: { error: string } }> } };
    expect(body, JSON.stringify(body).slice(0, 500)).toHaveProperty("error.data");
    expect(body.error.code).toBe(-32602);
    expect(body.error.data[0]?.metadata.error).toMatch(/too_large|invalid/);
  });
});

describe("the JSON-RPC binding with curl", () => {
  it("answers the SendMessage of /llms.txt's example with a submitted task", async () => {
    const ch = await published();
    const res = await fetch(`${url()}/a2a/${ch}`, {
      method: "POST",
      headers: { "X-API-Key": sender, "A2A-Version": "1.0", "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "Summarise: …" }] }, configuration: { returnImmediately: true } } }),
    });
    const body = (await res.json()) as { id: number; result: { task: { id: string; status: { state: string } } } };
    expect(body).toMatchObject({ id: 1, result: { task: { status: { state: "TASK_STATE_SUBMITTED" } } } });
    expect((await receiveOne(ch)).message.id).toBe(body.result.task.id);
  });
});

// Last in this file: it spends this address's card reads for the minute.
describe("card reads without a key", () => {
  it("are limited per address: past 120 a minute, 429 with Retry-After", async () => {
    const ch = await published();
    let refused: Response | undefined;
    for (let i = 0; i < 130 && refused === undefined; i++) {
      const res = await fetch(`${url()}/a2a/${ch}/.well-known/agent-card.json`);
      if (res.status === 429) refused = res;
      else await res.arrayBuffer();
    }
    expect(refused?.status).toBe(429);
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await refused?.json()).toMatchObject({ error: "rate_limit_exceeded" });
  });
});
