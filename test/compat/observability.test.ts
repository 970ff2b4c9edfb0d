/**
 * The reference's observability routes (../shared/spec/compat-verbs.md) over
 * REST: the same figures as the native stats, in its shapes.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer({ AGENTBUS_RATE_LIMIT: "600" });
const url = () => server.url;
let owner: string;
let worker: string;
beforeAll(async () => {
  owner = await mintKey(url());
  worker = await mintKey(url());
});

const post = (channel: string, content: string) => rest<{ id: string }>(url(), "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content } });

describe("GET /v1/channels/{identifier}/metrics", () => {
  it("counts the channel's live messages as {total, unclaimed, claimed, acknowledged} with the mean claim-to-ack time", async () => {
    const ch = (await rest<{ id: string }>(url(), "POST", "/v1/channels", { key: owner, body: { name: "metered", mode: "claimable" } })).body.id;
    const ids: string[] = [];
    for (const content of ["a", "b", "c"]) ids.push((await rest<{ message: { id: string } }>(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content } })).body.message.id);
    await rest(url(), "POST", `/v1/messages/${ids[0]}/claim`, { key: worker, body: {} });
    await rest(url(), "POST", `/v1/messages/${ids[0]}/ack`, { key: worker, body: {} });
    await rest(url(), "POST", `/v1/messages/${ids[1]}/claim`, { key: worker, body: {} });

    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/metered/metrics`, { key: owner });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      channel_id: ch,
      message_counts: { total: 3, unclaimed: 1, claimed: 1, acknowledged: 1 },
      avg_claim_to_ack_ms: expect.any(Number),
      computed_at: expect.any(String),
    });
    expect(Number.isInteger(res.body.avg_claim_to_ack_ms)).toBe(true);
    const stats = await rest<{ ready: number; in_flight: number; acknowledged: number }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(stats.body).toMatchObject({ ready: 1, in_flight: 1, acknowledged: 1 });
  });

  it("answers avg_claim_to_ack_ms null when nothing claimed was acknowledged", async () => {
    const ch = (await rest<{ id: string }>(url(), "POST", "/v1/channels", { key: owner, body: { name: "quiet", mode: "claimable" } })).body.id;
    await post(ch, "x");
    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}/metrics`, { key: owner });
    expect(res.body).toMatchObject({ message_counts: { total: 1, unclaimed: 1, claimed: 0, acknowledged: 0 }, avg_claim_to_ack_ms: null });
  });

  it("refuses a channel the caller cannot read exactly as the stats do", async () => {
    const ch = (await rest<{ id: string }>(url(), "POST", "/v1/channels", { key: owner, body: { name: "private", mode: "claimable", access: "restricted" } })).body.id;
    const res = await rest<{ error: string }>(url(), "GET", `/v1/channels/${ch}/metrics`, { key: worker });
    const stats = await rest<{ error: string }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: worker });
    expect(res.status).toBe(stats.status);
    expect(res.status).toBeGreaterThanOrEqual(403);
    expect(res.body.error).toBe(stats.body.error);
  });
});

describe("GET /v1/observability/metrics", () => {
  it("counts the caller's channels, the messages in them (claimed, acknowledged) and its live sessions", async () => {
    const key = await mintKey(url());
    const a = (await rest<{ id: string }>(url(), "POST", "/v1/channels", { key, body: { name: "one", mode: "claimable" } })).body.id;
    await rest(url(), "POST", "/v1/channels", { key, body: { name: "two", mode: "broadcast" } });
    const first = (await rest<{ message: { id: string } }>(url(), "POST", `/v1/channels/${a}/messages`, { key, body: { content: "x" } })).body.message.id;
    await rest(url(), "POST", `/v1/channels/${a}/messages`, { key: worker, body: { content: "y" } });
    await rest(url(), "POST", `/v1/messages/${first}/claim`, { key: worker, body: {} });
    await rest(url(), "POST", "/v1/sessions", { key, body: { name: "s", state: {} } });

    const res = await rest<Record<string, unknown>>(url(), "GET", "/v1/observability/metrics", { key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      key_id: key.split(".")[0],
      channels_owned: 2,
      messages_in_owned_channels: 2,
      messages_claimed_in_owned_channels: 1,
      messages_acknowledged_in_owned_channels: 0,
      active_sessions: 1,
      computed_at: expect.any(String),
    });
  });
});

describe("GET /account/usage", () => {
  it("shows the key's rate limit with this window's use and its storage quotas, and says there are no plans", async () => {
    const key = await mintKey(url());
    const res = await rest<Record<string, unknown>>(url(), "GET", "/account/usage", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      key_id: key.split(".")[0],
      plan: "none",
      rate_limit: { requests_per_window: 600, window_seconds: 60, remaining: expect.any(Number), reset_seconds: expect.any(Number) },
      instance_kind: "agentbus",
      note: expect.stringContaining("no plans"),
      quotas: { stored_bytes: { used: expect.anything() }, live_messages: expect.anything(), channels: expect.anything() },
    });
  });

  it("needs a key: 401 without one", async () => {
    expect((await rest(url(), "GET", "/account/usage")).status).toBe(401);
  });
});
