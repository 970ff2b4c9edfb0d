/**
 * An acknowledged message is finished (docs/decisions.md#claims): it is never
 * handed out again, whoever acknowledged it and whether or not it was claimed
 * first. Releasing it is refused (409 already_acknowledged), a claim of it is
 * refused, a receive and the open-work listing pass over it, and the queue's
 * stats agree. Over REST and gRPC, against the real server and PostgreSQL.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, listMessages, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let owner: string;
let worker: string;
let bystander: string;
beforeAll(async () => {
  owner = await mintKey(url(), "final-owner");
  worker = await mintKey(url(), "final-worker");
  bystander = await mintKey(url(), "final-bystander");
});

const receive = (key: string, ch: string, body: Record<string, unknown> = {}) =>
  rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body });
const ack = (key: string, id: string, body: Record<string, unknown> = {}) => rest(url(), "POST", `/v1/messages/${id}/ack`, { key, body });
const release = (key: string, id: string) => rest(url(), "POST", `/v1/messages/${id}/release`, { key, body: {} });
const stats = (ch: string) => rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });

async function receivedTask(): Promise<{ ch: string; id: string }> {
  const ch = await createChannel(url(), owner);
  const { id } = await postMessage(url(), owner, ch, { content: "work" });
  expect((await receive(worker, ch)).body.data.map((r) => r.message.id)).toEqual([id]);
  return { ch, id };
}

describe("release after ack", () => {
  it("is refused with 409 already_acknowledged, and the message is never received again", async () => {
    const { ch, id } = await receivedTask();
    expect((await ack(worker, id, { result: "done" })).status).toBe(200);

    const res = await release(worker, id);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "already_acknowledged", suggestion: expect.any(String) });
    expect((await receive(worker, ch)).body.data).toEqual([]);
    const got = await rest<{ delivery_count: number; result: string }>(url(), "GET", `/v1/messages/${id}`, { key: owner });
    expect(got.body).toMatchObject({ delivery_count: 1, result: "done" });
  });

  it("is refused per item in batchRelease after batchAck", async () => {
    const ch = await createChannel(url(), owner);
    const ids = [(await postMessage(url(), owner, ch, { content: "a" })).id, (await postMessage(url(), owner, ch, { content: "b" })).id];
    expect((await receive(worker, ch, { max_messages: 2 })).body.data).toHaveLength(2);
    expect((await rest(url(), "POST", "/v1/messages:batchAck", { key: worker, body: { message_ids: ids } })).status).toBe(200);

    const res = await rest<{ results: Array<{ message_id: string; error: { error: string } | null }> }>(url(), "POST", "/v1/messages:batchRelease", {
      key: worker,
      body: { message_ids: ids },
    });
    expect(res.status).toBe(200);
    expect(res.body.results.map((r) => r.error?.error)).toEqual(["already_acknowledged", "already_acknowledged"]);
    expect((await receive(worker, ch, { max_messages: 2 })).body.data).toEqual([]);
  });

  it("leaves claim_to_ack_p50_ms what the one claim and ack took, never negative", async () => {
    const { ch, id } = await receivedTask();
    await ack(worker, id);
    await release(worker, id);
    await receive(worker, ch);
    const body = (await stats(ch)).body;
    expect(body).toMatchObject({ acknowledged: 1, ready: 0, in_flight: 0 });
    expect(body.claim_to_ack_p50_ms).toBeGreaterThanOrEqual(0);
  });

  it("is refused over gRPC with FailedPrecondition and the already_acknowledged detail", async () => {
    const { id } = await receivedTask();
    const messages = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const headers = { "x-api-key": worker };
    await messages.ackMessage({ messageId: id }, { headers });
    const err = await messages.releaseMessage({ messageId: id }, { headers }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("already_acknowledged");
  });
});

describe("an unclaimed message a bystander acknowledged, in a claimable channel", () => {
  async function acknowledgedUnclaimed(): Promise<{ ch: string; id: string }> {
    const ch = await createChannel(url(), owner);
    const { id } = await postMessage(url(), owner, ch, { content: "work" });
    expect((await ack(bystander, id)).status).toBe(200);
    return { ch, id };
  }

  it("is not received", async () => {
    const { ch } = await acknowledgedUnclaimed();
    expect((await receive(worker, ch, { max_messages: 10 })).body.data).toEqual([]);
  });

  it("is not listed as unclaimed work, and is listed with everything", async () => {
    const { ch, id } = await acknowledgedUnclaimed();
    expect((await listMessages(url(), worker, ch, "?status=unclaimed")).data).toEqual([]);
    expect((await listMessages(url(), worker, ch)).data.map((m) => m.id)).toEqual([id]);
  });

  it("refuses a claim and a claim with lease with 409 already_acknowledged", async () => {
    const { id } = await acknowledgedUnclaimed();
    for (const path of ["claim", "claim-with-lease"]) {
      const res = await rest(url(), "POST", `/v1/messages/${id}/${path}`, { key: worker, body: {} });
      expect(res.status, path).toBe(409);
      expect(res.body).toMatchObject({ error: "already_acknowledged" });
    }
  });

  it("counts as acknowledged in the stats, as receive treats it", async () => {
    const { ch } = await acknowledgedUnclaimed();
    expect((await stats(ch)).body).toMatchObject({ ready: 0, acknowledged: 1, in_flight: 0 });
  });

  it("keeps a broadcast channel's unacknowledged listing as it was: there an ack is the reader's own", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const { id } = await postMessage(url(), owner, ch, { content: "news" });
    await ack(bystander, id);
    expect((await listMessages(url(), worker, ch, "?status=unclaimed")).data.map((m) => m.id)).toEqual([id]);
  });
});
