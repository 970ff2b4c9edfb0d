/** The core message flow over REST: post, list by cursor, claim, ack, leases, retract (docs/decisions.md#channels-and-messages). */
import { beforeAll, describe, expect, it } from "vitest";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const clock = new AdjustableClock();
const server = useTestServer({ AGENTBUS_MAX_CONTENT_BYTES: "64" }, { clock });
let owner: string;
let other: string;
beforeAll(async () => {
  owner = await mintKey(server.url, "owner");
  other = await mintKey(server.url, "other");
});

const url = () => server.url;

describe("POST /v1/channels/{identifier}/messages", () => {
  it("answers 201 with the message and a next_cursor equal to its created_at", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest<{ message: MessageJson; next_cursor: string }>(url(), "POST", `/v1/channels/${ch}/messages`, {
      key: owner,
      body: { content: "resize image 42" },
    });
    expect(res.status).toBe(201);
    const m = res.body.message;
    expect(Object.keys(m).sort()).toEqual(
      ["acknowledged_by", "active", "actor", "actor_label", "author_key_id", "author_label", "available_at", "channel_id", "claimed_at", "claimed_by", "claimed_by_key_id", "content", "created_at", "dead_letter", "delivery_count", "expires_at", "group_key", "id", "lease_expires_at", "limits", "mentions", "metadata", "priority", "result", "state", "cancel_requested", "cancel_reason", "progress", "depends_on", "dependents_count", "waitpoint", "trace"].sort(),
    );
    expect(m).toMatchObject({
      channel_id: ch,
      content: "resize image 42",
      state: "ready",
      cancel_requested: false,
      cancel_reason: null,
      progress: null,
      depends_on: [],
      dependents_count: 0,
      actor: null,
      actor_label: null,
      metadata: {},
      claimed_by: null,
      claimed_by_key_id: null,
      claimed_at: null,
      mentions: [],
      acknowledged_by: [],
      active: true,
      result: null,
      // Posted without a trace context: it starts a new trace.
      trace: { traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/), tracestate: null },
    });
    expect(m.created_at).toMatch(TIMESTAMP_6);
    expect(res.body.next_cursor).toBe(m.created_at);
  });

  it("stores content verbatim, surrounding whitespace included", async () => {
    const ch = await createChannel(url(), owner);
    expect((await postMessage(url(), owner, ch, { content: "  padded  " })).content).toBe("  padded  ");
  });

  it("answers 422 missing_field without content and invalid_string for blank content", async () => {
    const ch = await createChannel(url(), owner);
    const missing = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: {} });
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ error: "missing_field" });
    const blank = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: " \n " } });
    expect(blank.body).toMatchObject({ error: "invalid_string" });
  });

  it("answers 422 content_too_large above AGENTBUS_MAX_CONTENT_BYTES, counting UTF-8 bytes", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "é".repeat(33) } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "content_too_large", max_content_bytes: 64, received_bytes: 66 });
  });

  it("answers 422 metadata_too_large for metadata over 16 KiB", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "x", metadata: { blob: "x".repeat(17000) } } });
    expect(res.body).toMatchObject({ error: "metadata_too_large" });
  });

  it("validates the body before looking up the channel", async () => {
    const res = await rest(url(), "POST", "/v1/channels/no-such-channel/messages", { key: owner, body: {} });
    expect(res.status).toBe(422);
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const res = await rest(url(), "POST", "/v1/channels/no-such-channel/messages", { key: owner, body: { content: "x" } });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "channel_not_found" });
  });

  it("enforces the channel's metadata_schema and lists every violation", async () => {
    const ch = await createChannel(url(), owner, {
      metadata_schema: { type: "object", required: ["priority"], properties: { priority: { type: "integer", maximum: 5 } } },
    });
    const bad = await rest<{ violations: Array<{ field: string; issue: string }> }>(url(), "POST", `/v1/channels/${ch}/messages`, {
      key: owner,
      body: { content: "x", metadata: { priority: 9 } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: "metadata_validation_failed" });
    expect(bad.body.violations).toEqual([expect.objectContaining({ field: "metadata.priority" })]);
    const missing = await rest<{ violations: unknown[] }>(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "x" } });
    expect(missing.body.violations).toEqual([expect.objectContaining({ field: "metadata.priority" })]);
    expect((await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "x", metadata: { priority: 2 } } })).status).toBe(201);
  });

  it("answers 503 channel_paused with Retry-After on a paused channel, while reads still work", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "before" });
    await server.app.pool.query("UPDATE channels SET paused = true WHERE id = $1", [ch]);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "during" } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "channel_paused" });
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await listMessages(url(), owner, ch)).data).toHaveLength(1);
  });

  it("answers 429 channel_write_rate_exceeded with Retry-After beyond max_writes_per_minute, across keys", async () => {
    const ch = await createChannel(url(), owner, { max_writes_per_minute: 3 });
    await postMessage(url(), owner, ch, { content: "1" });
    await postMessage(url(), other, ch, { content: "2" });
    await postMessage(url(), owner, ch, { content: "3" });
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: other, body: { content: "4" } });
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ error: "channel_write_rate_exceeded" });
    const retryAfter = Number(res.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });

  it("keeps only the newest max_messages messages (ring buffer)", async () => {
    const ch = await createChannel(url(), owner, { max_messages: 3 });
    for (let i = 1; i <= 5; i++) await postMessage(url(), owner, ch, { content: `m${i}` });
    expect((await listMessages(url(), owner, ch)).data.map((m) => m.content)).toEqual(["m3", "m4", "m5"]);
  });

  it("records mentions of actors that can read the channel", async () => {
    const ch = await createChannel(url(), owner);
    const actor = await rest<{ id: string; name: string }>(url(), "POST", "/v1/actors", { key: other, body: { name: "reviewer" } });
    const m = await postMessage(url(), owner, ch, { content: "please review", mentions: [actor.body.id, "nobody-by-that-alias"] });
    expect(m.mentions).toEqual([{ id: actor.body.id, name: "reviewer" }]);
  });

  it("posts as one of the caller's actors, and refuses another key's actor with 403 actor_forbidden", async () => {
    const ch = await createChannel(url(), owner);
    const mine = await rest<{ id: string }>(url(), "POST", "/v1/actors", { key: owner, body: { name: "poster" } });
    const m = await postMessage(url(), owner, ch, { content: "x", actor: mine.body.id, actor_label: "cron" });
    expect(m).toMatchObject({ actor: { id: mine.body.id, name: "poster" }, actor_label: "cron" });
    const theirs = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: other, body: { content: "x", actor: mine.body.id } });
    expect(theirs.status).toBe(403);
    expect(theirs.body).toMatchObject({ error: "actor_forbidden" });
  });
});

describe("GET /v1/channels/{identifier}/messages", () => {
  it("returns live messages oldest first, and since=<next_cursor> returns only newer ones", async () => {
    const ch = await createChannel(url(), owner);
    for (const c of ["a", "b", "c"]) await postMessage(url(), owner, ch, { content: c });
    const first = await listMessages(url(), owner, ch, "?since=0&limit=2");
    expect(first.data.map((m) => m.content)).toEqual(["a", "b"]);
    expect(first.limit).toBe(2);
    expect(first.next_cursor).toBe(first.data[1]!.created_at);
    const second = await listMessages(url(), owner, ch, `?since=${encodeURIComponent(first.next_cursor!)}`);
    expect(second.data.map((m) => m.content)).toEqual(["c"]);
  });

  it("echoes since as next_cursor on an empty page, and null when none was given", async () => {
    const ch = await createChannel(url(), owner);
    expect((await listMessages(url(), owner, ch)).next_cursor).toBeNull();
    expect((await listMessages(url(), owner, ch, "?since=0")).next_cursor).toBe("0");
    const cursor = "2026-01-01T00:00:00.000001Z";
    expect((await listMessages(url(), owner, ch, `?since=${cursor}`)).next_cursor).toBe(cursor);
  });

  it("accepts cursors with any RFC 3339 offset", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "x" });
    const earlier = new Date(Date.parse(m.created_at) - 3_600_000).toISOString().replace("Z", "+00:00");
    expect((await listMessages(url(), owner, ch, `?since=${encodeURIComponent(earlier)}`)).data).toHaveLength(1);
  });

  for (const [query, code] of [
    ["?limit=0", "invalid_limit"],
    ["?limit=101", "invalid_limit"],
    ["?limit=abc", "invalid_limit"],
    ["?since=yesterday", "invalid_since"],
    ["?cursor=nope", "invalid_cursor"],
    ["?status=done", "invalid_status"],
  ] as const) {
    it(`answers 422 ${code} for ${query}`, async () => {
      const ch = await createChannel(url(), owner);
      const res = await rest(url(), "GET", `/v1/channels/${ch}/messages${query}`, { key: owner });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: code });
    });
  }

  it("filters by status=unclaimed and status=claimed", async () => {
    const ch = await createChannel(url(), owner);
    const a = await postMessage(url(), owner, ch, { content: "a" });
    await postMessage(url(), owner, ch, { content: "b" });
    await rest(url(), "POST", `/v1/messages/${a.id}/claim`, { key: owner });
    expect((await listMessages(url(), owner, ch, "?status=unclaimed")).data.map((m) => m.content)).toEqual(["b"]);
    expect((await listMessages(url(), owner, ch, "?status=claimed")).data.map((m) => m.content)).toEqual(["a"]);
  });

  it("never returns expired messages", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    await postMessage(url(), owner, ch, { content: "short-lived" });
    clock.advanceSeconds(301);
    try {
      expect((await listMessages(url(), owner, ch, "?since=0")).data).toEqual([]);
    } finally {
      clock.advanceSeconds(-301);
    }
  });
});

describe("claim and ack (claims, acks)", () => {
  it("lets the first claim win and tells the winner it already holds the message", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    const won = await rest<{ status: string; message: MessageJson }>(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    expect(won.status).toBe(200);
    expect(won.body.status).toBe("claimed");
    expect(won.body.message.claimed_by).toEqual({ id: expect.any(String), name: "other" });
    expect(won.body.message.claimed_by_key_id).toBe(other.split(".")[0]);
    expect(won.body.message.claimed_at).toMatch(TIMESTAMP_6);
    const again = await rest<{ status: string }>(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    expect(again.body.status).toBe("already_claimed");
    const lost = await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner });
    expect(lost.status).toBe(409);
    expect(lost.body).toMatchObject({ error: "already_claimed" });
    expect(lost.body.suggestion).toEqual(expect.any(String));
  });

  it("treats the same key claiming as another actor as a different claimer (409)", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other, body: { actor: "worker-a" } });
    const res = await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other, body: { actor: "worker-b" } });
    expect(res.status).toBe(409);
  });

  it("refuses claims on broadcast channels with 409 channel_not_claimable", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const m = await postMessage(url(), owner, ch, { content: "news" });
    const res = await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "channel_not_claimable" });
  });

  it("answers 404 message_not_found for an unknown or malformed id", async () => {
    for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      const res = await rest(url(), "POST", `/v1/messages/${id}/claim`, { key: other });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: "message_not_found" });
    }
  });

  it("answers 410 message_expired for claims and acks of expired messages", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    const m = await postMessage(url(), owner, ch, { content: "stale" });
    clock.advanceSeconds(301);
    try {
      expect((await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other })).status).toBe(410);
      expect((await rest(url(), "POST", `/v1/messages/${m.id}/ack`, { key: other })).body).toMatchObject({ error: "message_expired" });
    } finally {
      clock.advanceSeconds(-301);
    }
  });

  it("records one acknowledgement per actor", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const m = await postMessage(url(), owner, ch, { content: "fyi" });
    const first = await rest<{ status: string; message: MessageJson }>(url(), "POST", `/v1/messages/${m.id}/ack`, { key: other });
    expect(first.status).toBe(200);
    expect(first.body.status).toBe("acknowledged");
    expect(first.body.message.acknowledged_by).toEqual([{ id: expect.any(String), name: "other", occurred_at: expect.stringMatching(TIMESTAMP_6), metadata: {} }]);
    const second = await rest<{ status: string; message: MessageJson }>(url(), "POST", `/v1/messages/${m.id}/ack`, { key: other });
    expect(second.body.status).toBe("already_acknowledged");
    expect(second.body.message.acknowledged_by).toHaveLength(1);
    await rest(url(), "POST", `/v1/messages/${m.id}/ack`, { key: owner });
    const page = await listMessages(url(), owner, ch);
    expect(page.data[0]!.acknowledged_by.map((a) => a.name)).toEqual(["other", "owner"]);
  });

  it("answers already_acknowledged to the claimer once the message is acked", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    await rest(url(), "POST", `/v1/messages/${m.id}/ack`, { key: other });
    const res = await rest<{ status: string }>(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    expect(res.body.status).toBe("already_acknowledged");
  });
});

describe("leases, release and retract (leases-and-retract)", () => {
  it("issues a lease that heartbeats extend", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    const lease = await rest<{ lease_token: string; expires_at: string; message: MessageJson }>(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, {
      key: other,
      body: { lease_seconds: 60 },
    });
    expect(lease.status).toBe(200);
    expect(lease.body.lease_token).toEqual(expect.any(String));
    expect(lease.body.message.claimed_by_key_id).toBe(other.split(".")[0]);
    const beat = await rest<{ lease_token: string; expires_at: string }>(url(), "POST", `/v1/leases/${lease.body.lease_token}/heartbeat`, {
      key: other,
      body: { lease_seconds: 600 },
    });
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.body.expires_at)).toBeGreaterThan(Date.parse(lease.body.expires_at));
  });

  it("refuses a heartbeat from another key with 403", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    const lease = await rest<{ lease_token: string }>(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, { key: other });
    const res = await rest(url(), "POST", `/v1/leases/${lease.body.lease_token}/heartbeat`, { key: owner });
    expect(res.status).toBe(403);
  });

  it("makes a message claimable again when its lease runs out un-acked, and the old lease is gone (410)", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    const lease = await rest<{ lease_token: string }>(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, { key: other, body: { lease_seconds: 30 } });
    expect((await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner })).status).toBe(409);
    clock.advanceSeconds(31);
    try {
      expect((await listMessages(url(), owner, ch, "?status=unclaimed")).data.map((x) => x.id)).toEqual([m.id]);
      const taken = await rest<{ status: string }>(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner });
      expect(taken.body.status).toBe("claimed");
      const beat = await rest(url(), "POST", `/v1/leases/${lease.body.lease_token}/heartbeat`, { key: other });
      expect(beat.status).toBe(410);
      expect(beat.body).toMatchObject({ error: "lease_expired" });
    } finally {
      clock.advanceSeconds(-31);
    }
  });

  it("keeps an acked message claimed after its lease runs out", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    await rest(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, { key: other, body: { lease_seconds: 30 } });
    await rest(url(), "POST", `/v1/messages/${m.id}/ack`, { key: other });
    clock.advanceSeconds(31);
    try {
      expect((await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner })).status).toBe(409);
    } finally {
      clock.advanceSeconds(-31);
    }
  });

  it("answers 422 invalid_lease_seconds outside 30..3600", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    const res = await rest(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, { key: other, body: { lease_seconds: 5 } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_lease_seconds" });
  });

  it("lets the holder release a claim, making the message claimable again", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    expect((await rest(url(), "POST", `/v1/messages/${m.id}/release`, { key: owner })).status).toBe(403);
    const released = await rest<{ status: string; message: MessageJson }>(url(), "POST", `/v1/messages/${m.id}/release`, { key: other });
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ status: "released", message: { claimed_by: null, claimed_by_key_id: null } });
    const again = await rest(url(), "POST", `/v1/messages/${m.id}/release`, { key: other });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: "not_claimed" });
    expect((await rest<{ status: string }>(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner })).body.status).toBe("claimed");
  });

  it("lets the author retract an unclaimed message into history", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), other, ch, { content: "oops" });
    expect((await rest(url(), "DELETE", `/v1/messages/${m.id}`, { key: await mintKey(url()) })).status).toBe(403);
    const res = await rest(url(), "DELETE", `/v1/messages/${m.id}`, { key: other });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "retracted" });
    expect((await listMessages(url(), owner, ch)).data).toEqual([]);
    const { rows } = await server.app.pool.query("SELECT reason FROM message_history WHERE id = $1", [m.id]);
    expect(rows).toEqual([{ reason: "retracted" }]);
  });

  it("refuses to retract a claimed message with 409 message_claimed", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "task" });
    await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: other });
    const res = await rest(url(), "DELETE", `/v1/messages/${m.id}`, { key: owner });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "message_claimed" });
  });
});
