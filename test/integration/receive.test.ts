/**
 * Receive (docs/decisions.md#receive): POST /v1/channels/{identifier}/messages:receive
 * leases a batch of a claimable channel's open work, oldest first, over REST
 * and gRPC; and delivery_count counts every claim and receive.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { AckStatus, MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { expectError, restrictedChannelWithMember } from "../support/membership.js";
import { mintKey, rest, startTestServer, untilParked, useSqlClient, useTestServer, type TestServer } from "../support/server.js";

const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const clock = new AdjustableClock();
const server = useTestServer({ AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "5" }, { clock });
const url = () => server.url;
const sql = useSqlClient(server);
let owner: string;
let worker: string;
beforeAll(async () => {
  owner = await mintKey(url(), "owner");
  worker = await mintKey(url(), "worker");
});

const receive = (key: string, ch: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body, headers });

async function postAll(ch: string, contents: string[]): Promise<MessageJson[]> {
  const posted: MessageJson[] = [];
  for (const content of contents) posted.push(await postMessage(url(), owner, ch, { content }));
  return posted;
}

describe("POST /v1/channels/{identifier}/messages:receive", () => {
  it("leases one message by default, for 300 seconds, with a lease token of its own", async () => {
    const ch = await createChannel(url(), owner);
    const [a] = await postAll(ch, ["a", "b"]);
    const res = await receive(worker, ch);
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    const [got] = res.body.data;
    expect(Object.keys(got!).sort()).toEqual(["lease_expires_at", "lease_token", "message", "parents"]);
    expect(got!.parents).toEqual([]);
    expect(got!.message).toMatchObject({ id: a!.id, content: "a", claimed_by: { id: expect.any(String), name: "worker" }, delivery_count: 1 });
    expect(got!.message.claimed_by_key_id).toBe(worker.split(".")[0]);
    expect(got!.lease_token).toMatch(/^lease_/);
    expect(got!.lease_expires_at).toMatch(TIMESTAMP_6);
    expect(Date.parse(got!.lease_expires_at) - Date.parse(got!.message.claimed_at!)).toBe(300_000);
  });

  it("shows the lease's end and the posting key on the message itself, as readers list it", async () => {
    const ch = await createChannel(url(), owner);
    const [a] = await postAll(ch, ["a"]);
    expect(a).toMatchObject({ author_key_id: owner.split(".")[0], lease_expires_at: null });
    const [got] = (await receive(worker, ch, { lease_seconds: 60 })).body.data;
    const listed = (await listMessages(url(), owner, ch)).data.find((m) => m.id === a!.id) as MessageJson & { lease_expires_at: string | null };
    expect(listed.lease_expires_at).toBe(got!.lease_expires_at);
  });

  it("leases up to max_messages, oldest first, each with a distinct lease token", async () => {
    const ch = await createChannel(url(), owner);
    const posted = await postAll(ch, ["1", "2", "3", "4"]);
    const res = await receive(worker, ch, { max_messages: 3, lease_seconds: 60 });
    expect(res.body.data.map((r) => r.message.id)).toEqual(posted.slice(0, 3).map((m) => m.id));
    expect(new Set(res.body.data.map((r) => r.lease_token)).size).toBe(3);
    const next = await receive(worker, ch, { max_messages: 3 });
    expect(next.body.data.map((r) => r.message.content)).toEqual(["4"]);
  });

  it("does not lease claimed or acknowledged messages", async () => {
    const ch = await createChannel(url(), owner);
    const [a, b, c] = await postAll(ch, ["a", "b", "c"]);
    await rest(url(), "POST", `/v1/messages/${a!.id}/claim`, { key: owner });
    await rest(url(), "POST", `/v1/messages/${b!.id}/claim-with-lease`, { key: owner, body: {} });
    const res = await receive(worker, ch, { max_messages: 10 });
    expect(res.body.data.map((r) => r.message.id)).toEqual([c!.id]);
  });

  it("answers data: [] once the wait ends with no work", async () => {
    const ch = await createChannel(url(), owner);
    const res = await receive(worker, ch, { wait: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], completed: [] });
  });

  it.each([
    [{ max_messages: 0 }, "invalid_max_messages", "max_messages"],
    [{ max_messages: 101 }, "invalid_max_messages", "max_messages"],
    [{ lease_seconds: 29 }, "invalid_lease_seconds", "lease_seconds"],
    [{ lease_seconds: 3601 }, "invalid_lease_seconds", "lease_seconds"],
    [{ wait: -1 }, "invalid_wait", "wait"],
  ])("refuses %j with 422 %s naming the field", async (body, error, field) => {
    const ch = await createChannel(url(), owner);
    const res = await receive(worker, ch, body);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error, field });
  });

  it("refuses a broadcast channel with 409 channel_not_claimable", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    await postAll(ch, ["news"]);
    const res = await receive(worker, ch);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "channel_not_claimable" });
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const res = await receive(worker, "00000000-0000-4000-8000-000000000000");
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "channel_not_found" });
  });

  it("refuses a stranger to a restricted channel as listing does", async () => {
    const ch = await createChannel(url(), owner, { access: "restricted" });
    await postAll(ch, ["secret"]);
    const list = await rest(url(), "GET", `/v1/channels/${ch}/messages`, { key: worker });
    const res = await rest(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body: {} });
    expect(list.status).toBe(403);
    expect([res.status, res.body.error]).toEqual([list.status, list.body.error]);
    expect((await listMessages(url(), owner, ch, "?status=unclaimed")).data).toHaveLength(1);
  });

  it("leases nothing to a member removed while its receive waits", async () => {
    const { owner: chOwner, member, ch } = await restrictedChannelWithMember(url());
    const parked = server.app.bus.subscriptions;
    const waiting = receive(member, ch, { wait: 2 });
    await untilParked(server as TestServer, parked + 1);
    const removed = await rest(url(), "DELETE", `/v1/channels/${ch}/members/${member.split(".")[0]}`, { key: chOwner });
    expect(removed.status).toBe(200);
    await postMessage(url(), chOwner, ch, { content: "not for you" });
    expect((await waiting).body).toEqual({ data: [], completed: [] });
    expect((await listMessages(url(), chOwner, ch, "?status=unclaimed")).data).toHaveLength(1);
  });

  it("receives a message again once its lease lapsed unacknowledged, counting the delivery", async () => {
    const ch = await createChannel(url(), owner);
    const [m] = await postAll(ch, ["retry me"]);
    const first = await receive(worker, ch, { lease_seconds: 30 });
    expect(first.body.data[0]!.message.delivery_count).toBe(1);
    expect((await receive(owner, ch)).body.data).toEqual([]);
    clock.advanceSeconds(31);
    try {
      const again = await receive(owner, ch);
      expect(again.body.data.map((r) => r.message.id)).toEqual([m!.id]);
      expect(again.body.data[0]!.message.delivery_count).toBe(2);
      expect(again.body.data[0]!.lease_token).not.toBe(first.body.data[0]!.lease_token);
    } finally {
      clock.advanceSeconds(-31);
    }
  });

  it("lets heartbeat, release and ack work on a received message", async () => {
    const ch = await createChannel(url(), owner);
    const [m] = await postAll(ch, ["job"]);
    const [got] = (await receive(worker, ch)).body.data;
    const beat = await rest<{ lease_token: string; expires_at: string }>(url(), "POST", `/v1/leases/${got!.lease_token}/heartbeat`, {
      key: worker,
      body: { lease_seconds: 600 },
    });
    expect(beat.status).toBe(200);
    expect(beat.body.lease_token).toBe(got!.lease_token);
    const released = await rest(url(), "POST", `/v1/messages/${m!.id}/release`, { key: worker });
    expect(released.status).toBe(200);
    const [again] = (await receive(worker, ch)).body.data;
    expect(again!.message).toMatchObject({ id: m!.id, delivery_count: 2 });
    const acked = await rest<{ status: string }>(url(), "POST", `/v1/messages/${m!.id}/ack`, { key: worker });
    expect(acked.body.status).toBe("acknowledged");
    expect((await receive(worker, ch)).body.data).toEqual([]);
  });

  it("wakes a waiting receive when a message is posted", async () => {
    const ch = await createChannel(url(), owner);
    const parked = server.app.bus.subscriptions;
    const waiting = receive(worker, ch, { wait: 5 });
    await untilParked(server as TestServer, parked + 1);
    await postAll(ch, ["arrived"]);
    expect((await waiting).body.data.map((r) => r.message.content)).toEqual(["arrived"]);
  });

  it("wakes a waiting receive when a held message is released", async () => {
    const ch = await createChannel(url(), owner);
    const [m] = await postAll(ch, ["held"]);
    expect((await receive(owner, ch)).body.data).toHaveLength(1);
    const parked = server.app.bus.subscriptions;
    const waiting = receive(worker, ch, { wait: 5 });
    await untilParked(server as TestServer, parked + 1);
    await rest(url(), "POST", `/v1/messages/${m!.id}/release`, { key: owner });
    expect((await waiting).body.data.map((r) => r.message.id)).toEqual([m!.id]);
  });

  it("replays the same batch for a repeated Idempotency-Key and leases nothing more", async () => {
    const ch = await createChannel(url(), owner);
    await postAll(ch, ["1", "2", "3"]);
    const headers = { "Idempotency-Key": `receive-${ch}` };
    const first = await receive(worker, ch, { max_messages: 2 }, headers);
    const replay = await receive(worker, ch, { max_messages: 2 }, headers);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("x-idempotent-replay")).toBe("true");
    const batch = (r: typeof first) => r.body.data.map((d) => [d.message.id, d.lease_token]);
    expect(batch(replay)).toEqual(batch(first));
    expect(batch(first)).toHaveLength(2);
    expect((await receive(worker, ch, { max_messages: 10 })).body.data.map((r) => r.message.content)).toEqual(["3"]);
  });

  it("refuses an Idempotency-Key with wait (422 idempotent_wait): the wait would pin a pooled connection", async () => {
    const ch = await createChannel(url(), owner);
    await postAll(ch, ["kept"]);
    const res = await rest<{ error: string; suggestion?: string }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, {
      key: worker,
      body: { wait: 2 },
      headers: { "Idempotency-Key": `receive-wait-${ch}` },
    });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("idempotent_wait");
    expect(res.body.suggestion).toMatch(/wait/);
    // Nothing was leased.
    expect((await receive(worker, ch)).body.data.map((r) => r.message.content)).toEqual(["kept"]);
  });
});

describe("receive completing finished tasks", () => {
  type Completed = { message_id: string; status: string | null; error: { error: string; message: string } | null };
  const receiveCompleting = (key: string, ch: string, body: Record<string, unknown>) =>
    rest<{ data: ReceivedJson[]; completed: Completed[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body });
  const getMessage = (key: string, id: string) => rest<MessageJson>(url(), "GET", `/v1/messages/${id}`, { key });

  it("acknowledges the finished task with its result and leases the next one, in one request", async () => {
    const ch = await createChannel(url(), owner);
    const [a, b] = await postAll(ch, ["a", "b"]);
    await receive(worker, ch);
    const res = await receiveCompleting(worker, ch, { complete: [{ message_id: a!.id, result: "done a" }] });
    expect(res.status).toBe(200);
    expect(res.body.completed).toEqual([{ message_id: a!.id, status: "acknowledged", error: null, cancel_requested: false }]);
    expect(res.body.data.map((d) => d.message.id)).toEqual([b!.id]);
    const done = await getMessage(owner, a!.id);
    expect(done.body).toMatchObject({ result: "done a", acknowledged_by: [{ name: "worker" }] });
  });

  it("answers every completed task on its own, in the order sent, and still receives", async () => {
    const ch = await createChannel(url(), owner);
    const [mine, theirs, next] = await postAll(ch, ["mine", "theirs", "next"]);
    await receive(worker, ch);
    await receive(owner, ch);
    const unknown = randomUUID();
    const res = await receiveCompleting(worker, ch, {
      complete: [{ message_id: mine!.id }, { message_id: unknown }, { message_id: "not-a-uuid" }, { message_id: theirs!.id, result: "stolen" }, { message_id: mine!.id }],
    });
    expect(res.status).toBe(200);
    expect(res.body.completed.map((c) => c.status ?? c.error?.error)).toEqual([
      "acknowledged",
      "message_not_found",
      "message_not_found",
      "forbidden",
      "already_acknowledged",
    ]);
    expect(res.body.data.map((d) => d.message.id)).toEqual([next!.id]);
    expect((await getMessage(owner, theirs!.id)).body.result).toBeNull();
  });

  it("acknowledges nothing when the receive is refused", async () => {
    const ch = await createChannel(url(), owner);
    const [a] = await postAll(ch, ["a"]);
    await receive(worker, ch);
    const bad = await receiveCompleting(worker, ch, { max_messages: 0, complete: [{ message_id: a!.id }] });
    expectError(bad, 422, "invalid_max_messages");
    const broadcast = await createChannel(url(), owner, { mode: "broadcast" });
    expectError(await receiveCompleting(worker, broadcast, { complete: [{ message_id: a!.id }] }), 409, "channel_not_claimable");
    expect((await getMessage(owner, a!.id)).body.acknowledged_by).toEqual([]);
  });

  it("refuses a result over 64 KiB naming its item, acknowledging none", async () => {
    const ch = await createChannel(url(), owner);
    const [a, b] = await postAll(ch, ["a", "b"]);
    await receive(worker, ch, { max_messages: 2 });
    const res = await receiveCompleting(worker, ch, { complete: [{ message_id: a!.id }, { message_id: b!.id, result: "x".repeat(65_537) }] });
    const body = expectError(res, 422, "result_too_large");
    expect(body.message).toMatch(/^complete\[1\]: /);
    expect((await getMessage(owner, a!.id)).body.acknowledged_by).toEqual([]);
  });

  it("refuses more than 100 completed tasks with invalid_batch_size", async () => {
    const ch = await createChannel(url(), owner);
    const complete = Array.from({ length: 101 }, () => ({ message_id: randomUUID() }));
    const body = expectError(await receiveCompleting(worker, ch, { complete }), 422, "invalid_batch_size");
    expect(body.message).toBe("'complete' must hold 0 to 100 items; it holds 101");
  });

  it("can be sent again after a failure: the acknowledged task answers already_acknowledged", async () => {
    const ch = await createChannel(url(), owner);
    const [a] = await postAll(ch, ["a"]);
    await receive(worker, ch);
    const body = { complete: [{ message_id: a!.id, result: "r" }] };
    expect((await receiveCompleting(worker, ch, body)).body.completed[0]!.status).toBe("acknowledged");
    expect((await receiveCompleting(worker, ch, body)).body.completed[0]!.status).toBe("already_acknowledged");
    expect((await getMessage(owner, a!.id)).body.result).toBe("r");
  });

  it("completes over gRPC: one result per task, with the catalog code for a refused one", async () => {
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const ch = await createChannel(url(), owner);
    const [a, b] = await postAll(ch, ["a", "b"]);
    await receive(worker, ch);
    const res = await client.receiveMessages(
      { identifier: ch, complete: [{ messageId: a!.id, result: "grpc" }, { messageId: randomUUID() }] },
      { headers: { "x-api-key": worker } },
    );
    expect(res.completed.map((c) => c.status ?? c.error?.error)).toEqual([AckStatus.ACKNOWLEDGED, "message_not_found"]);
    expect(res.data.map((d) => d.message?.id)).toEqual([b!.id]);
  });
});

describe("delivery_count", () => {
  it("starts at 0 and counts claims and claims with lease", async () => {
    const ch = await createChannel(url(), owner);
    const [m] = await postAll(ch, ["count me"]);
    expect(m!.delivery_count).toBe(0);
    const claimed = await rest<{ message: MessageJson }>(url(), "POST", `/v1/messages/${m!.id}/claim`, { key: worker });
    expect(claimed.body.message.delivery_count).toBe(1);
    await rest(url(), "POST", `/v1/messages/${m!.id}/release`, { key: worker });
    const leased = await rest<{ message: MessageJson }>(url(), "POST", `/v1/messages/${m!.id}/claim-with-lease`, { key: worker, body: {} });
    expect(leased.body.message.delivery_count).toBe(2);
  });
});

describe("delivery_count in history", () => {
  it("keeps the count when a received and released message is retracted", async () => {
    const ch = await createChannel(url(), owner);
    const [m] = await postAll(ch, ["withdrawn"]);
    await receive(worker, ch);
    await rest(url(), "POST", `/v1/messages/${m!.id}/release`, { key: worker });
    expect((await rest(url(), "DELETE", `/v1/messages/${m!.id}`, { key: owner })).status).toBe(200);
    const history = await rest<{ data: MessageJson[] }>(url(), "GET", `/v1/channels/${ch}/history`, { key: owner });
    expect(history.body.data.map((h) => [h.id, h.delivery_count])).toEqual([[m!.id, 1]]);
  });
});

describe("ReceiveMessages over gRPC", () => {
  const client = () => createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
  const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

  it("leases like REST: messages with lease tokens and lease ends, oldest first", async () => {
    const ch = await createChannel(url(), owner);
    const posted = await postAll(ch, ["g1", "g2"]);
    const res = await client().receiveMessages({ identifier: ch, maxMessages: 5, leaseSeconds: 45 }, { headers: { "x-api-key": worker } });
    expect(res.data.map((d) => d.message?.id)).toEqual(posted.map((m) => m.id));
    expect(res.data.every((d) => d.leaseToken.startsWith("lease_") && d.message?.deliveryCount === 1)).toBe(true);
    const d = res.data[0]!;
    expect(Number(d.leaseExpiresAt!.seconds) - Number(d.message!.claimedAt!.seconds)).toBe(45);
  });

  it("replays the same batch for a repeated idempotency-key", async () => {
    const ch = await createChannel(url(), owner);
    await postAll(ch, ["r1", "r2"]);
    const headers = { "x-api-key": worker, "idempotency-key": `grpc-receive-${ch}` };
    const first = await client().receiveMessages({ identifier: ch }, { headers });
    const replay = await client().receiveMessages({ identifier: ch }, { headers });
    const batch = (r: typeof first) => r.data.map((d) => [d.message?.id, d.leaseToken]);
    expect(batch(replay)).toEqual(batch(first));
    expect(batch(first)).toHaveLength(1);
  });

  it("refuses an idempotency-key with wait with InvalidArgument idempotent_wait", async () => {
    const ch = await createChannel(url(), owner);
    const headers = { "x-api-key": worker, "idempotency-key": `grpc-receive-wait-${ch}` };
    const err = await client().receiveMessages({ identifier: ch, wait: 1 }, { headers }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("idempotent_wait");
  });

  it("refuses a broadcast channel with FailedPrecondition channel_not_claimable", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const err = await client().receiveMessages({ identifier: ch }, { headers: { "x-api-key": worker } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(errorCode(err)).toBe("channel_not_claimable");
  });

  it("refuses max_messages out of range with InvalidArgument", async () => {
    const ch = await createChannel(url(), owner);
    const err = await client().receiveMessages({ identifier: ch, maxMessages: 0 }, { headers: { "x-api-key": worker } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("invalid_max_messages");
  });
});

describe("receive under concurrency", () => {
  it("drains 10,000 messages with 32 receivers: each acknowledged exactly once, none leased twice", async () => {
    const ch = await createChannel(url(), owner);
    const total = 10_000;
    // The backlog is written in one call of the write function the post path
    // uses: what is under test is the receivers, not 10,000 posts.
    const seeded = await sql.query<{ message_id: string }>(
      "SELECT message_id FROM agentbus_create_messages($1, $2, $3, $4, $5, $6, $7::jsonb[], $8::jsonb[])",
      [ch, ...[owner.split(".")[0], null, null, null, "task", "{}", "[]"].map((v) => Array.from({ length: total }, () => v))],
    );
    const posted = new Set(seeded.rows.map((r) => r.message_id));
    expect(posted.size).toBe(total);
    const keys = await Promise.all(Array.from({ length: 32 }, (_, i) => mintKey(url(), `receiver-${i}`)));
    const leasedTo = new Map<string, number>();
    const doubleLeased: string[] = [];
    const acked = new Map<string, number>();
    await Promise.all(
      keys.map(async (key, receiver) => {
        for (;;) {
          const res = await receive(key, ch, { max_messages: 1 + ((receiver + leasedTo.size) % 10) });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          if (res.body.data.length === 0) return;
          for (const { message } of res.body.data) {
            if (leasedTo.has(message.id)) doubleLeased.push(message.id);
            leasedTo.set(message.id, receiver);
          }
          // Half the receivers acknowledge one by one, half in one batch per receive.
          const settled =
            receiver % 2 === 0
              ? await Promise.all(
                  res.body.data.map(async ({ message }) => ({
                    message_id: message.id,
                    status: (await rest<{ status: string }>(url(), "POST", `/v1/messages/${message.id}/ack`, { key })).body.status,
                  })),
                )
              : (await rest<{ results: Array<{ message_id: string; status: string | null }> }>(url(), "POST", "/v1/messages:batchAck", {
                  key,
                  body: { message_ids: res.body.data.map((r) => r.message.id) },
                })).body.results;
          for (const { message_id, status } of settled) {
            if (status === "acknowledged") acked.set(message_id, (acked.get(message_id) ?? 0) + 1);
          }
        }
      }),
    );
    expect(doubleLeased).toEqual([]);
    expect(leasedTo.size).toBe(total);
    expect([...leasedTo.keys()].every((id) => posted.has(id))).toBe(true);
    expect(acked.size).toBe(total);
    expect([...acked.values()].every((n) => n === 1)).toBe(true);
    expect((await listMessages(url(), owner, ch, "?since=0&status=unclaimed")).data).toEqual([]);
    const stats = await rest<{ ready: number; in_flight: number; acknowledged: number }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(stats.body).toMatchObject({ ready: 0, in_flight: 0, acknowledged: total });
  }, 120_000);
});

describe("receive across service processes", () => {
  it("wakes a receive waiting on one process when another process posts", async () => {
    const a = await startTestServer();
    const b = await startTestServer({ DATABASE_URL: a.databaseUrl });
    try {
      const key = await mintKey(a.url);
      const ch = await createChannel(a.url, key);
      const waiting = rest<{ data: ReceivedJson[] }>(b.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { wait: 5 } });
      await untilParked(b, 1);
      await postMessage(a.url, key, ch, { content: "from a" });
      expect((await waiting).body.data.map((r) => r.message.content)).toEqual(["from a"]);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
