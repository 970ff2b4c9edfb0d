/**
 * Queue state (docs/decisions.md#queue-stats): GET /v1/channels/{identifier}/stats
 * counts a channel's live messages by state — ready, delayed, in flight,
 * acknowledged, dead-lettered — with the age of the oldest ready one and the
 * median claim-to-ack time, over REST and gRPC; and /metrics counts
 * receives, redeliveries and dead letters across channels.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

interface Stats {
  ready: number;
  delayed: number;
  in_flight: number;
  acknowledged: number;
  dead_lettered: number;
  blocked: number;
  waiting: number;
  cancelled: number;
  expired: number;
  oldest_ready_age_seconds: number | null;
  claim_to_ack_p50_ms: number | null;
  groups: { count: number; in_flight: number; top: unknown[] } | null;
  ready_by_priority: Record<string, number>;
}

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const url = () => server.url;
let owner: string;
let worker: string;
let stranger: string;
beforeAll(async () => {
  owner = await mintKey(url(), "stats-owner");
  worker = await mintKey(url(), "stats-worker");
  stranger = await mintKey(url(), "stats-stranger");
});
// PostgreSQL stamps created_at in real time; each test starts from it.
afterEach(() => clock.reset());

const stats = async (ch: string, key = worker) => {
  const res = await rest<Stats>(url(), "GET", `/v1/channels/${ch}/stats`, { key });
  expect(res.status).toBe(200);
  return res.body;
};
const receive = async (ch: string, body: Record<string, unknown> = {}) => {
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body });
  expect(res.status).toBe(200);
  return res.body.data;
};
const post = (ch: string, body: Record<string, unknown> = {}) => postMessage(url(), owner, ch, { content: "task", ...body });
const ack = (id: string) => rest(url(), "POST", `/v1/messages/${id}/ack`, { key: worker, body: {} });
const counts = ({ oldest_ready_age_seconds: _age, claim_to_ack_p50_ms: _p50, groups: _groups, ready_by_priority: _byPriority, ...states }: Stats) => states;
const empty = { ready: 0, delayed: 0, blocked: 0, waiting: 0, in_flight: 0, acknowledged: 0, dead_lettered: 0, cancelled: 0, expired: 0 };

describe("GET /v1/channels/{identifier}/stats", () => {
  it("reports an empty queue as zeros with no age and no median", async () => {
    const ch = await createChannel(url(), owner);
    expect(await stats(ch)).toEqual({
      ...empty,
      oldest_ready_age_seconds: null,
      claim_to_ack_p50_ms: null,
      groups: { count: 0, in_flight: 0, top: [] },
      ready_by_priority: { "1": 0, "2": 0, "3": 0, "4": 0, "5": 0 },
    });
  });

  it("counts each live message in its one state", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, { content: "ready" });
    await post(ch, { content: "later", delay_seconds: 600 });
    await post(ch, { content: "held" });
    await post(ch, { content: "done" });
    const [held, done] = await receive(ch, { max_messages: 2 });
    expect(held!.message.content).toBe("ready");
    expect((await ack(done!.message.id)).status).toBe(200);
    expect(counts(await stats(ch))).toEqual({ ...empty, ready: 1, delayed: 1, in_flight: 1, acknowledged: 1 });
  });

  it("counts a delayed message as ready once its available_at passes", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, { delay_seconds: 60 });
    expect(counts(await stats(ch))).toEqual({ ...empty, delayed: 1 });
    clock.advanceSeconds(61);
    const now = await stats(ch);
    expect(counts(now)).toEqual({ ...empty, ready: 1 });
    // Aged from its available_at, not from its created_at.
    expect(now.oldest_ready_age_seconds).toBeGreaterThanOrEqual(1);
    expect(now.oldest_ready_age_seconds).toBeLessThan(30);
  });

  it("counts a message whose lease lapsed unacknowledged as ready again", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch);
    await receive(ch, { lease_seconds: 30 });
    expect(counts(await stats(ch))).toEqual({ ...empty, in_flight: 1 });
    clock.advanceSeconds(31);
    expect(counts(await stats(ch))).toEqual({ ...empty, ready: 1 });
  });

  it("ages the oldest ready message from when it was posted", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, { content: "old" });
    clock.advanceSeconds(90);
    const now = await stats(ch);
    expect(now.oldest_ready_age_seconds).toBeGreaterThanOrEqual(90);
    expect(now.oldest_ready_age_seconds).toBeLessThan(120);
  });

  it("reports the median claim-to-ack time of the acknowledged messages", async () => {
    const ch = await createChannel(url(), owner);
    for (const _ of [1, 2, 3]) await post(ch);
    // Received together, acknowledged 10 s, 20 s and 60 s after the claim.
    const leases = await receive(ch, { max_messages: 3 });
    for (const [lease, after] of leases.map((l, i) => [l, [10, 10, 40][i]!] as const)) {
      clock.advanceSeconds(after);
      expect((await ack(lease.message.id)).status).toBe(200);
    }
    const now = await stats(ch);
    expect(now.acknowledged).toBe(3);
    expect(now.claim_to_ack_p50_ms).toBeGreaterThanOrEqual(20_000);
    expect(now.claim_to_ack_p50_ms).toBeLessThan(21_000);
  });

  it("counts messages delivered max_deliveries times as dead-lettered, moved or not", async () => {
    const dlq = await createChannel(url(), owner);
    const ch = await createChannel(url(), owner, { max_deliveries: 1, dead_letter_channel: dlq });
    await post(ch, { content: "first" });
    await post(ch, { content: "second" });
    const leases = await receive(ch, { max_messages: 2 });
    for (const lease of leases) expect((await rest(url(), "POST", `/v1/messages/${lease.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    // Released at the limit: never delivered again, not moved until the next receive.
    expect(counts(await stats(ch))).toEqual({ ...empty, dead_lettered: 2 });
    expect(await receive(ch)).toEqual([]);
    // Moved: the origin still counts them (from its history); the dead-letter channel holds them as ready work.
    expect(counts(await stats(ch))).toEqual({ ...empty, dead_lettered: 2 });
    expect(counts(await stats(dlq, owner))).toEqual({ ...empty, ready: 2 });
  });

  it("shows on each message the state the stats count it in", async () => {
    const ch = await createChannel(url(), owner, { max_deliveries: 1 });
    const byContent = new Map<string, string>();
    for (const [content, extra] of [["held", {}], ["dead", {}], ["done", {}], ["ready", {}], ["later", { delay_seconds: 600 }], ["gone", { ttl_seconds: 1 }]] as const) {
      byContent.set(content, (await post(ch, { content, ...extra })).id);
    }
    const leases = await receive(ch, { max_messages: 3, lease_seconds: 300 });
    expect(leases.map((l) => l.message.content)).toEqual(["held", "dead", "done"]);
    expect(leases.map((l) => l.message.state)).toEqual(["in_flight", "in_flight", "in_flight"]);
    expect((await rest(url(), "POST", `/v1/messages/${byContent.get("dead")}/release`, { key: worker, body: {} })).status).toBe(200);
    expect((await ack(byContent.get("done")!)).status).toBe(200);
    clock.advanceSeconds(2);
    const states: Record<string, string> = {};
    for (const [content, id] of byContent) {
      const res = await rest<{ state: string }>(url(), "GET", `/v1/messages/${id}`, { key: owner });
      expect(res.status).toBe(200);
      states[content] = res.body.state;
    }
    expect(states).toEqual({ held: "in_flight", dead: "dead_lettered", done: "acknowledged", ready: "ready", later: "delayed", gone: "expired" });
    expect(counts(await stats(ch))).toEqual({ ...empty, ready: 1, delayed: 1, in_flight: 1, acknowledged: 1, dead_lettered: 1, expired: 1 });
  });

  it("answers a wait for a message's outcome at once when it is dead-lettered, not when the wait runs out", async () => {
    const ch = await createChannel(url(), owner, { max_deliveries: 1 });
    const m = await post(ch, { content: "fails" });
    const [lease] = await receive(ch);
    expect((await rest(url(), "POST", `/v1/messages/${lease!.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    const started = Date.now();
    const res = await rest<{ state: string }>(url(), "GET", `/v1/messages/${m.id}?wait=20`, { key: owner });
    expect(res.body.state).toBe("dead_lettered");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("shows a message moved to the dead-letter channel as dead_lettered where it came from", async () => {
    const dlq = await createChannel(url(), owner);
    const ch = await createChannel(url(), owner, { max_deliveries: 1, dead_letter_channel: dlq });
    const m = await post(ch, { content: "fails" });
    const [lease] = await receive(ch);
    expect((await rest(url(), "POST", `/v1/messages/${lease!.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    expect(await receive(ch)).toEqual([]);
    const res = await rest<{ state: string; active: boolean }>(url(), "GET", `/v1/messages/${m.id}`, { key: owner });
    expect(res.body).toMatchObject({ state: "dead_lettered", active: false });
    const [moved] = await receive(dlq);
    expect(moved!.message.state).toBe("in_flight");
  });

  it("counts a broadcast channel's due messages as ready and acknowledged ones apart", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    await post(ch);
    const read = await post(ch);
    expect((await ack(read.id)).status).toBe(200);
    expect(counts(await stats(ch))).toEqual({ ...empty, ready: 1, acknowledged: 1 });
  });

  it("resolves the channel by alias and by its owner's name", async () => {
    const name = `stats by name ${Date.now()}`;
    const alias = `stats-${Date.now()}`;
    const ch = await createChannel(url(), owner, { name });
    expect((await rest(url(), "POST", `/v1/channels/${ch}/aliases`, { key: owner, body: { alias } })).status).toBe(201);
    await post(ch);
    expect((await stats(alias, owner)).ready).toBe(1);
    expect((await stats(encodeURIComponent(name), owner)).ready).toBe(1);
  });

  it("refuses a key that cannot read a restricted channel, and an unknown channel", async () => {
    const ch = await createChannel(url(), owner, { access: "restricted" });
    const denied = await rest(url(), "GET", `/v1/channels/${ch}/stats`, { key: stranger });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: "channel_access_denied" });
    const missing = await rest(url(), "GET", "/v1/channels/00000000-0000-4000-8000-000000000000/stats", { key: worker });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: "channel_not_found" });
  });

  it("answers the same over gRPC, with unset fields for no age and no median", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const got = await client.getChannelStats({ identifier: ch }, { headers: { "x-api-key": worker } });
    expect(got).toMatchObject({ ready: 1, delayed: 0, inFlight: 0, acknowledged: 0, deadLettered: 0 });
    expect(got.claimToAckP50Ms).toBeUndefined();
    expect(got.oldestReadyAgeSeconds).toBeGreaterThanOrEqual(0);
    const err = await client.getChannelStats({ identifier: ch }, { headers: { "x-api-key": "ab_live_nope" } }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

describe("/metrics queue counters", () => {
  const scrape = async () => {
    const text = await (await fetch(`${url()}/metrics`)).text();
    const value = (name: string) => Number(/^(\S+) (\S+)$/m.exec(text.split("\n").find((l) => l.startsWith(`${name} `)) ?? "")?.[2] ?? NaN);
    return {
      text,
      received: value("agentbus_messages_received_total"),
      redelivered: value("agentbus_messages_redelivered_total"),
      deadLettered: value("agentbus_messages_dead_lettered_total"),
    };
  };

  it("counts receives, redeliveries and dead letters without a channel label", async () => {
    const ch = await createChannel(url(), owner, { max_deliveries: 2 });
    await post(ch);
    const before = await scrape();
    const [first] = await receive(ch);
    expect((await rest(url(), "POST", `/v1/messages/${first!.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    const [second] = await receive(ch);
    expect(second!.message.delivery_count).toBe(2);
    expect((await rest(url(), "POST", `/v1/messages/${second!.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    expect(await receive(ch)).toEqual([]);
    const after = await scrape();
    expect(after.received - before.received).toBe(2);
    expect(after.redelivered - before.redelivered).toBe(1);
    expect(after.deadLettered - before.deadLettered).toBe(1);
    expect(after.text).not.toMatch(/agentbus_messages_\w+_total\{/);
  });
});
