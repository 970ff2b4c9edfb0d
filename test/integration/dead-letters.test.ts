/**
 * Max deliveries and dead letters (docs/decisions.md#dead-letters): a channel's
 * max_deliveries and dead_letter_channel, the move of a message delivered that
 * often out of its channel (to the dead-letter channel, or to history), and
 * POST /v1/channels/{identifier}/dead-letters:redrive, over REST and gRPC.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const url = () => server.url;
const sql = useSqlClient(server);
let owner: string;
let worker: string;
let stranger: string;
beforeAll(async () => {
  owner = await mintKey(url(), "dl-owner");
  worker = await mintKey(url(), "dl-worker");
  stranger = await mintKey(url(), "dl-stranger");
});

const receive = (key: string, ch: string, body: Record<string, unknown> = {}) =>
  rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body });
const release = (key: string, id: string) => rest(url(), "POST", `/v1/messages/${id}/release`, { key, body: {} });
const patch = (key: string, ch: string, body: Record<string, unknown>) => rest(url(), "PATCH", `/v1/channels/${ch}`, { key, body });
const redrive = (key: string, ch: string, body: Record<string, unknown> = {}) =>
  rest<{ moved: number }>(url(), "POST", `/v1/channels/${ch}/dead-letters:redrive`, { key, body });

/** A work queue with max_deliveries 2 and, unless told otherwise, a dead-letter channel of the same owner. */
async function queue(withDeadLetters = true): Promise<{ ch: string; dlq: string | null }> {
  const dlq = withDeadLetters ? await createChannel(url(), owner, { name: "dead letters" }) : null;
  const ch = await createChannel(url(), owner, { max_deliveries: 2, ...(dlq ? { dead_letter_channel: dlq } : {}) });
  return { ch, dlq };
}

/** Receives the message and releases it, `times` times: delivered that often. */
async function deliverAndRelease(ch: string, id: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const got = await receive(worker, ch);
    expect(got.body.data.map((r) => r.message.id)).toEqual([id]);
    expect((await release(worker, id)).status).toBe(200);
  }
}

describe("channel settings max_deliveries and dead_letter_channel", () => {
  it("are set on create; the channel shows dead_letter_channel_id", async () => {
    const dlq = await createChannel(url(), owner);
    const created = await rest(url(), "POST", "/v1/channels", {
      key: owner,
      body: { name: "with dlq", mode: "claimable", max_deliveries: 5, dead_letter_channel: dlq },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ max_deliveries: 5, dead_letter_channel_id: dlq });
  });

  it("take the dead-letter channel by the owner's name for it", async () => {
    const name = `dlq-${Math.random().toString(36).slice(2, 8)}`;
    const dlq = await createChannel(url(), owner, { name });
    const ch = await createChannel(url(), owner);
    const res = await patch(owner, ch, { dead_letter_channel: name });
    expect(res.status).toBe(200);
    expect(res.body.dead_letter_channel_id).toBe(dlq);
  });

  it("are set and cleared with null by PATCH", async () => {
    const dlq = await createChannel(url(), owner);
    const ch = await createChannel(url(), owner);
    const set = await patch(owner, ch, { max_deliveries: 1000, dead_letter_channel: dlq });
    expect(set.body).toMatchObject({ max_deliveries: 1000, dead_letter_channel_id: dlq });
    const cleared = await patch(owner, ch, { max_deliveries: null, dead_letter_channel: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ max_deliveries: null, dead_letter_channel_id: null });
  });

  it.each([0, 1001, 2.5])("refuses max_deliveries %j with 422 invalid_max_deliveries", async (value) => {
    const ch = await createChannel(url(), owner);
    const res = await patch(owner, ch, { max_deliveries: value });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_max_deliveries", field: "max_deliveries" });
  });

  it("refuses another key's channel as dead-letter channel with 422, as an unknown one", async () => {
    const others = await createChannel(url(), stranger);
    const ch = await createChannel(url(), owner);
    const res = await patch(owner, ch, { dead_letter_channel: others });
    const unknown = await patch(owner, ch, { dead_letter_channel: "00000000-0000-4000-8000-000000000000" });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_dead_letter_channel", field: "dead_letter_channel" });
    expect([unknown.status, unknown.body.error, unknown.body.message]).toEqual([res.status, res.body.error, res.body.message]);
  });

  it("refuses the channel itself as its dead-letter channel with 422", async () => {
    const ch = await createChannel(url(), owner);
    const res = await patch(owner, ch, { dead_letter_channel: ch });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_dead_letter_channel" });
  });

  it("refuses another key's channel on create too", async () => {
    const others = await createChannel(url(), stranger);
    const res = await rest(url(), "POST", "/v1/channels", { key: owner, body: { name: "x", mode: "claimable", dead_letter_channel: others } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_dead_letter_channel" });
  });

  it("drops dead_letter_channel_id when the dead-letter channel is deleted", async () => {
    const { ch, dlq } = await queue();
    expect((await rest(url(), "DELETE", `/v1/channels/${dlq}`, { key: owner })).status).toBe(204);
    const got = await rest(url(), "GET", `/v1/channels/${ch}`, { key: owner });
    expect(got.body).toMatchObject({ max_deliveries: 2, dead_letter_channel_id: null });
  });
});

describe("dead-lettering", () => {
  it("moves a message released max_deliveries times to the dead-letter channel on the next receive, not delivering it", async () => {
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "poison", metadata: { kind: "job" } });
    await deliverAndRelease(ch, m.id, 2);

    expect((await receive(worker, ch)).body.data).toEqual([]);
    const [dead] = (await listMessages(url(), owner, dlq!)).data;
    expect(dead).toMatchObject({
      content: "poison",
      delivery_count: 0,
      metadata: { kind: "job" },
      dead_letter: { origin_channel_id: ch, origin_message_id: m.id, delivery_count: 2, last_error: "released" },
    });
    // The provenance is the service's own field; the metadata stays the poster's.
    expect(dead!.metadata).not.toHaveProperty("dead_letter");
    expect((await listMessages(url(), owner, ch)).data).toEqual([]);
  });

  it("moves a message whose lease lapsed max_deliveries times, recording lease_expired", async () => {
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "slow" });
    try {
      for (let i = 0; i < 2; i++) {
        expect((await receive(worker, ch, { lease_seconds: 30 })).body.data.map((r) => r.message.id)).toEqual([m.id]);
        clock.advanceSeconds(31);
      }
      expect((await receive(worker, ch)).body.data).toEqual([]);
    } finally {
      clock.reset();
    }
    const [dead] = (await listMessages(url(), owner, dlq!)).data;
    expect(dead?.dead_letter).toMatchObject({ origin_message_id: m.id, delivery_count: 2, last_error: "lease_expired" });
  });

  it("archives the original to history as dead_lettered, readable by its id", async () => {
    const { ch } = await queue(false);
    const m = await postMessage(url(), owner, ch, { content: "nowhere to go" });
    await deliverAndRelease(ch, m.id, 2);
    expect((await receive(worker, ch)).body.data).toEqual([]);

    const { rows } = await sql.query<{ reason: string; delivery_count: number }>("SELECT reason, delivery_count FROM message_history WHERE id = $1", [m.id]);
    expect(rows).toEqual([{ reason: "dead_lettered", delivery_count: 2 }]);
    const got = await rest<MessageJson>(url(), "GET", `/v1/messages/${m.id}`, { key: owner });
    expect(got.body).toMatchObject({ id: m.id, active: false, delivery_count: 2 });
  });

  it("does not count a message still under its limit", async () => {
    const { ch } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "once more" });
    await deliverAndRelease(ch, m.id, 1);
    expect((await receive(worker, ch)).body.data.map((r) => r.message.delivery_count)).toEqual([2]);
  });

  it("refuses a claim of a message at its limit with 404 and moves it", async () => {
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "claimed directly" });
    await deliverAndRelease(ch, m.id, 2);
    const res = await rest(url(), "POST", `/v1/messages/${m.id}/claim-with-lease`, { key: worker, body: {} });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "message_not_found" });
    expect((await listMessages(url(), owner, dlq!)).data.map((d) => (d.dead_letter as { origin_message_id: string }).origin_message_id)).toEqual([m.id]);
  });

  it("holds messages the dead-letter channel refuses (paused) back, undelivered, until it takes them", async () => {
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "waits" });
    await deliverAndRelease(ch, m.id, 2);
    await patch(owner, dlq!, { paused: true });
    expect((await receive(worker, ch)).body.data).toEqual([]);
    expect((await listMessages(url(), owner, ch)).data.map((x) => x.id)).toEqual([m.id]);
    await patch(owner, dlq!, { paused: false });
    expect((await receive(worker, ch)).body.data).toEqual([]);
    expect((await listMessages(url(), owner, dlq!)).data).toHaveLength(1);
    expect((await listMessages(url(), owner, ch)).data).toEqual([]);
  });

  it("moves a message at its limit exactly once, and delivers it to none of 20 racing receivers", async () => {
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "raced" });
    await deliverAndRelease(ch, m.id, 2);
    const results = await Promise.all(Array.from({ length: 20 }, () => receive(worker, ch, { max_messages: 10 })));
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 20 }, () => 200));
    expect(results.flatMap((r) => r.body.data)).toEqual([]);
    expect((await listMessages(url(), owner, dlq!)).data).toHaveLength(1);
    const { rows } = await sql.query("SELECT 1 FROM message_history WHERE id = $1", [m.id]);
    expect(rows).toHaveLength(1);
    const { rows: counters } = await sql.query<{ stored_messages: number }>("SELECT stored_messages FROM channels WHERE id = $1", [ch]);
    expect(counters[0]!.stored_messages).toBe(0);
  });
});

describe("POST /v1/channels/{identifier}/dead-letters:redrive", () => {
  async function deadLetter(): Promise<{ ch: string; dlq: string; original: MessageJson }> {
    const { ch, dlq } = await queue();
    const original = await postMessage(url(), owner, ch, { content: "retry later", metadata: { kind: "job" } });
    await deliverAndRelease(ch, original.id, 2);
    expect((await receive(worker, ch)).body.data).toEqual([]);
    return { ch, dlq: dlq!, original };
  }

  it("moves dead letters back to their origin with a fresh count, as plain messages again", async () => {
    const { ch, dlq } = await deadLetter();
    const res = await redrive(owner, dlq);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ moved: 1, refused: [] });
    expect((await listMessages(url(), owner, dlq)).data).toEqual([]);
    const [back] = (await listMessages(url(), owner, ch)).data;
    expect(back).toMatchObject({ content: "retry later", metadata: { kind: "job" }, delivery_count: 0, dead_letter: null });
    const again = await receive(worker, ch);
    expect(again.body.data.map((r) => [r.message.id, r.message.delivery_count])).toEqual([[back!.id, 1]]);
  });

  it("moves at most max_messages, oldest first", async () => {
    const { ch, dlq } = await queue();
    for (const content of ["d1", "d2", "d3"]) {
      const m = await postMessage(url(), owner, ch, { content });
      await deliverAndRelease(ch, m.id, 2);
    }
    expect((await receive(worker, ch)).body.data).toEqual([]);
    expect((await redrive(owner, dlq!, { max_messages: 2 })).body).toEqual({ moved: 2, refused: [] });
    expect((await listMessages(url(), owner, ch)).data.map((m) => m.content)).toEqual(["d1", "d2"]);
    expect((await listMessages(url(), owner, dlq!)).data.map((m) => m.content)).toEqual(["d3"]);
  });

  it("moves each dead letter once when 10 redrives race", async () => {
    const { ch, dlq } = await queue();
    for (const content of ["r1", "r2", "r3", "r4", "r5"]) {
      const m = await postMessage(url(), owner, ch, { content });
      await deliverAndRelease(ch, m.id, 2);
    }
    expect((await receive(worker, ch)).body.data).toEqual([]);
    const results = await Promise.all(Array.from({ length: 10 }, () => redrive(owner, dlq!, { max_messages: 2 })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const moved = results.reduce((sum, r) => sum + r.body.moved, 0);
    const back = (await listMessages(url(), owner, ch)).data.map((m) => m.content);
    const left = (await listMessages(url(), owner, dlq!)).data.length;
    expect(back.length).toBe(moved);
    expect(new Set(back).size).toBe(back.length);
    expect(back.length + left).toBe(5);
  });

  it("leaves a message whose metadata names another key's channel as its origin where it is", async () => {
    const dlq = await createChannel(url(), owner);
    const theirs = await createChannel(url(), stranger);
    await postMessage(url(), stranger, dlq, { content: "forged", metadata: { dead_letter: { origin_channel_id: theirs } } });
    expect((await redrive(owner, dlq)).body).toEqual({ moved: 0, refused: [] });
    expect((await listMessages(url(), stranger, theirs)).data).toEqual([]);
    expect((await listMessages(url(), owner, dlq)).data).toHaveLength(1);
  });

  it("never trusts a poster's metadata.dead_letter: a forged dead letter naming the owner's restricted channel stays where it is", async () => {
    // The owner's restricted channel, with a schema the forged message would fail, and an open channel anyone may post to.
    const secret = await createChannel(url(), owner, { access: "restricted", metadata_schema: { type: "object", required: ["approved"] } });
    // The dead-letter channel is open: anyone may post to it.
    const { ch, dlq } = await deadLetter();
    const forged = await postMessage(url(), stranger, dlq, {
      content: "rm -rf /",
      metadata: { dead_letter: { origin_channel_id: secret, origin_message_id: crypto.randomUUID(), delivery_count: 2, last_error: "released" } },
    });
    expect(forged.dead_letter).toBeNull();

    const res = await redrive(owner, dlq);
    // Only the message the service itself dead-lettered moves, to where it came from.
    expect(res.body).toEqual({ moved: 1, refused: [] });
    expect((await listMessages(url(), owner, secret)).data).toEqual([]);
    expect((await listMessages(url(), owner, ch)).data.map((m) => m.content)).toEqual(["retry later"]);
    expect((await listMessages(url(), owner, dlq)).data.map((m) => m.id)).toEqual([forged.id]);
  });

  it("passes a redriven message through its origin's metadata_schema like any write, keeping refused ones as dead letters", async () => {
    const { ch, dlq } = await queue();
    const fails = await postMessage(url(), owner, ch, { content: "old shape", metadata: { v: 1 } });
    await deliverAndRelease(ch, fails.id, 2);
    const fits = await postMessage(url(), owner, ch, { content: "new shape", metadata: { v: 2, approved: true } });
    await deliverAndRelease(ch, fits.id, 2);
    expect((await receive(worker, ch)).body.data).toEqual([]);
    // The origin's schema changed while they were dead letters.
    expect((await patch(owner, ch, { metadata_schema: { type: "object", required: ["approved"] } })).status).toBe(200);
    const [deadFails] = (await listMessages(url(), owner, dlq!)).data;

    const res = await redrive(owner, dlq!);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      moved: 1,
      refused: [{ message_id: deadFails!.id, origin_channel_id: ch, error: "metadata_validation_failed", violations: [expect.objectContaining({ field: expect.any(String) })] }],
    });
    expect((await listMessages(url(), owner, ch)).data.map((m) => m.content)).toEqual(["new shape"]);
    expect((await listMessages(url(), owner, dlq!)).data.map((m) => m.content)).toEqual(["old shape"]);
  });

  it("does not let refused dead letters keep newer ones from moving", async () => {
    const { ch, dlq } = await queue();
    for (const content of ["bad-1", "bad-2", "good"]) {
      const m = await postMessage(url(), owner, ch, { content, metadata: content === "good" ? { approved: true } : {} });
      await deliverAndRelease(ch, m.id, 2);
    }
    expect((await receive(worker, ch)).body.data).toEqual([]);
    await patch(owner, ch, { metadata_schema: { type: "object", required: ["approved"] } });
    const res = await redrive(owner, dlq!, { max_messages: 1 });
    expect(res.body).toMatchObject({ moved: 1, refused: [{ error: "metadata_validation_failed" }] });
    expect((await listMessages(url(), owner, ch)).data.map((m) => m.content)).toEqual(["good"]);
  });

  it("does not move a dead letter someone acknowledged: it is finished", async () => {
    const { ch, dlq } = await deadLetter();
    const [dead] = (await listMessages(url(), owner, dlq)).data;
    expect((await rest(url(), "POST", `/v1/messages/${dead!.id}/ack`, { key: owner, body: {} })).status).toBe(200);
    expect((await redrive(owner, dlq)).body).toEqual({ moved: 0, refused: [] });
    expect((await listMessages(url(), owner, ch)).data).toEqual([]);
  });

  it("refuses a key that does not own the channel with 403 forbidden", async () => {
    const { dlq } = await deadLetter();
    const res = await redrive(worker, dlq);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "forbidden" });
    expect((await listMessages(url(), owner, dlq)).data).toHaveLength(1);
  });

  it.each([0, 1001])("refuses max_messages %j with 422 invalid_max_messages", async (value) => {
    const dlq = await createChannel(url(), owner);
    const res = await redrive(owner, dlq, { max_messages: value });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_max_messages", field: "max_messages" });
  });
});

describe("dead letters over gRPC", () => {
  const transport = () => createGrpcTransport({ baseUrl: url() });
  const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

  it("sets and clears the channel fields with an update mask", async () => {
    const channels = createClient(ChannelService, transport());
    const headers = { "x-api-key": owner };
    const dlq = await createChannel(url(), owner);
    const ch = await createChannel(url(), owner);
    const set = await channels.updateChannel(
      { identifier: ch, channel: { maxDeliveries: 3, deadLetterChannel: dlq }, updateMask: { paths: ["max_deliveries", "dead_letter_channel"] } },
      { headers },
    );
    expect([set.maxDeliveries, set.deadLetterChannelId]).toEqual([3, dlq]);
    const cleared = await channels.updateChannel({ identifier: ch, channel: {}, updateMask: { paths: ["max_deliveries", "dead_letter_channel"] } }, { headers });
    expect([cleared.maxDeliveries, cleared.deadLetterChannelId]).toEqual([undefined, undefined]);
    const err = await channels.updateChannel({ identifier: ch, channel: { maxDeliveries: 0 } }, { headers }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("invalid_max_deliveries");
  });

  it("redrives like REST, and refuses a non-owner with PermissionDenied", async () => {
    const messages = createClient(MessageService, transport());
    const { ch, dlq } = await queue();
    const m = await postMessage(url(), owner, ch, { content: "grpc" });
    await deliverAndRelease(ch, m.id, 2);
    expect((await messages.receiveMessages({ identifier: ch }, { headers: { "x-api-key": worker } })).data).toEqual([]);
    const err = await messages.redriveDeadLetters({ identifier: dlq! }, { headers: { "x-api-key": worker } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    expect(errorCode(err)).toBe("forbidden");
    const res = await messages.redriveDeadLetters({ identifier: dlq!, maxMessages: 10 }, { headers: { "x-api-key": owner } });
    expect(res.moved).toBe(1);
    expect((await listMessages(url(), owner, ch)).data.map((x) => x.content)).toEqual(["grpc"]);
  });
});
