/**
 * The reference's convenience verbs (../shared/spec/compat-verbs.md), driven
 * with its request shapes over REST against the real server: a client that
 * speaks only these routes gets the reference's answers.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let producer: string;
let worker: string;
beforeAll(async () => {
  producer = await mintKey(url());
  worker = await mintKey(url());
});

interface MessageJson {
  id: string;
  channel_id: string;
  content: string;
  metadata: Record<string, unknown>;
  claimed_by_key_id: string | null;
  acknowledged_by: unknown[];
  result: string | null;
}
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
const verb = <T = Record<string, unknown>>(key: string, path: string, body: Record<string, unknown>) => rest<T>(url(), "POST", `/v1/tasks/${path}`, { key, body });

describe("POST /v1/tasks/post", () => {
  it("creates a claimable channel of that name when none resolves, posts on it, and answers 201 {message, channel, next_cursor}", async () => {
    const name = unique("jobs");
    const res = await verb<{ message: MessageJson; channel: string; next_cursor: string }>(producer, "post", { channel: name, content: "resize 1.png", actor_label: "planner", metadata: { n: 1 } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ message: { content: "resize 1.png", metadata: { n: 1 } }, channel: expect.any(String), next_cursor: expect.any(String) });
    expect(res.body.message.channel_id).toBe(res.body.channel);
    const channel = await rest<{ name: string; mode: string }>(url(), "GET", `/v1/channels/${res.body.channel}`, { key: producer });
    expect(channel.body).toMatchObject({ name, mode: "claimable" });
  });

  it("posts on the caller's existing channel of that name instead of making another", async () => {
    const name = unique("again");
    const first = await verb<{ channel: string }>(producer, "post", { channel: name, content: "1" });
    const second = await verb<{ channel: string }>(producer, "post", { channel: name, content: "2" });
    expect(second.body.channel).toBe(first.body.channel);
  });

  it("answers 422 missing_field without channel", async () => {
    const res = await verb<{ error: string }>(producer, "post", { content: "nowhere" });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("missing_field");
  });

  it("keeps the native rules: content over the limit is refused and no channel is left behind", async () => {
    const name = unique("too-big");
    const res = await verb<{ error: string }>(producer, "post", { channel: name, content: "x".repeat(70_000) });
    expect(res.status).toBe(422);
    expect((await rest(url(), "GET", `/v1/channels/${name}`, { key: producer })).status).toBe(404);
  });

  it("needs messages:write and channels:write", async () => {
    const narrowed = await mintKey(url());
    expect((await rest(url(), "PUT", "/v1/keys/me/scopes", { key: narrowed, body: { scopes: ["messages:write"] } })).status).toBe(200);
    const res = await verb<{ error: string; required_scope: string }>(narrowed, "post", { channel: unique("scoped"), content: "x" });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "insufficient_scope", required_scope: "channels:write" });
  });
});

describe("POST /v1/tasks/claim", () => {
  it("claims the oldest unclaimed message: 200 {claimed: Message}", async () => {
    const name = unique("queue");
    const { channel } = (await verb<{ channel: string }>(producer, "post", { channel: name, content: "first" })).body;
    await verb(producer, "post", { channel: name, content: "second" });
    const res = await verb<{ claimed: MessageJson }>(worker, "claim", { channel });
    expect(res.status).toBe(200);
    expect(res.body.claimed).toMatchObject({ content: "first", claimed_by_key_id: expect.any(String) });
    expect((await verb<{ claimed: MessageJson }>(worker, "claim", { channel })).body.claimed.content).toBe("second");
  });

  it("answers 200 {claimed: null, note} when nothing is left", async () => {
    const name = unique("empty");
    const { channel } = (await verb<{ channel: string }>(producer, "post", { channel: name, content: "only" })).body;
    await verb(worker, "claim", { channel });
    const res = await verb(worker, "claim", { channel });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ claimed: null, note: "no unclaimed messages available" });
  });

  it("hands each message to exactly one of many racing claimers", async () => {
    const name = unique("race");
    let channel = "";
    for (let i = 0; i < 12; i++) channel = (await verb<{ channel: string }>(producer, "post", { channel: name, content: `task ${i}` })).body.channel;
    const keys = await Promise.all(Array.from({ length: 4 }, () => mintKey(url())));
    const claims = await Promise.all(Array.from({ length: 24 }, (_, i) => verb<{ claimed: MessageJson | null }>(keys[i % 4]!, "claim", { channel })));
    const won = claims.map((c) => c.body.claimed?.id).filter((id): id is string => id !== undefined);
    expect(new Set(won).size).toBe(won.length);
    expect(won).toHaveLength(12);
  });
});

describe("POST /v1/tasks/subscribe", () => {
  it("answers the list page {data, next_cursor, limit}, 50 by default, after since", async () => {
    const name = unique("feed");
    const first = (await verb<{ channel: string; next_cursor: string }>(producer, "post", { channel: name, content: "a" })).body;
    await verb(producer, "post", { channel: name, content: "b" });
    const all = await verb<{ data: MessageJson[]; limit: number; next_cursor: string }>(worker, "subscribe", { channel: first.channel });
    expect(all.status).toBe(200);
    expect(all.body.limit).toBe(50);
    expect(all.body.data.map((m) => m.content)).toEqual(["a", "b"]);
    const after = await verb<{ data: MessageJson[] }>(worker, "subscribe", { channel: first.channel, since: first.next_cursor, limit: 10 });
    expect(after.body.data.map((m) => m.content)).toEqual(["b"]);
  });

  it("refuses a non-numeric wait with 422 (a deliberate deviation)", async () => {
    const { channel } = (await verb<{ channel: string }>(producer, "post", { channel: unique("wait"), content: "a" })).body;
    expect((await verb(worker, "subscribe", { channel, wait: "soon" })).status).toBe(422);
  });
});

describe("POST /v1/tasks/broadcast", () => {
  it("posts on an existing channel: 201 {message, next_cursor}", async () => {
    const ch = await rest<{ id: string }>(url(), "POST", "/v1/channels", { key: producer, body: { name: unique("news"), mode: "broadcast" } });
    const res = await verb<{ message: MessageJson; next_cursor: string }>(producer, "broadcast", { channel: ch.body.id, content: "hello all" });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ message: { channel_id: ch.body.id, content: "hello all" }, next_cursor: expect.any(String) });
  });

  it("never creates a channel: 404 channel_not_found", async () => {
    const res = await verb<{ error: string }>(producer, "broadcast", { channel: unique("absent"), content: "x" });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });
});

describe("POST /v1/tasks/claim-and-ack", () => {
  it("claims and acknowledges in one call: 200 {status: claimed_and_acked, message}", async () => {
    const { message } = (await verb<{ message: MessageJson }>(producer, "post", { channel: unique("one-shot"), content: "x" })).body;
    const res = await verb<{ status: string; message: MessageJson }>(worker, "claim-and-ack", { message_id: message.id });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("claimed_and_acked");
    expect(res.body.message.acknowledged_by).toHaveLength(1);
  });

  it("answers 409 already_claimed when another holds it", async () => {
    const { message } = (await verb<{ message: MessageJson }>(producer, "post", { channel: unique("taken"), content: "x" })).body;
    expect((await rest(url(), "POST", `/v1/messages/${message.id}/claim`, { key: producer, body: {} })).status).toBe(200);
    const res = await verb<{ error: string }>(worker, "claim-and-ack", { message_id: message.id });
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("already_claimed");
  });
});

describe("POST /v1/tasks/create-claimable-session", () => {
  it("creates a restricted claimable channel named session and an invitation to it: 201 {channel, invitation}", async () => {
    const res = await verb<{ channel: { id: string; name: string; mode: string; access: string }; invitation: { id: string; channel: { id: string } } }>(producer, "create-claimable-session", {});
    expect(res.status).toBe(201);
    expect(res.body.channel).toMatchObject({ name: "session", mode: "claimable", access: "restricted" });
    expect(res.body.invitation.channel.id).toBe(res.body.channel.id);
    expect((await rest(url(), "GET", `/v1/channel-invitations/${res.body.invitation.id}`, { key: worker })).status).toBe(200);
    expect((await verb(worker, "subscribe", { channel: res.body.channel.id })).status).toBe(200);
  });
});

describe("results: post-with-result, then POST and GET /v1/tasks/{id}/result", () => {
  it("creates the work channel and the result channel result-of-<id>: 201 {message, channel, result_channel, result_url}", async () => {
    const name = unique("render");
    const res = await verb<{ message: MessageJson; channel: string; result_channel: string; result_url: string }>(producer, "post-with-result", { channel: name, content: "render it" });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ result_channel: `result-of-${res.body.message.id}`, result_url: `/v1/tasks/${res.body.message.id}/result` });
    expect(res.body.message.channel_id).toBe(res.body.channel);
    const results = await rest<{ mode: string }>(url(), "GET", `/v1/channels/${res.body.result_channel}`, { key: producer });
    expect(results.body.mode).toBe("broadcast");
  });

  it("answers 404 result_not_ready until the worker posts the result, then {task_id, result}", async () => {
    const posted = (await verb<{ message: MessageJson; channel: string }>(producer, "post-with-result", { channel: unique("job"), content: "do it" })).body;
    const early = await rest<{ error: string }>(url(), "GET", `/v1/tasks/${posted.message.id}/result`, { key: producer });
    expect(early.status).toBe(404);
    expect(early.body.error).toBe("result_not_ready");

    expect((await verb<{ claimed: MessageJson }>(worker, "claim", { channel: posted.channel })).body.claimed.id).toBe(posted.message.id);
    const result = await rest<{ result_channel: string; message: MessageJson }>(url(), "POST", `/v1/tasks/${posted.message.id}/result`, { key: worker, body: { content: "done", metadata: { pages: 3 } } });
    expect(result.status).toBe(201);
    expect(result.body).toMatchObject({ result_channel: `result-of-${posted.message.id}`, message: { content: "done", metadata: { pages: 3, task_id: posted.message.id } } });

    const got = await rest<{ task_id: string; result: MessageJson }>(url(), "GET", `/v1/tasks/${posted.message.id}/result`, { key: producer });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ task_id: posted.message.id, result: { content: "done" } });
  });

  it("acknowledges the claimed task with the result, so native readers see it as the task's result", async () => {
    const posted = (await verb<{ message: MessageJson; channel: string }>(producer, "post-with-result", { channel: unique("native"), content: "x" })).body;
    await verb(worker, "claim", { channel: posted.channel });
    await rest(url(), "POST", `/v1/tasks/${posted.message.id}/result`, { key: worker, body: { content: "42" } });
    const task = await rest<MessageJson>(url(), "GET", `/v1/messages/${posted.message.id}`, { key: producer });
    expect(task.body.result).toBe("42");
    expect(task.body.acknowledged_by).toHaveLength(1);
  });

  it("answers 404 for a task that has no result channel", async () => {
    const { message } = (await verb<{ message: MessageJson }>(producer, "post", { channel: unique("plain"), content: "x" })).body;
    const res = await rest<{ error: string }>(url(), "POST", `/v1/tasks/${message.id}/result`, { key: worker, body: { content: "r" } });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });
});
