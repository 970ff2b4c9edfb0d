/**
 * Delays (docs/decisions.md#delays): a message posted or released with
 * delay_seconds is open work only from its available_at on — not received,
 * claimed or listed as unclaimed before — and waiting receives and long-polls
 * wake when it falls due, on every replica. Over REST and gRPC; time moves by
 * the injected clock, nothing sleeps.
 */
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { SteppingClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, untilParked, useTestServer } from "../support/server.js";

const clock = new SteppingClock();
const server = useTestServer({ AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "120" }, { clock });
const url = () => server.url;
let owner: string;
let worker: string;
beforeAll(async () => {
  owner = await mintKey(url(), "owner");
  worker = await mintKey(url(), "worker");
});
// PostgreSQL stamps created_at (and so available_at) in real time.
afterEach(() => clock.reset());

const receive = (ch: string, body: Record<string, unknown> = {}, base = url(), key = worker) =>
  rest<{ data: ReceivedJson[] }>(base, "POST", `/v1/channels/${ch}/messages:receive`, { key, body });
const contents = (res: { body: { data: ReceivedJson[] } }) => res.body.data.map((r) => r.message.content);
const seconds = (from: string, to: string) => (Date.parse(to) - Date.parse(from)) / 1000;

describe("createMessage with delay_seconds", () => {
  it("gives every message an available_at: its created_at when not delayed", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "now" });
    expect(m.available_at).toBe(m.created_at);
  });

  it("sets available_at delay_seconds after created_at, fractions included", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "later", delay_seconds: 30.5 });
    expect(seconds(m.created_at, m.available_at as string)).toBe(30.5);
  });

  it("keeps a delayed message out of status=unclaimed, receive and claim until available_at", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "later", delay_seconds: 60 });
    expect((await listMessages(url(), worker, ch, "?status=unclaimed")).data).toEqual([]);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual([]);
    for (const path of ["claim", "claim-with-lease"]) {
      const res = await rest<{ error: string; available_at: string }>(url(), "POST", `/v1/messages/${m.id}/${path}`, { key: worker, body: {} });
      expect(res.status).toBe(409);
      expect(res.body.error).toBe("message_delayed");
      expect(res.body.available_at).toBe(m.available_at);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
  });

  it("lists a delayed message without a status filter, with its available_at", async () => {
    const ch = await createChannel(url(), owner);
    const m = await postMessage(url(), owner, ch, { content: "later", delay_seconds: 60 });
    const page = await listMessages(url(), worker, ch);
    expect(page.data.map((d) => [d.id, d.available_at])).toEqual([[m.id, m.available_at]]);
    expect((await listMessages(url(), worker, ch, "?status=claimed")).data).toEqual([]);
  });

  it("makes the message receivable once the clock passes available_at, behind undelayed work", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "later", delay_seconds: 60 });
    await postMessage(url(), owner, ch, { content: "now" });
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["now"]);
    clock.advanceSeconds(61);
    expect((await listMessages(url(), worker, ch, "?status=unclaimed")).data.map((d) => d.content)).toEqual(["later"]);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["later"]);
  });

  it("refuses a negative delay, or one longer than the channel's ttl_seconds (422 invalid_delay_seconds)", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    for (const delay of [-1, 300.5]) {
      const res = await rest<{ error: string; field: string }>(url(), "POST", `/v1/channels/${ch}/messages`, {
        key: owner,
        body: { content: "x", delay_seconds: delay },
      });
      expect(res.status).toBe(422);
      expect(res.body.error).toBe("invalid_delay_seconds");
      expect(res.body.field).toBe("delay_seconds");
    }
    expect((await postMessage(url(), owner, ch, { content: "at the limit", delay_seconds: 300 })).content).toBe("at the limit");
  });
});

describe("waking on available_at", () => {
  it("wakes a waiting receive when a delayed message falls due", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "later", delay_seconds: 30 });
    const parked = server.app.bus.subscriptions;
    const waiting = receive(ch, { wait: 100 });
    await untilParked(server, parked + 1);
    clock.advanceSeconds(31);
    expect(contents(await waiting)).toEqual(["later"]);
  });

  it("wakes a status=unclaimed long-poll when a delayed message falls due", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "later", delay_seconds: 30 });
    const parked = server.app.bus.subscriptions;
    const waiting = listMessages(url(), worker, ch, "?status=unclaimed&wait=100");
    await untilParked(server, parked + 1);
    clock.advanceSeconds(31);
    expect((await waiting).data.map((d) => d.content)).toEqual(["later"]);
  });

  it("wakes a waiting receive when another worker's lease runs out unacknowledged", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "abandoned" });
    const [held] = (await receive(ch, { lease_seconds: 30 })).body.data;
    const parked = server.app.bus.subscriptions;
    // Nothing is written when a lease runs out: only the waiter's own timer, set by the lease's end, can wake it.
    const waiting = receive(ch, { wait: 100 }, url(), owner);
    await untilParked(server, parked + 1);
    clock.advanceSeconds(31);
    const [again] = (await waiting).body.data;
    expect(again!.message.id).toBe(held!.message.id);
    expect(again!.message.delivery_count).toBe(2);
  });

  it("wakes a receive waiting on another service process when the message posted on the first falls due", async () => {
    const b = await startTestServer({ DATABASE_URL: server.databaseUrl, AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "120" }, { clock });
    try {
      const ch = await createChannel(url(), owner);
      await postMessage(url(), owner, ch, { content: "from a, later", delay_seconds: 30 });
      // Nothing is written from here on: only b's own timer, set by available_at, can wake its waiter.
      const waiting = receive(ch, { wait: 100 }, b.url);
      await untilParked(b, 1);
      clock.advanceSeconds(31);
      expect(contents(await waiting)).toEqual(["from a, later"]);
    } finally {
      await b.close();
    }
  });
});

describe("release with delay_seconds", () => {
  it("puts the message back as open work only delay_seconds later (retry with back-off)", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "retry me" });
    const [got] = (await receive(ch)).body.data;
    const released = await rest<{ status: string; message: MessageJson }>(url(), "POST", `/v1/messages/${got!.message.id}/release`, {
      key: worker,
      body: { delay_seconds: 45 },
    });
    expect(released.status).toBe(200);
    expect(released.body.message.claimed_by).toBeNull();
    expect(Date.parse(released.body.message.available_at as string)).toBeGreaterThan(Date.now() + 40_000);
    expect(contents(await receive(ch))).toEqual([]);
    expect((await listMessages(url(), worker, ch, "?status=unclaimed")).data).toEqual([]);
    clock.advanceSeconds(46);
    expect(contents(await receive(ch))).toEqual(["retry me"]);
  });

  it("releases at once without delay_seconds", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "again" });
    const [got] = (await receive(ch)).body.data;
    expect((await rest(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: worker, body: {} })).status).toBe(200);
    expect(contents(await receive(ch))).toEqual(["again"]);
  });

  it("refuses a release delay longer than the channel's ttl_seconds and keeps the claim", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    await postMessage(url(), owner, ch, { content: "held" });
    const [got] = (await receive(ch)).body.data;
    const res = await rest<{ error: string }>(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: worker, body: { delay_seconds: 301 } });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_delay_seconds");
    const negative = await rest<{ error: string }>(url(), "POST", `/v1/messages/${got!.message.id}/release`, { key: worker, body: { delay_seconds: -5 } });
    expect(negative.body.error).toBe("invalid_delay_seconds");
    expect((await listMessages(url(), worker, ch, "?status=claimed")).data.map((d) => d.id)).toEqual([got!.message.id]);
  });

  it("batchRelease delays every released item", async () => {
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "a" });
    await postMessage(url(), owner, ch, { content: "b" });
    const ids = (await receive(ch, { max_messages: 2 })).body.data.map((r) => r.message.id);
    const res = await rest<{ results: Array<{ message_id: string; status: string | null }> }>(url(), "POST", "/v1/messages:batchRelease", {
      key: worker,
      body: { message_ids: ids, delay_seconds: 20 },
    });
    expect(res.body.results.map((r) => r.status)).toEqual(["released", "released"]);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual([]);
    clock.advanceSeconds(21);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["a", "b"]);
  });
});

describe("batchCreate with delay_seconds per item", () => {
  it("delays each item by its own delay_seconds", async () => {
    const ch = await createChannel(url(), owner);
    const res = await rest<{ data: MessageJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, {
      key: owner,
      body: { messages: [{ content: "soon", delay_seconds: 10 }, { content: "now" }, { content: "later", delay_seconds: 50 }] },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.map((m) => seconds(m.created_at, m.available_at as string))).toEqual([10, 0, 50]);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["now"]);
    clock.advanceSeconds(11);
    expect(contents(await receive(ch, { max_messages: 10 }))).toEqual(["soon"]);
  });

  it("refuses the batch naming the item whose delay is out of range", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    const res = await rest<{ error: string; index: number }>(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, {
      key: owner,
      body: { messages: [{ content: "ok" }, { content: "too late", delay_seconds: 301 }] },
    });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_delay_seconds");
    expect(res.body.index).toBe(1);
    expect((await listMessages(url(), owner, ch)).data).toEqual([]);
  });
});

describe("delays over gRPC", () => {
  const client = () => createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
  const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

  it("posts with delaySeconds, answers availableAt, and releases with a delay", async () => {
    const ch = await createChannel(url(), owner);
    const { message } = await client().createMessage({ identifier: ch, content: "g", delaySeconds: 15 }, { headers: { "x-api-key": owner } });
    expect(timestampMs(message!.availableAt!) - timestampMs(message!.createdAt!)).toBe(15_000);
    const none = await client().receiveMessages({ identifier: ch }, { headers: { "x-api-key": worker } });
    expect(none.data).toEqual([]);
    clock.advanceSeconds(16);
    const [got] = (await client().receiveMessages({ identifier: ch }, { headers: { "x-api-key": worker } })).data;
    expect(got!.message!.content).toBe("g");
    const released = await client().releaseMessage({ messageId: got!.message!.id, delaySeconds: 30 }, { headers: { "x-api-key": worker } });
    expect(timestampMs(released.message!.availableAt!)).toBeGreaterThan(Date.now() + 40_000);
    expect((await client().receiveMessages({ identifier: ch }, { headers: { "x-api-key": worker } })).data).toEqual([]);
  });

  it("refuses an out-of-range delay with invalid_delay_seconds", async () => {
    const ch = await createChannel(url(), owner, { ttl_seconds: 300 });
    const err = await client()
      .createMessage({ identifier: ch, content: "g", delaySeconds: 301 }, { headers: { "x-api-key": owner } })
      .catch((e: unknown) => e);
    expect(errorCode(err)).toBe("invalid_delay_seconds");
  });
});
