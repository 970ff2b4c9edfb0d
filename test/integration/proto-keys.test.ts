/**
 * docs/decisions.md#validate-at-decode: a JSON object key "__proto__" (in
 * session state, message, claim and acknowledgement metadata, actor
 * metadata, a metadata_schema; at any depth) is refused with 422 and the
 * field's code, naming its path, on every protocol, and nothing of the
 * request is applied. It used to vanish silently: protobuf-es, which decodes
 * every protocol's request, drops it. "constructor" and "prototype" are
 * ordinary keys, stored and returned as sent.
 */
import { fromBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { gzipSync } from "node:zlib";
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { CreateMessageRequestSchema, MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { CreateSessionRequestSchema, SessionService, UpdateSessionRequestSchema } from "../../gen/agentbus/v1/session_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { grpcFrame, RawGrpcClient } from "../support/grpc-raw.js";
import { listAllIds } from "../support/load.js";
import { expectError } from "../support/membership.js";
import { PROTO_STAND_IN, withProtoKey } from "../support/proto-key.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
let key: string;
let channel: string;

beforeAll(async () => {
  key = await mintKey(server.url);
  channel = await createChannel(server.url, key, { mode: "claimable" });
});

interface SessionJson {
  id: string;
  version: number;
  state: Record<string, unknown>;
}

async function newSession(state: Record<string, unknown> = { step: 1 }): Promise<SessionJson> {
  const res = await rest<SessionJson>(server.url, "POST", "/v1/sessions", { key, body: { name: "s", state } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** A REST call with JSON text as written (an object literal cannot hold a "__proto__" key). */
const raw = (method: string, path: string, json: string) =>
  rest<{ error: string; field?: string; suggestion?: string }>(server.url, method, path, { key, rawBody: json, headers: { "Content-Type": "application/json" } });

function expectProtoKeyRefusal(res: Awaited<ReturnType<typeof raw>>, field: string) {
  expect(expectError(res, 422, "invalid_object").field).toBe(field);
}

describe("a __proto__ key over REST", () => {
  it("in session state is refused (422, naming it) on create and on change, and the session is unchanged", async () => {
    const before = await listSessionIds();
    expectProtoKeyRefusal(await raw("POST", "/v1/sessions", '{"name":"s","state":{"__proto__":{"admin":true}}}'), "state.__proto__");
    expect(await listSessionIds()).toEqual(before);
    const session = await newSession();
    expectProtoKeyRefusal(await raw("PATCH", `/v1/sessions/${session.id}`, '{"state":{"plan":{"__proto__":1},"step":2}}'), "state.plan.__proto__");
    const after = await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key });
    expect(after.body).toMatchObject({ version: 1, state: { step: 1 } });
  });

  it("in message metadata is refused and no message is stored", async () => {
    const before = await listAllIds(server.url, key, channel);
    expectProtoKeyRefusal(await raw("POST", `/v1/channels/${channel}/messages`, '{"content":"x","metadata":{"tags":[{"__proto__":"x"}]}}'), "metadata.tags[0].__proto__");
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });

  it.each([
    ["claim metadata", async () => `/v1/messages/${(await postMessage(server.url, key, channel, { content: "t" })).id}/claim`, '{"metadata":{"__proto__":1}}', "metadata.__proto__"],
    ["a metadata_schema", async () => "/v1/channels", '{"name":"schema","metadata_schema":{"properties":{"__proto__":{"type":"string"}}}}', "metadata_schema.properties.__proto__"],
    ["actor metadata", async () => "/v1/actors", '{"name":"bot-proto","metadata":{"__proto__":{}}}', "metadata.__proto__"],
  ])("in %s is refused", async (_what, path, json, field) => {
    expectProtoKeyRefusal(await raw("POST", await path(), json), field);
  });
});

async function listSessionIds(): Promise<string[]> {
  return (await rest<{ data: SessionJson[] }>(server.url, "GET", "/v1/sessions?limit=100", { key })).body.data.map((s) => s.id);
}

describe("a __proto__ key over gRPC, gRPC-Web and Connect", () => {
  const grpcCall = async (path: string, frame: Buffer, headers: Record<string, string> = {}) => {
    const client = new RawGrpcClient(server.url);
    try {
      return await client.call(path, frame, { "x-api-key": key, ...headers });
    } finally {
      client.close();
    }
  };
  const expectGrpcRefusal = (answer: Awaited<ReturnType<typeof grpcCall>>, field: string) => {
    expect(answer.grpcStatus, answer.grpcMessage).toBe(Code.InvalidArgument);
    expect(answer.detail?.error).toBe("invalid_object");
    expect(answer.detail?.details).toMatchObject({ field });
  };
  const bytes = <D extends DescMessage>(desc: D, init: MessageInitShape<D>) => withProtoKey(desc, init);

  it("in session state is refused over gRPC, and the session is unchanged", async () => {
    const before = await listSessionIds();
    const create = bytes(CreateSessionRequestSchema, { name: "s", state: { [PROTO_STAND_IN]: { admin: true } } });
    expectGrpcRefusal(await grpcCall("/agentbus.v1.SessionService/CreateSession", grpcFrame(create)), "state.__proto__");
    expect(await listSessionIds()).toEqual(before);
    const session = await newSession();
    const update = bytes(UpdateSessionRequestSchema, { id: session.id, state: { step: 2, nested: { [PROTO_STAND_IN]: 1 } } });
    expectGrpcRefusal(await grpcCall("/agentbus.v1.SessionService/UpdateSession", grpcFrame(update)), "state.nested.__proto__");
    expect((await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key })).body).toMatchObject({ version: 1, state: { step: 1 } });
  });

  it("in message metadata is refused over gRPC, also in a gzip-compressed frame, and nothing is stored", async () => {
    const before = await listAllIds(server.url, key, channel);
    const message = bytes(CreateMessageRequestSchema, { identifier: channel, content: "x", metadata: { list: [{ [PROTO_STAND_IN]: "x" }] } });
    expectGrpcRefusal(await grpcCall("/agentbus.v1.MessageService/CreateMessage", grpcFrame(message)), "metadata.list[0].__proto__");
    const compressed = grpcFrame(gzipSync(message));
    compressed[0] = 1; // the frame's compressed flag
    expectGrpcRefusal(await grpcCall("/agentbus.v1.MessageService/CreateMessage", compressed, { "grpc-encoding": "gzip" }), "metadata.list[0].__proto__");
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });

  it("in message metadata is refused over gRPC-Web", async () => {
    const message = bytes(CreateMessageRequestSchema, { identifier: channel, content: "x", metadata: { [PROTO_STAND_IN]: 1 } });
    const res = await fetch(`${server.url}/agentbus.v1.MessageService/CreateMessage`, {
      method: "POST",
      headers: { "Content-Type": "application/grpc-web+proto", "X-API-Key": key },
      body: grpcFrame(message),
    });
    const body = Buffer.from(await res.arrayBuffer());
    const error = findTrailerError(trailerParse(body.subarray(5)));
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error?.findDetails(ErrorDetailSchema)[0]?.error).toBe("invalid_object");
  });

  /** A Connect unary call; answers the HTTP status and the catalog code of the error. */
  async function connectCall(procedure: string, contentType: string, body: string | Buffer) {
    const res = await fetch(`${server.url}/agentbus.v1.${procedure}`, { method: "POST", headers: { "Content-Type": contentType, "X-API-Key": key }, body });
    const json = (await res.json()) as { code: string; details?: Array<{ type: string; value: string }> };
    const detail = json.details?.find((d) => d.type === ErrorDetailSchema.typeName);
    return { status: res.status, code: json.code, error: detail && fromBinary(ErrorDetailSchema, Buffer.from(detail.value, "base64")).error };
  }

  it("in session state and message metadata is refused over Connect JSON and Connect binary", async () => {
    const refused = { status: 400, code: "invalid_argument", error: "invalid_object" };
    expect(await connectCall("SessionService/CreateSession", "application/json", '{"name":"s","state":{"__proto__":1}}')).toEqual(refused);
    expect(await connectCall("MessageService/CreateMessage", "application/json", `{"identifier":"${channel}","content":"x","metadata":{"a":{"__proto__":{}}}}`)).toEqual(refused);
    const message = bytes(CreateMessageRequestSchema, { identifier: channel, content: "x", metadata: { [PROTO_STAND_IN]: 1 } });
    expect(await connectCall("MessageService/CreateMessage", "application/proto", message)).toEqual(refused);
  });
});

describe("constructor and prototype are ordinary keys", () => {
  const ordinary = { constructor: { prototype: "p" }, prototype: [1], hasOwnProperty: null, toString: "s" };

  it("are stored and returned as sent in session state and message metadata over REST", async () => {
    const session = await newSession(ordinary);
    expect(session.state).toEqual(ordinary);
    const changed = await rest<SessionJson>(server.url, "PATCH", `/v1/sessions/${session.id}`, { key, body: { state: { constructor: 2 } } });
    expect(changed.body.state).toEqual({ ...ordinary, constructor: 2 });
    const message = await postMessage(server.url, key, channel, { content: "x", metadata: ordinary });
    expect((await rest<{ metadata: unknown }>(server.url, "GET", `/v1/messages/${message.id}`, { key })).body.metadata).toEqual(ordinary);
  });

  it("are stored and returned as sent in session state and message metadata over gRPC", async () => {
    const transport = createGrpcTransport({ baseUrl: server.url });
    const headers = { "x-api-key": key };
    const session = await createClient(SessionService, transport).createSession({ name: "g", state: ordinary }, { headers });
    expect(session.state).toEqual(ordinary);
    const messages = createClient(MessageService, transport);
    const posted = await messages.createMessage({ identifier: channel, content: "x", metadata: ordinary }, { headers });
    expect((await messages.getMessage({ messageId: posted.message!.id }, { headers })).metadata).toEqual(ordinary);
  });
});
