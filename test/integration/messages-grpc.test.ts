/** The message flow over gRPC: the same handlers, rules and error codes as REST. */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { AckStatus, ClaimStatus, MessageService, MessageStatus } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel } from "../support/fixtures.js";
import { mintKey, useTestServer } from "../support/server.js";

const server = useTestServer();

const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

describe("MessageService over gRPC", () => {
  it("posts, lists by cursor, claims and acks", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const headers = { "x-api-key": key };
    const created = await client.createMessage({ identifier: ch, content: "over grpc", metadata: { n: 1 } }, { headers });
    expect(created.message?.content).toBe("over grpc");
    expect(created.message?.metadata).toEqual({ n: 1 });
    const page = await client.listMessages({ identifier: ch, since: "0", status: MessageStatus.UNCLAIMED }, { headers });
    expect(page.data.map((m) => m.id)).toEqual([created.message!.id]);
    expect(page.nextCursor).toBe(created.nextCursor);
    const claim = await client.claimMessage({ messageId: created.message!.id }, { headers });
    expect(claim.status).toBe(ClaimStatus.CLAIMED);
    const ack = await client.ackMessage({ messageId: created.message!.id }, { headers });
    expect(ack.status).toBe(AckStatus.ACKNOWLEDGED);
    expect(ack.message?.acknowledgedBy).toHaveLength(1);
  });

  it("reports a lost claim race as FailedPrecondition with error already_claimed", async () => {
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const created = await client.createMessage({ identifier: ch, content: "task" }, { headers: { "x-api-key": owner } });
    await client.claimMessage({ messageId: created.message!.id }, { headers: { "x-api-key": owner } });
    const rival = await mintKey(server.url);
    const err = await client.claimMessage({ messageId: created.message!.id }, { headers: { "x-api-key": rival } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(errorCode(err)).toBe("already_claimed");
  });

  it("reports validation errors as InvalidArgument with the same codes as REST", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const err = await client.listMessages({ identifier: ch, limit: 500 }, { headers: { "x-api-key": key } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("invalid_limit");
  });
});
