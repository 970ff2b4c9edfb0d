/**
 * Cancelling a message (docs/decisions.md#cancel): POST /v1/messages/{id}:cancel
 * by its author or the channel owner. Open work is cancelled at once and never
 * delivered; work in flight is marked cancel_requested, its holder sees the mark
 * (heartbeat, receive's completed answer, the message) and may still acknowledge
 * it, and it is cancelled when its lease ends or it is released. Lapses are
 * reached by moving the service clock, not by sleeping.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageState } from "../../gen/agentbus/v1/message_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { formatTimestamp } from "../../src/model/time.js";
import { RELEASE_UNSEEN_SQL } from "../../src/store/claim-sql.js";
import { Db } from "../../src/store/db.js";
import { purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
let owner: string;
let author: string;
let worker: string;
let stranger: string;
beforeAll(async () => {
  [owner, author, worker, stranger] = await Promise.all(["cancel-owner", "cancel-author", "cancel-worker", "cancel-stranger"].map((l) => mintKey(url(), l)));
});
afterEach(() => clock.reset());

const post = (ch: string, content = "task", extra: Record<string, unknown> = {}, key = author) => postMessage(url(), key, ch, { content, ...extra });
const cancel = (id: string, body: Record<string, unknown> = {}, key = author) =>
  rest<{ message: MessageJson; error?: string }>(url(), "POST", `/v1/messages/${id}:cancel`, { key, body });
const receive = async (ch: string, body: Record<string, unknown> = {}) => {
  const res = await rest<{ data: ReceivedJson[]; completed: Array<{ message_id: string; status: string; cancel_requested: boolean }> }>(
    url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body: { lease_seconds: 60, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};
const get = async (id: string, query = "") => (await rest<MessageJson>(url(), "GET", `/v1/messages/${id}${query}`, { key: author })).body;
const release = (id: string) => rest(url(), "POST", `/v1/messages/${id}/release`, { key: worker, body: {} });
const ack = (id: string, body: Record<string, unknown> = {}) => rest(url(), "POST", `/v1/messages/${id}/ack`, { key: worker, body });
const queue = () => createChannel(url(), owner);

describe("cancelling open work", () => {
  it("cancels a ready message at once, with its reason, and never delivers it", async () => {
    const ch = await queue();
    const m = await post(ch);
    const res = await cancel(m.id, { reason: "the user closed the tab" });
    expect(res.status).toBe(200);
    expect(res.body.message).toMatchObject({ id: m.id, state: "cancelled", cancel_requested: true, cancel_reason: "the user closed the tab" });
    expect((await receive(ch, { max_messages: 10 })).data).toEqual([]);
    expect(await get(m.id)).toMatchObject({ state: "cancelled", cancel_reason: "the user closed the tab" });
  });

  it("cancels a delayed message, which is not delivered when its delay runs out", async () => {
    const ch = await queue();
    const m = await post(ch, "later", { delay_seconds: 30 });
    expect((await cancel(m.id)).body.message.state).toBe("cancelled");
    clock.advanceSeconds(31);
    expect((await receive(ch)).data).toEqual([]);
  });

  it("lets the channel owner cancel a message someone else posted", async () => {
    const ch = await queue();
    const m = await post(ch);
    expect((await cancel(m.id, {}, owner)).status).toBe(200);
  });

  it("hands out the next message of a strict group once its head is cancelled", async () => {
    const ch = await createChannel(url(), owner, { group_concurrency: 1, dispatch: "fair" });
    const first = await post(ch, "first", { group_key: "repo" });
    await post(ch, "second", { group_key: "repo" });
    expect((await cancel(first.id)).status).toBe(200);
    expect((await receive(ch)).data.map((r) => r.message.content)).toEqual(["second"]);
  });

  it("counts cancelled messages in the stats, live and once the purge moved them to history as cancelled", async () => {
    const ch = await queue();
    const m = await post(ch);
    await cancel(m.id);
    const stats = async () => (await rest<{ cancelled: number; ready: number; expired: number }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner })).body;
    expect(await stats()).toMatchObject({ cancelled: 1, ready: 0, expired: 0 });
    await purge(new Db(server.app.pool), clock.now());
    expect((await sql.query("SELECT reason FROM message_history WHERE id = $1", [m.id])).rows).toEqual([{ reason: "cancelled" }]);
    expect(await get(m.id)).toMatchObject({ state: "cancelled", active: false });
    expect(await stats()).toMatchObject({ cancelled: 1, expired: 0 });
  });
});

describe("cancelling work in flight", () => {
  it("marks the message cancel_requested, in flight, and tells the holder in the heartbeat answer", async () => {
    const ch = await queue();
    const m = await post(ch);
    const [lease] = (await receive(ch)).data;
    const res = await cancel(m.id, { reason: "superseded" });
    expect(res.body.message).toMatchObject({ state: "in_flight", cancel_requested: true, cancel_reason: "superseded" });
    const beat = await rest<{ cancel_requested: boolean }>(url(), "POST", `/v1/leases/${lease!.lease_token}/heartbeat`, { key: worker, body: { lease_seconds: 60 } });
    expect(beat.status).toBe(200);
    expect(beat.body.cancel_requested).toBe(true);
  });

  it("tells the holder in the receive's completed answer, and keeps the result it acknowledged with", async () => {
    const ch = await queue();
    const m = await post(ch);
    const other = await post(ch, "other");
    const [lease] = (await receive(ch)).data;
    expect(lease!.message.id).toBe(m.id);
    await cancel(m.id);
    const next = await receive(ch, { complete: [{ message_id: m.id, result: "half done" }] });
    expect(next.completed).toMatchObject([{ message_id: m.id, status: "acknowledged", cancel_requested: true }]);
    expect(next.data.map((r) => r.message.id)).toEqual([other.id]);
    const done = await get(m.id);
    expect(done).toMatchObject({ state: "acknowledged", result: "half done", cancel_requested: true });
    // Its own expiry again, not the lease's end the cancel cut it to.
    expect(Date.parse(done.expires_at) - Date.parse(done.created_at)).toBeGreaterThan(3_000_000);
  });

  it("cancels it, not delivering it again, when the holder releases it", async () => {
    const ch = await queue();
    const m = await post(ch);
    await receive(ch);
    await cancel(m.id);
    expect((await release(m.id)).status).toBe(200);
    expect(await get(m.id)).toMatchObject({ state: "cancelled" });
    expect((await receive(ch)).data).toEqual([]);
  });

  it("cancels it, not delivering it again, when the lease lapses", async () => {
    const ch = await queue();
    const m = await post(ch);
    await receive(ch, { lease_seconds: 30 });
    await cancel(m.id);
    clock.advanceSeconds(31);
    expect((await receive(ch)).data).toEqual([]);
    expect(await get(m.id)).toMatchObject({ state: "cancelled", cancel_requested: true });
  });

  it("cancels it, not delivering it again, when a receive gives back the lease it could not deliver", async () => {
    const ch = await queue();
    const m = await post(ch);
    const [lease] = (await receive(ch)).data;
    await cancel(m.id);
    // What the service runs when a receive's client went away before its answer: the lease is given back unseen.
    const workerId = (await sql.query("SELECT claimed_by_key_id FROM messages WHERE id = $1", [m.id])).rows[0].claimed_by_key_id as string;
    const unseen = await sql.query(RELEASE_UNSEEN_SQL, [[m.id], [lease!.lease_token], workerId, formatTimestamp(clock.now())]);
    expect(unseen.rowCount).toBe(1);
    expect((await receive(ch)).data).toEqual([]);
    expect(await get(m.id)).toMatchObject({ state: "cancelled" });
  });

  it("answers a second cancel with the message, keeping the first reason", async () => {
    const ch = await queue();
    const m = await post(ch);
    await receive(ch);
    await cancel(m.id, { reason: "first" });
    const again = await cancel(m.id, { reason: "second" });
    expect(again.status).toBe(200);
    expect(again.body.message.cancel_reason).toBe("first");
  });

  it("ends a wait for the message's outcome when its holder releases it", async () => {
    const ch = await queue();
    const m = await post(ch);
    await receive(ch);
    await cancel(m.id);
    const waiting = get(m.id, "?wait=20");
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    await release(m.id);
    expect((await waiting).state).toBe("cancelled");
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe("refusals", () => {
  it("refuses a key that neither posted the message nor owns the channel, with 403 forbidden", async () => {
    const ch = await queue();
    const m = await post(ch);
    const res = await cancel(m.id, {}, stranger);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe("forbidden");
  });

  it("refuses an acknowledged, a cancelled and a dead-lettered message with 409 already_finished", async () => {
    const ch = await createChannel(url(), owner, { max_deliveries: 1 });
    const [done, cancelled, dead] = [await post(ch, "done"), await post(ch, "cancelled"), await post(ch, "dead")];
    const leases = (await receive(ch, { max_messages: 3 })).data;
    expect(leases).toHaveLength(3);
    expect((await ack(done.id)).status).toBe(200);
    expect((await release(cancelled.id)).status).toBe(200);
    await sql.query("UPDATE messages SET delivery_count = 0 WHERE id = $1", [cancelled.id]);
    expect((await cancel(cancelled.id)).status).toBe(200);
    expect((await release(dead.id)).status).toBe(200);
    for (const m of [done, cancelled, dead]) {
      const res = await cancel(m.id);
      expect(res.status, m.content).toBe(409);
      expect(res.body.error).toBe("already_finished");
    }
  });

  it("refuses a reason of more than 500 characters with 422 invalid_cancel_reason", async () => {
    const m = await post(await queue());
    const res = await cancel(m.id, { reason: "x".repeat(501) });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_cancel_reason");
    expect((await cancel(m.id, { reason: "é".repeat(500) })).status).toBe(200);
  });

  it("refuses a message of a broadcast channel with 409 channel_not_claimable", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const res = await cancel((await post(ch)).id);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("channel_not_claimable");
  });

  it("answers an unknown message with 404 message_not_found", async () => {
    const res = await cancel("00000000-0000-4000-8000-000000000000");
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("message_not_found");
  });
});

describe("over gRPC", () => {
  const client = () => createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
  const refusal = async (call: Promise<unknown>) => {
    const err = ConnectError.from(await call.then(() => new Error("no error"), (e: unknown) => e));
    return { code: err.code, error: err.findDetails(ErrorDetailSchema)[0]?.error };
  };

  it("cancels, and mirrors the refusals' codes", async () => {
    const ch = await queue();
    const m = await post(ch);
    const { message } = await client().cancelMessage({ messageId: m.id, reason: "no longer needed" }, { headers: { "x-api-key": author } });
    expect(message).toMatchObject({ state: MessageState.CANCELLED, cancelRequested: true, cancelReason: "no longer needed" });
    expect(await refusal(client().cancelMessage({ messageId: m.id }, { headers: { "x-api-key": author } }))).toEqual({ code: Code.FailedPrecondition, error: "already_finished" });
    expect(await refusal(client().cancelMessage({ messageId: (await post(ch)).id, reason: "x".repeat(501) }, { headers: { "x-api-key": author } }))).toEqual({ code: Code.InvalidArgument, error: "invalid_cancel_reason" });
    expect(await refusal(client().cancelMessage({ messageId: (await post(ch)).id }, { headers: { "x-api-key": stranger } }))).toEqual({ code: Code.PermissionDenied, error: "forbidden" });
  });
});

describe("a cancel racing an acknowledgement", () => {
  it("leaves each of 100 messages, 50 in flight and 50 open, acknowledged or cancelled, never both, and delivers none again", async () => {
    const ch = await queue();
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await post(ch, `race ${i}`)).id);
    // The 50 oldest in flight (their holder acknowledges), the rest open (acknowledged without a claim).
    expect((await receive(ch, { max_messages: 50, lease_seconds: 30 })).data).toHaveLength(50);
    const outcomes = await Promise.all(ids.map(async (id, i) => {
      // A result is the claim holder's: the open ones are acknowledged without one.
      const [c, a] = await Promise.all([cancel(id), ack(id, i < 50 ? { result: "done" } : {})]);
      return { id, cancelled: c.status === 200, acked: a.status === 200 && (a.body as { status?: string }).status === "acknowledged" };
    }));
    // Past every lease: nothing comes back, acknowledged or cancelled.
    clock.advanceSeconds(31);
    expect((await receive(ch, { max_messages: 100 })).data).toEqual([]);
    const states = new Map<string, number>();
    for (const { id, acked, cancelled } of outcomes) {
      const m = await get(id);
      states.set(m.state, (states.get(m.state) ?? 0) + 1);
      expect(m.state, id).toBe(acked ? "acknowledged" : "cancelled");
      expect(acked || cancelled, id).toBe(true);
      if (m.state === "cancelled") expect(m.acknowledged_by, id).toEqual([]);
    }
    // The ones in flight are all acknowledged: a cancel never takes the holder's work away.
    for (const { id } of outcomes.slice(0, 50)) expect((await get(id)).state).toBe("acknowledged");
    expect([...states.keys()].every((k) => k === "acknowledged" || k === "cancelled")).toBe(true);
  });
});
