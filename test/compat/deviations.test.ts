/**
 * Where agentbus answers differently from the reference on purpose (the
 * README's migration section, docs/decisions.md#compat-verbs), and the
 * reference's name rule it follows: each pinned, so a change to one is a
 * decision, not an accident.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let key: string;
beforeAll(async () => {
  key = await mintKey(url());
});

describe("deliberate deviations", () => {
  it("issues keys that start ak_", async () => {
    const res = await rest<{ key: string; key_id: string }>(url(), "POST", "/v1/keys", { body: { agent_label: `dev-${Date.now()}` } });
    expect(res.body.key).toMatch(/^ak_/);
    expect(res.body.key_id).toMatch(/^ak_/);
  });

  it("refuses content over 64 KiB with 422 content_too_large", async () => {
    const ch = (await rest<{ channel: string }>(url(), "POST", "/v1/tasks/post", { key, body: { channel: "limits", content: "x" } })).body.channel;
    const res = await rest<{ error: string }>(url(), "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "x".repeat(64 * 1024 + 1) } });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("content_too_large");
  });

  it("refuses a non-numeric wait with 422 invalid_wait", async () => {
    const ch = (await rest<{ channel: string }>(url(), "POST", "/v1/tasks/post", { key, body: { channel: "waits", content: "x" } })).body.channel;
    const res = await rest<{ error: string }>(url(), "GET", `/v1/channels/${ch}/messages?wait=soon`, { key });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_wait");
  });

  it("stores a retried post twice without an Idempotency-Key, once with one", async () => {
    const ch = (await rest<{ channel: string }>(url(), "POST", "/v1/tasks/post", { key, body: { channel: "retries", content: "seed" } })).body.channel;
    const post = (headers: Record<string, string> = {}) => rest<{ message: { id: string } }>(url(), "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "again" }, headers });
    const [a, b] = [await post(), await post()];
    expect(a.body.message.id).not.toBe(b.body.message.id);
    const [c, d] = [await post({ "Idempotency-Key": "same-1" }), await post({ "Idempotency-Key": "same-1" })];
    expect(c.body.message.id).toBe(d.body.message.id);
  });

  it("refuses a reused Idempotency-Key with a different body with 422 idempotency_key_reused", async () => {
    const ch = (await rest<{ channel: string }>(url(), "POST", "/v1/tasks/post", { key, body: { channel: "reused", content: "seed" } })).body.channel;
    const headers = { "Idempotency-Key": "reused-1" };
    expect((await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "one" }, headers })).status).toBe(201);
    const res = await rest<{ error: string }>(url(), "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "two" }, headers });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("idempotency_key_reused");
  });
});

describe("the reference's name rule", () => {
  it("resolves a name the caller's several channels share to the newest, as Backchannel clients that make a channel per task expect", async () => {
    const first = await rest<{ id: string }>(url(), "POST", "/v1/channels", { key, body: { name: "per-task", mode: "claimable" } });
    const second = await rest<{ id: string }>(url(), "POST", "/v1/channels", { key, body: { name: "per-task", mode: "claimable" } });
    const posted = await rest<{ channel: string }>(url(), "POST", "/v1/tasks/post", { key, body: { channel: "per-task", content: "x" } });
    expect(posted.body.channel).toBe(second.body.id);
    expect(posted.body.channel).not.toBe(first.body.id);
    const claimed = await rest<{ claimed: { channel_id: string } }>(url(), "POST", "/v1/tasks/claim", { key, body: { channel: "per-task" } });
    expect(claimed.body.claimed.channel_id).toBe(second.body.id);
  });
});
