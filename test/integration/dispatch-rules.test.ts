/**
 * Groups, priorities, fair dispatch, aging and per-message expiry as the
 * contract states them (docs/decisions.md#message-groups, #priorities,
 * #dispatch): the fields round-trip, bad values get their catalog codes, and
 * receives hand out work in the order the rules give. The concurrent proofs
 * (two processes, many receivers) are dispatch-proof.test.ts.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ChannelDispatch, ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { SteppingClock } from "../support/clock.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new SteppingClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
let owner: string;
beforeAll(async () => {
  owner = await mintKey(url(), "dispatch-owner");
});
afterEach(() => clock.reset());

const receive = (ch: string, body: Record<string, unknown> = {}) =>
  rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: owner, body: { lease_seconds: 60, ...body } });
const contents = (res: { body: { data: ReceivedJson[] } }) => res.body.data.map((r) => r.message.content);
const ack = (r: ReceivedJson) => rest(url(), "POST", `/v1/messages/${r.message.id}/ack`, { key: owner, body: {} });
const post = (ch: string, content: string, extra: Record<string, unknown> = {}) => postMessage(url(), owner, ch, { content, ...extra });

describe("message fields", () => {
  it("shows group_key null and priority 3 when the poster sets neither", async () => {
    const ch = await createChannel(url(), owner);
    const m = await post(ch, "plain");
    expect(m).toMatchObject({ group_key: null, priority: 3, limits: [] });
  });

  it("keeps the group_key and priority the poster set", async () => {
    const ch = await createChannel(url(), owner);
    const m = await post(ch, "grouped", { group_key: "repo-1", priority: 1 });
    expect(m).toMatchObject({ group_key: "repo-1", priority: 1 });
  });

  it("expires a message with its own ttl_seconds sooner than the channel's", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 3600 });
    const m = await post(ch, "short", { ttl_seconds: 60 });
    expect((Date.parse(m.expires_at) - Date.parse(m.created_at)) / 1000).toBe(60);
  });

  it.each([
    [{ group_key: "" }, "invalid_group_key"],
    [{ group_key: "x".repeat(129) }, "invalid_group_key"],
    [{ priority: 0 }, "invalid_priority"],
    [{ priority: 6 }, "invalid_priority"],
    [{ priority: 2.5 }, "invalid_priority"],
    [{ ttl_seconds: 0 }, "invalid_ttl_seconds"],
    [{ ttl_seconds: 86401 }, "invalid_ttl_seconds"],
    [{ limits: ["nope"] }, "unknown_limit"],
  ])("refuses %j with 422 %s", async (extra, code) => {
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "x", ...extra } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: code });
  });

  it("refuses a bad item of a batch with its code and index", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, { key: owner, body: { messages: [{ content: "a" }, { content: "b", priority: 9 }] } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_priority" });
  });
});

describe("channel settings", () => {
  it("round-trips group_concurrency, dispatch and priority_aging_seconds", async () => {
    const res = await rest<Record<string, unknown>>(url(), "POST", "/v1/channels", {
      key: owner,
      body: { name: "settings", mode: "claimable", group_concurrency: 2, dispatch: "fair", priority_aging_seconds: 30 },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ group_concurrency: 2, dispatch: "fair", priority_aging_seconds: 30, limits: [] });
  });

  it("defaults to fifo with no group bound and no aging", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}`, { key: owner });
    expect(res.body).toMatchObject({ group_concurrency: null, dispatch: "fifo", priority_aging_seconds: null });
  });

  it("changes and clears the settings with PATCH", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    const set = await rest<Record<string, unknown>>(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { dispatch: "fair", priority_aging_seconds: 5 } });
    expect(set.body).toMatchObject({ group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 5 });
    const cleared = await rest<Record<string, unknown>>(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { group_concurrency: null, priority_aging_seconds: null } });
    expect(cleared.body).toMatchObject({ group_concurrency: null, priority_aging_seconds: null });
  });

  it.each([
    [{ group_concurrency: 0 }, "invalid_group_concurrency"],
    [{ group_concurrency: 1001 }, "invalid_group_concurrency"],
    [{ priority_aging_seconds: 0 }, "invalid_priority_aging_seconds"],
    [{ priority_aging_seconds: 86401 }, "invalid_priority_aging_seconds"],
    [{ limits: ["missing"] }, "unknown_limit"],
  ])("refuses %j with 422 %s", async (extra, code) => {
    const res = await rest(url(), "POST", "/v1/channels", { key: owner, body: { name: "bad", mode: "claimable", ...extra } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: code });
  });
});

describe("delivery order", () => {
  it("delivers the most urgent priority first, oldest first within a priority", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, "p3-a");
    await post(ch, "p5", { priority: 5 });
    await post(ch, "p1", { priority: 1 });
    await post(ch, "p3-b");
    expect(contents(await receive(ch, { max_messages: 4 }))).toEqual(["p1", "p3-a", "p3-b", "p5"]);
  });

  it("lets a release change the priority", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, "first");
    await post(ch, "second");
    const [got] = (await receive(ch)).body.data;
    const released = await rest(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: owner, body: { priority: 5 } });
    expect(released.status).toBe(200);
    expect(contents(await receive(ch, { max_messages: 2 }))).toEqual(["second", "first"]);
  });

  it("with group_concurrency 1 delivers a group's next message only after the previous one is finished", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    await post(ch, "a1", { group_key: "a" });
    await post(ch, "a2", { group_key: "a" });
    await post(ch, "b1", { group_key: "b" });
    const first = await receive(ch, { max_messages: 10 });
    expect(contents(first)).toEqual(["a1", "b1"]);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual([]);
    await ack(first.body.data[0]!);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["a2"]);
  });

  it("with group_concurrency 1 delivers a released message again before the later ones of its group", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    await post(ch, "a1", { group_key: "a" });
    await post(ch, "a2", { group_key: "a" });
    const [got] = (await receive(ch)).body.data;
    await rest(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: owner, body: {} });
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["a1"]);
  });

  it("with group_concurrency 2 has at most two of a group in flight", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 2 });
    for (let i = 1; i <= 4; i++) await post(ch, `a${i}`, { group_key: "a" });
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["a1", "a2"]);
  });

  it("with dispatch fair takes groups in turn, the least recently served first", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair" });
    for (let i = 1; i <= 3; i++) await post(ch, `big${i}`, { group_key: "big" });
    await post(ch, "small1", { group_key: "small" });
    await post(ch, "loose1");
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      const got = await receive(ch);
      order.push(...contents(got));
      await ack(got.body.data[0]!);
    }
    expect(order.slice(0, 3).sort()).toEqual(["big1", "loose1", "small1"]);
    expect(order.slice(3)).toEqual(["big2", "big3"]);
  });

  // PostgreSQL stamps created_at in real time, so "posted 25 s ago" is
  // written into the row rather than waited for.
  const postedAgo = (id: string, seconds: number) =>
    sql.query("UPDATE messages SET created_at = created_at - make_interval(secs => $2) WHERE id = $1", [id, seconds]);

  it.each([
    ["fair, messages without a group", { dispatch: "fair" }, undefined],
    ["fair, one group", { dispatch: "fair" }, "one"],
    ["group_concurrency 1000, one group", { group_concurrency: 1000 }, "one"],
    ["fair with group_concurrency 1, messages without a group", { dispatch: "fair", group_concurrency: 1 }, undefined],
  ])("hands a receive all it asks for from one busy group (%s)", async (_name, settings, group) => {
    const ch = await createChannel(url(), owner, settings);
    const drafts = Array.from({ length: 100 }, (_, i) => ({ content: `m${i}`, ...(group === undefined ? {} : { group_key: group }) }));
    for (let i = 0; i < drafts.length; i += 50) {
      expect((await rest(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, { key: owner, body: { messages: drafts.slice(i, i + 50) } })).status).toBe(201);
    }
    expect((await receive(ch, { max_messages: 100 })).body.data).toHaveLength(100);
  });

  it("with aging counts a waiting message one level more urgent per interval waited", async () => {
    const ch = await createChannel(url(), owner, { priority_aging_seconds: 10 });
    const old = await post(ch, "old-p5", { priority: 5 });
    await post(ch, "new-p3", { priority: 3 });
    await postedAgo(old.id, 25);
    expect(contents(await receive(ch))).toEqual(["old-p5"]);
  });

  it("without aging keeps a long-waiting priority-5 message behind newer priority-3 ones", async () => {
    const ch = await createChannel(url(), owner);
    const old = await post(ch, "old-p5", { priority: 5 });
    await post(ch, "new-p3", { priority: 3 });
    await postedAgo(old.id, 25);
    expect(contents(await receive(ch))).toEqual(["new-p3"]);
  });
});

describe("stats", () => {
  it("counts ready messages by priority, every level present", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, "a", { priority: 1 });
    await post(ch, "b", { priority: 1 });
    await post(ch, "c", { priority: 5 });
    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(res.body.ready_by_priority).toEqual({ "1": 2, "2": 0, "3": 0, "4": 0, "5": 1 });
  });

  it("lists the groups with the most ready messages first, with what each has in flight", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    for (const [group, n] of [["small", 1], ["big", 3], ["mid", 2]] as const) {
      for (let i = 0; i < n; i++) await post(ch, `${group}${i}`, { group_key: group });
    }
    await receive(ch, { max_messages: 10 });
    const res = await rest<{ groups: { count: number; in_flight: number; top: Array<Record<string, unknown>> } }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(res.body.groups.count).toBe(3);
    expect(res.body.groups.in_flight).toBe(3);
    expect(res.body.groups.top.map((g) => [g.group_key, g.ready, g.in_flight])).toEqual([
      ["big", 2, 1],
      ["mid", 1, 1],
      ["small", 0, 1],
    ]);
    expect(res.body.groups.top[0]!.oldest_ready_age_seconds).toBeGreaterThanOrEqual(0);
  });

  it("shows no groups for a broadcast channel", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(res.body.groups).toBeNull();
  });
});

describe("dead letters", () => {
  it("keep their group and priority in the dead-letter channel and when redriven", async () => {
    const dlq = await createChannel(url(), owner);
    const ch = await createChannel(url(), owner, { max_deliveries: 1, dead_letter_channel: dlq });
    await post(ch, "poison", { group_key: "g", priority: 2 });
    const [got] = (await receive(ch)).body.data;
    await rest(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: owner, body: {} });
    expect((await receive(ch)).body.data).toEqual([]);
    const dead = (await receive(dlq)).body.data[0]!.message;
    expect(dead).toMatchObject({ content: "poison", group_key: "g", priority: 2 });
    await rest(url(), "POST", `/v1/messages/${dead.id}/release`, { key: owner, body: {} });
    expect((await rest(url(), "POST", `/v1/channels/${dlq}/dead-letters:redrive`, { key: owner, body: {} })).status).toBe(200);
    expect((await receive(ch)).body.data[0]!.message).toMatchObject({ content: "poison", group_key: "g", priority: 2 });
  });
});

describe("limits", () => {
  // The pick and the lease are two statements: as one, the lease's snapshot
  // predated the pick's and missed a message posted meanwhile, whose
  // delivery the pick had already counted (then counted again on the next try).
  it("counts one delivery per leased message when the post races a waiting receive", async () => {
    const key = await mintKey(url(), "race-limits");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "model", rate: { count: 1000, per_seconds: 3600 } } })).status).toBe(201);
    let leased = 0;
    for (let i = 0; i < 20; i++) {
      const ch = await createChannel(url(), key, { limits: ["model"] });
      const waiting = rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { wait: 2 } });
      await postMessage(url(), key, ch, { content: `race ${i}` });
      leased += (await waiting).body.data.length;
    }
    const limit = await rest<{ used_in_window: number; in_flight: number }>(url(), "GET", "/v1/limits/model", { key });
    expect(limit.body).toMatchObject({ used_in_window: leased, in_flight: leased });
  });
});

describe("limits that are full", () => {
  it("let a receive waiting on another channel take the unit freed there, within a second of the service clock", async () => {
    const key = await mintKey(url(), "shared-wait");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "seat", max_in_flight: 1 } })).status).toBe(201);
    const a = await createChannel(url(), key, { limits: ["seat"] });
    const b = await createChannel(url(), key, { limits: ["seat"] });
    await postMessage(url(), key, a, { content: "first" });
    const held = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${a}/messages:receive`, { key, body: { lease_seconds: 60 } });
    expect(contents(held)).toEqual(["first"]);
    await postMessage(url(), key, b, { content: "second" });
    const waiting = rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${b}/messages:receive`, { key, body: { wait: 60, lease_seconds: 60 } });
    // The wait has begun (its first read found the seat taken) before the seat is freed on channel a, which announces it on a only.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await rest(url(), "POST", `/v1/messages/${held.body.data[0]!.message.id}/ack`, { key, body: {} })).status).toBe(200);
    clock.advanceSeconds(1);
    const answered = await Promise.race([waiting, new Promise<"still waiting">((resolve) => setTimeout(() => resolve("still waiting"), 10_000))]);
    expect(answered === "still waiting" ? answered : contents(answered)).toEqual(["second"]);
  });

  it("refuse a heartbeat, even from a clock running behind, on a lapsed lease whose unit a receive has given to another message", async () => {
    const key = await mintKey(url(), "late-beat");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "seat", max_in_flight: 1 } })).status).toBe(201);
    const a = await createChannel(url(), key, { limits: ["seat"] });
    const b = await createChannel(url(), key, { limits: ["seat"] });
    await postMessage(url(), key, a, { content: "first" });
    await postMessage(url(), key, b, { content: "second" });
    const held = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${a}/messages:receive`, { key, body: { lease_seconds: 60 } });
    expect(contents(held)).toEqual(["first"]);
    clock.advanceSeconds(61);
    const next = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${b}/messages:receive`, { key, body: { lease_seconds: 60 } });
    expect(contents(next)).toEqual(["second"]);
    // Another process, whose clock is a minute behind: by it the first lease still runs.
    clock.advanceSeconds(-60);
    const beat = await rest(url(), "POST", `/v1/leases/${held.body.data[0]!.lease_token}/heartbeat`, { key, body: { lease_seconds: 300 } });
    expect(beat.status, JSON.stringify(beat.body)).toBe(410);
    expect(beat.body.error).toBe("lease_expired");
    // Back on the receive's clock: one message holds the seat, not two.
    clock.advanceSeconds(60);
    expect((await rest<{ in_flight: number }>(url(), "GET", "/v1/limits/seat", { key })).body.in_flight).toBe(1);
  });

  it("extend a lease holding a limit while no receive has counted it out", async () => {
    const key = await mintKey(url(), "live-beat");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "seat", max_in_flight: 1 } })).status).toBe(201);
    const a = await createChannel(url(), key, { limits: ["seat"] });
    await postMessage(url(), key, a, { content: "first" });
    await postMessage(url(), key, a, { content: "second" });
    const held = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${a}/messages:receive`, { key, body: { lease_seconds: 60 } });
    clock.advanceSeconds(30);
    // A receive that finds the seat taken counts the lease in, not out.
    expect(contents(await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${a}/messages:receive`, { key, body: {} }))).toEqual([]);
    const beat = await rest(url(), "POST", `/v1/leases/${held.body.data[0]!.lease_token}/heartbeat`, { key, body: { lease_seconds: 60 } });
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
  });

  it("do not hold back the messages behind many that wait for them", async () => {
    const key = await mintKey(url(), "full-limits");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "gpu", max_in_flight: 1 } })).status).toBe(201);
    const ch = await createChannel(url(), key);
    await postMessage(url(), key, ch, { content: "holder", limits: ["gpu"] });
    const drafts = Array.from({ length: 40 }, (_, i) => ({ content: `waits ${i}`, limits: ["gpu"] }));
    expect((await rest(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, { key, body: { messages: [...drafts, { content: "free" }] } })).status).toBe(201);
    const first = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect(contents(first)).toEqual(["holder"]);
    const next = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect(contents(next)).toEqual(["free"]);
  });

  it("are kept by a receive whose channel view predates the post that made it limited", async () => {
    const key = await mintKey(url(), "stale-view");
    expect((await rest(url(), "POST", "/v1/limits", { key, body: { name: "one", max_in_flight: 1 } })).status).toBe(201);
    const ch = await createChannel(url(), key);
    // A receive first caches the plain channel's view.
    await rest(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    await postMessage(url(), key, ch, { content: "a", limits: ["one"] });
    await postMessage(url(), key, ch, { content: "b", limits: ["one"] });
    const got = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 10 } });
    expect(contents(got)).toEqual(["a"]);
    expect((await rest<{ in_flight: number }>(url(), "GET", "/v1/limits/one", { key })).body.in_flight).toBe(1);
  });
});

describe("claim-next of the compatibility verbs", () => {
  const claimNext = (ch: string, body: Record<string, unknown> = {}) =>
    rest<{ claimed: { content: string; claimed_by_key_id: string; lease_expires_at: string | null } | null }>(url(), "POST", "/v1/tasks/claim", { key: owner, body: { channel: ch, ...body } });

  it("claims the most urgent open message, without a lease", async () => {
    const ch = await createChannel(url(), owner);
    await post(ch, "routine");
    await post(ch, "urgent", { priority: 1 });
    const res = await claimNext(ch);
    expect(res.body.claimed).toMatchObject({ content: "urgent", lease_expires_at: null });
  });

  it("keeps a group's order and bound in a channel with group_concurrency 1", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    await post(ch, "a1", { group_key: "a" });
    await post(ch, "a2", { group_key: "a" });
    expect((await claimNext(ch)).body.claimed?.content).toBe("a1");
    expect((await claimNext(ch)).body.claimed).toBeNull();
  });
});

describe("over gRPC", () => {
  const transport = () => createGrpcTransport({ baseUrl: url() });
  const headers = () => ({ "x-api-key": owner });
  const refusal = async (call: Promise<unknown>) => {
    const err = ConnectError.from(await call.then(() => new Error("no error"), (e: unknown) => e));
    return { code: err.code, error: err.findDetails(ErrorDetailSchema)[0]?.error };
  };

  it("creates a fair channel and posts with a group and a priority", async () => {
    const channels = createClient(ChannelService, transport());
    const ch = await channels.createChannel({ name: "grpc-fair", mode: ChannelMode.CLAIMABLE, dispatch: ChannelDispatch.FAIR, groupConcurrency: 3 }, { headers: headers() });
    expect(ch.dispatch).toBe(ChannelDispatch.FAIR);
    expect(ch.groupConcurrency).toBe(3);
    const { message } = await createClient(MessageService, transport()).createMessage({ identifier: ch.id, content: "x", groupKey: "g", priority: 2 }, { headers: headers() });
    expect(message).toMatchObject({ groupKey: "g", priority: 2 });
  });

  it.each([
    [{ priority: 9 }, "invalid_priority"],
    [{ groupKey: "" }, "invalid_group_key"],
    [{ ttlSeconds: 0 }, "invalid_ttl_seconds"],
    [{ limits: ["nope"] }, "unknown_limit"],
  ])("answers InvalidArgument with %j's catalog code %s", async (extra, code) => {
    const ch = await createChannel(url(), owner);
    const got = await refusal(createClient(MessageService, transport()).createMessage({ identifier: ch, content: "x", ...extra }, { headers: headers() }));
    expect(got).toEqual({ code: Code.InvalidArgument, error: code });
  });

  it.each([
    [{ groupConcurrency: 0 }, "invalid_group_concurrency"],
    [{ priorityAgingSeconds: 0 }, "invalid_priority_aging_seconds"],
    [{ dispatch: 7 as ChannelDispatch }, "invalid_dispatch"],
  ])("refuses channel settings %j with InvalidArgument %s", async (extra, code) => {
    const got = await refusal(createClient(ChannelService, transport()).createChannel({ name: "bad", mode: ChannelMode.CLAIMABLE, ...extra }, { headers: headers() }));
    expect(got).toEqual({ code: Code.InvalidArgument, error: code });
  });
});

describe("claims by id", () => {
  it("refuses a claim by id in a channel that bounds its groups, with 409 receive_required", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1 });
    const m = await post(ch, "a1", { group_key: "a" });
    const res = await rest(url(), "POST", `/v1/messages/${m.id}/claim`, { key: owner, body: {} });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "receive_required" });
  });
});
