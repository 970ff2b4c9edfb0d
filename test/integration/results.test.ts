/**
 * Results (docs/decisions.md#results) over the real server: an ack carries
 * the work's result, GET /v1/messages/{id} reads it back (live or archived)
 * and long-polls for the acknowledgement, so a producer posts a task and
 * awaits its result with two calls.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { AckStatus, MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { Db } from "../../src/store/db.js";
import { purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { eventually } from "../support/eventually.js";
import { createChannel, postMessage, type MessageJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

interface AckJson {
  status: string;
  message: MessageJson;
}

interface ErrorJson {
  error: string;
  [detail: string]: unknown;
}

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
let producer: string;
let worker: string;
let db: Db;

beforeAll(async () => {
  producer = await mintKey(server.url, "producer");
  worker = await mintKey(server.url, "worker");
  db = new Db(server.app.pool);
});
afterEach(() => clock.reset());

const getMessage = (key: string, id: string, query = "") => rest<MessageJson>(server.url, "GET", `/v1/messages/${id}${query}`, { key });
const ack = (key: string, id: string, body: Record<string, unknown> = {}) => rest<AckJson>(server.url, "POST", `/v1/messages/${id}/ack`, { key, body });
const claim = (key: string, id: string) => rest(server.url, "POST", `/v1/messages/${id}/claim`, { key, body: {} });

/** A task in a claimable channel of the producer's, claimed by the worker. */
async function claimedTask(body: Record<string, unknown> = {}): Promise<{ ch: string; task: MessageJson }> {
  const ch = await createChannel(server.url, producer, body);
  const task = await postMessage(server.url, producer, ch, { content: "resize image 42" });
  expect((await claim(worker, task.id)).status).toBe(200);
  return { ch, task };
}

describe("POST /v1/messages/{id}/ack with a result", () => {
  it("stores the result; GET shows it with acknowledged_by and the ack's metadata", async () => {
    const { task } = await claimedTask();
    const acked = await ack(worker, task.id, { result: "resized to 640x480", metadata: { took_ms: 120 } });
    expect(acked.status).toBe(200);
    expect(acked.body.status).toBe("acknowledged");
    expect(acked.body.message.result).toBe("resized to 640x480");

    const read = await getMessage(producer, task.id);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: task.id, content: "resize image 42", result: "resized to 640x480", active: true });
    expect(read.body.acknowledged_by).toEqual([{ id: expect.any(String), name: "worker", occurred_at: expect.any(String), metadata: { took_ms: 120 } }]);
  });

  it("refuses a result over 64 KiB of UTF-8 with 422 result_too_large and stores nothing", async () => {
    const { task } = await claimedTask();
    // 32 769 characters, 65 538 bytes: the limit counts bytes.
    const res = await rest<ErrorJson>(server.url, "POST", `/v1/messages/${task.id}/ack`, { key: worker, body: { result: "é".repeat(32_769) } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "result_too_large", max_result_bytes: 65_536, received_bytes: 65_538 });
    const read = await getMessage(producer, task.id);
    expect([read.body.result, read.body.acknowledged_by]).toEqual([null, []]);
  });

  it("accepts a result of exactly 64 KiB", async () => {
    const { task } = await claimedTask();
    const result = "x".repeat(65_536);
    expect((await ack(worker, task.id, { result })).body.status).toBe("acknowledged");
    expect((await getMessage(producer, task.id)).body.result).toBe(result);
  });

  it("refuses ack metadata over 16 KiB with 422 metadata_too_large", async () => {
    const { task } = await claimedTask();
    const res = await rest<ErrorJson>(server.url, "POST", `/v1/messages/${task.id}/ack`, { key: worker, body: { metadata: { blob: "x".repeat(17_000) } } });
    expect([res.status, res.body.error]).toEqual([422, "metadata_too_large"]);
  });

  it("keeps the first result when the same actor acks again with another one", async () => {
    const { task } = await claimedTask();
    await ack(worker, task.id, { result: "first", metadata: { try: 1 } });
    const replay = await ack(worker, task.id, { result: "second", metadata: { try: 2 } });
    expect(replay.status).toBe(200);
    expect(replay.body.status).toBe("already_acknowledged");
    expect(replay.body.message.result).toBe("first");
    expect(replay.body.message.acknowledged_by.map((a) => a.metadata)).toEqual([{ try: 1 }]);
  });

  it("refuses a result from a key that does not hold the claim with 403 forbidden, and stores nothing", async () => {
    const { task } = await claimedTask();
    const res = await rest<ErrorJson>(server.url, "POST", `/v1/messages/${task.id}/ack`, { key: producer, body: { result: "not mine to give" } });
    expect([res.status, res.body.error]).toEqual([403, "forbidden"]);
    expect((await getMessage(producer, task.id)).body.acknowledged_by).toEqual([]);
  });

  it("refuses a result for an unclaimed message of a claimable channel with 409 not_claimed; a plain ack still works", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "open work" });
    const res = await rest<ErrorJson>(server.url, "POST", `/v1/messages/${task.id}/ack`, { key: worker, body: { result: "done" } });
    expect([res.status, res.body.error]).toEqual([409, "not_claimed"]);
    expect((await ack(worker, task.id)).body.status).toBe("acknowledged");
  });

  it("keeps the first result in a broadcast channel and refuses a later one with 409 result_already_set", async () => {
    const ch = await createChannel(server.url, producer, { mode: "broadcast" });
    const question = await postMessage(server.url, producer, ch, { content: "who is on call?" });
    expect((await ack(worker, question.id, { result: "worker is" })).body.status).toBe("acknowledged");
    const third = await mintKey(server.url);
    const late = await rest<ErrorJson>(server.url, "POST", `/v1/messages/${question.id}/ack`, { key: third, body: { result: "me too" } });
    expect([late.status, late.body.error]).toEqual([409, "result_already_set"]);
    expect((await ack(third, question.id)).body.status).toBe("acknowledged");
    const read = await getMessage(producer, question.id);
    expect(read.body.result).toBe("worker is");
    expect(read.body.acknowledged_by).toHaveLength(2);
  });

  it("stores exactly one of many concurrent results in a broadcast channel", async () => {
    const ch = await createChannel(server.url, producer, { mode: "broadcast" });
    const question = await postMessage(server.url, producer, ch, { content: "race" });
    const keys = await Promise.all(Array.from({ length: 8 }, () => mintKey(server.url)));
    const answers = await Promise.all(keys.map((key, i) => ack(key, question.id, { result: `answer ${i}` })));
    const winners = answers.filter((a) => a.status === 200);
    expect(winners).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(7);
    expect((await getMessage(producer, question.id)).body.result).toBe(winners[0]!.body.message.result);
  });
});

describe("GET /v1/messages/{id}", () => {
  it("answers a message not yet acknowledged with result null", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "pending" });
    const read = await getMessage(worker, task.id);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: task.id, result: null, acknowledged_by: [], active: true });
  });

  it("answers 404 message_not_found for an unknown id", async () => {
    const res = await rest<ErrorJson>(server.url, "GET", `/v1/messages/00000000-0000-4000-8000-000000000000`, { key: producer });
    expect([res.status, res.body.error]).toEqual([404, "message_not_found"]);
    const malformed = await rest<ErrorJson>(server.url, "GET", `/v1/messages/not-a-uuid`, { key: producer });
    expect([malformed.status, malformed.body.error]).toEqual([404, "message_not_found"]);
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied, as listing does", async () => {
    const ch = await createChannel(server.url, producer, { access: "restricted" });
    const task = await postMessage(server.url, producer, ch, { content: "private" });
    const stranger = await mintKey(server.url);
    const read = await rest<ErrorJson>(server.url, "GET", `/v1/messages/${task.id}`, { key: stranger });
    const list = await rest<ErrorJson>(server.url, "GET", `/v1/channels/${ch}/messages`, { key: stranger });
    expect([read.status, read.body.error]).toEqual([list.status, list.body.error]);
    expect(read.body.error).toBe("channel_access_denied");
  });

  it("refuses a negative wait with 422 invalid_wait", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "x" });
    const res = await rest<ErrorJson>(server.url, "GET", `/v1/messages/${task.id}?wait=-1`, { key: producer });
    expect([res.status, res.body.error]).toEqual([422, "invalid_wait"]);
  });

  it("with wait, returns the result once a worker acknowledges: post and await in two calls", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "transcode clip 7" });
    const parkedBefore = server.app.bus.subscriptions;
    const awaited = getMessage(producer, task.id, "?wait=20");
    await eventually(async () => server.app.bus.subscriptions > parkedBefore);

    expect((await claim(worker, task.id)).status).toBe(200);
    expect((await ack(worker, task.id, { result: "clip-7.mp4" })).status).toBe(200);

    const done = await awaited;
    expect(done.status).toBe(200);
    expect(done.body.result).toBe("clip-7.mp4");
    expect(done.body.acknowledged_by.map((a) => a.name)).toEqual(["worker"]);
  });

  it("with wait, answers at once for a message already acknowledged", async () => {
    const { task } = await claimedTask();
    await ack(worker, task.id, { result: "already done" });
    // The default test timeout is far shorter than this wait.
    const read = await getMessage(producer, task.id, "?wait=60");
    expect(read.body.result).toBe("already done");
  });

  it("returns the message unacknowledged, without result, when the wait ends first", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "nobody home" });
    const read = await getMessage(producer, task.id, "?wait=1");
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: task.id, result: null, acknowledged_by: [], active: true });
  });

  it("still returns the result after the message expired and was archived to history", async () => {
    const { ch, task } = await claimedTask({ ttl_seconds: 300 });
    await ack(worker, task.id, { result: "kept", metadata: { n: 1 } });
    clock.advanceSeconds(301);
    expect((await purge(db, clock.now())).archivedMessages).toBeGreaterThanOrEqual(1);

    const read = await getMessage(producer, task.id, "?wait=60");
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: task.id, result: "kept", active: false });
    expect(read.body.acknowledged_by.map((a) => a.metadata)).toEqual([{ n: 1 }]);
    const history = await rest<{ data: MessageJson[] }>(server.url, "GET", `/v1/channels/${ch}/history`, { key: producer });
    expect(history.body.data.find((m) => m.id === task.id)?.result).toBe("kept");
  });

  it("returns a retracted message from history, inactive", async () => {
    const ch = await createChannel(server.url, producer);
    const task = await postMessage(server.url, producer, ch, { content: "withdrawn" });
    expect((await rest(server.url, "DELETE", `/v1/messages/${task.id}`, { key: producer })).status).toBe(200);
    const read = await getMessage(worker, task.id);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: task.id, content: "withdrawn", result: null, active: false });
  });
});

describe("results over gRPC", () => {
  const client = () => createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
  const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

  it("acks with a result and reads it back with GetMessage, waiting for the ack", async () => {
    const ch = await createChannel(server.url, producer);
    const created = await client().createMessage({ identifier: ch, content: "over grpc" }, { headers: { "x-api-key": producer } });
    const id = created.message!.id;
    const parkedBefore = server.app.bus.subscriptions;
    const awaited = client().getMessage({ messageId: id, wait: 20 }, { headers: { "x-api-key": producer } });
    await eventually(async () => server.app.bus.subscriptions > parkedBefore);
    await client().claimMessage({ messageId: id }, { headers: { "x-api-key": worker } });
    const acked = await client().ackMessage({ messageId: id, result: "42", metadata: { ok: true } }, { headers: { "x-api-key": worker } });
    expect(acked.status).toBe(AckStatus.ACKNOWLEDGED);
    const message = await awaited;
    expect(message.result).toBe("42");
    expect(message.acknowledgedBy.map((a) => [a.name, a.metadata])).toEqual([["worker", { ok: true }]]);
  });

  it("reports an unknown message as NotFound and a result over 64 KiB as InvalidArgument", async () => {
    const missing = await client()
      .getMessage({ messageId: "00000000-0000-4000-8000-000000000000" }, { headers: { "x-api-key": producer } })
      .catch((e: unknown) => e);
    expect([ConnectError.from(missing).code, errorCode(missing)]).toEqual([Code.NotFound, "message_not_found"]);
    const { task } = await claimedTask();
    const tooLarge = await client()
      .ackMessage({ messageId: task.id, result: "x".repeat(65_537) }, { headers: { "x-api-key": worker } })
      .catch((e: unknown) => e);
    expect([ConnectError.from(tooLarge).code, errorCode(tooLarge)]).toEqual([Code.InvalidArgument, "result_too_large"]);
  });
});
