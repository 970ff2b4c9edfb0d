/**
 * Text PostgreSQL cannot store (an unpaired UTF-16 surrogate, NUL) and numbers
 * JSON cannot carry (1e999 overflows to Infinity) are refused at decode time
 * with 422 and a code naming the problem, over REST, gRPC and Connect JSON
 * alike, and nothing of the request is stored.
 */
import { fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { beforeAll, describe, expect, it } from "vitest";
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService, type CreateMessageRequestSchema } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { grpcFrame, RawGrpcClient } from "../support/grpc-raw.js";
import { listAllIds } from "../support/load.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
let key: string;
let channel: string;

beforeAll(async () => {
  key = await mintKey(server.url);
  channel = await createChannel(server.url, key, { mode: "claimable" });
});

/** JSON text as a client may send it: escapes JSON.stringify would never write. */
const BAD_JSON_VALUES = [
  { name: "an unpaired surrogate", json: '"a\\ud800b"', text: true },
  { name: "a reversed surrogate pair", json: '"\\udc00\\ud800"', text: true },
  { name: "NUL", json: '"a\\u0000b"', text: true },
  { name: "1e999", json: "1e999", text: false },
  { name: "-1e999", json: "-1e999", text: false },
] as const;
const BAD_TEXT = BAD_JSON_VALUES.filter((v) => v.text);

async function post(path: string, rawBody: string) {
  return rest<{ error: string; message: string; suggestion?: string; field?: string }>(server.url, "POST", path, {
    key,
    rawBody,
    headers: { "Content-Type": "application/json" },
  });
}

function expect422(res: { status: number; body: { error: string; suggestion?: string; field?: string } }, code: string, field: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(422);
  expect(res.body.error).toBe(code);
  expect(res.body.field).toBe(field);
  expect(res.body.suggestion).toBeTruthy();
}

describe("unstorable strings and non-finite numbers over REST", () => {
  it.each(BAD_JSON_VALUES)("message metadata with $name is refused and no message is stored", async ({ json }) => {
    const before = await listAllIds(server.url, key, channel);
    expect422(await post(`/v1/channels/${channel}/messages`, `{"content":"x","metadata":{"a":{"b":[1,${json}]}}}`), "invalid_object", "metadata.a.b[1]");
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });

  it("a message metadata key with an unpaired surrogate or NUL is refused", async () => {
    expect422(await post(`/v1/channels/${channel}/messages`, '{"content":"x","metadata":{"k\\ud800":1}}'), "invalid_object", "metadata.k\\ud800");
    expect422(await post(`/v1/channels/${channel}/messages`, '{"content":"x","metadata":{"k\\u0000":1}}'), "invalid_object", "metadata.k\\u0000");
  });

  it.each(BAD_TEXT)("message content with $name is refused", async ({ json }) => {
    expect422(await post(`/v1/channels/${channel}/messages`, `{"content":${json}}`), "invalid_string", "content");
  });

  it.each(BAD_TEXT)("a channel name with $name is refused", async ({ json }) => {
    expect422(await post("/v1/channels", `{"name":${json}}`), "invalid_string", "name");
  });

  it.each(BAD_JSON_VALUES)("a metadata_schema with $name is refused", async ({ json }) => {
    expect422(await post("/v1/channels", `{"name":"s","metadata_schema":{"type":"object","properties":{"a":{"const":${json}}}}}`), "invalid_object", "metadata_schema.properties.a.const");
  });

  it.each(BAD_JSON_VALUES)("actor metadata with $name is refused", async ({ json }) => {
    expect422(await post("/v1/actors", `{"name":"bot-${Math.random().toString(36).slice(2, 8)}","metadata":{"v":${json}}}`), "invalid_object", "metadata.v");
  });

  it.each(BAD_JSON_VALUES)("claim metadata with $name is refused and the message stays unclaimed", async ({ json }) => {
    const message = await postMessage(server.url, key, channel, { content: "task" });
    expect422(await post(`/v1/messages/${message.id}/claim`, `{"metadata":{"note":${json}}}`), "invalid_object", "metadata.note");
    const after = await rest<{ claimed_by: unknown }>(server.url, "GET", `/v1/messages/${message.id}`, { key });
    expect(after.body.claimed_by ?? null).toBeNull();
  });

  it("a NUL in a path value or a query parameter is refused", async () => {
    expect422(await rest(server.url, "GET", `/v1/channels/a%00b/messages`, { key }) as never, "invalid_string", "identifier");
    expect422(await rest(server.url, "GET", `/v1/channels/${channel}/messages?since=%00`, { key }) as never, "invalid_since", "since");
  });
});

const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

async function rejected(call: Promise<unknown>): Promise<ConnectError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the call should have failed").toBeDefined();
  return ConnectError.from(err);
}

describe("unstorable strings over gRPC", () => {
  // Protobuf binary cannot carry an unpaired surrogate (UTF-8 has none; see the malformed
  // protobuf tests), but NUL it can.
  const text = "a\u0000b";
  const headers = () => ({ "x-api-key": key });

  it("message metadata and content are refused with InvalidArgument and the field's code, and nothing is stored", async () => {
    const messages = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const before = await listAllIds(server.url, key, channel);
    const requests: Array<MessageInitShape<typeof CreateMessageRequestSchema>> = [
      { identifier: channel, content: "x", metadata: { a: text } },
      { identifier: channel, content: "x", metadata: { [text]: 1 } },
      { identifier: channel, content: text },
    ];
    const codes = [];
    for (const request of requests) {
      const err = await rejected(messages.createMessage(request, { headers: headers() }));
      expect(err.code).toBe(Code.InvalidArgument);
      codes.push(errorCode(err));
    }
    expect(codes).toEqual(["invalid_object", "invalid_object", "invalid_string"]);
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });

  it("channel name, metadata_schema, actor metadata and claim metadata are refused", async () => {
    const transport = createGrpcTransport({ baseUrl: server.url });
    const message = await postMessage(server.url, key, channel, { content: "task" });
    const calls = [
      createClient(ChannelService, transport).createChannel({ name: text }, { headers: headers() }),
      createClient(ChannelService, transport).createChannel({ name: "s", metadataSchema: { type: "string", pattern: text } }, { headers: headers() }),
      createClient(ActorService, transport).createActor({ name: "bot", metadata: { v: text } }, { headers: headers() }),
      createClient(MessageService, transport).claimMessage({ messageId: message.id, metadata: { note: text } }, { headers: headers() }),
    ];
    const codes = [];
    for (const call of calls) {
      const err = await rejected(call);
      expect(err.code).toBe(Code.InvalidArgument);
      codes.push(errorCode(err));
    }
    expect(codes).toEqual(["invalid_string", "invalid_object", "invalid_object", "invalid_object"]);
  });
});

describe("unstorable strings over Connect JSON", () => {
  /** A Connect unary call with hand-written JSON (generated clients cannot send an unpaired surrogate). */
  async function connectJson(procedure: string, json: string) {
    const res = await fetch(`${server.url}/agentbus.v1.${procedure}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-API-Key": key },
      body: json,
    });
    const body = (await res.json()) as { code: string; details?: Array<{ type: string; value: string }> };
    const detail = body.details?.find((d) => d.type === ErrorDetailSchema.typeName);
    return { status: res.status, code: body.code, error: detail && fromBinary(ErrorDetailSchema, Buffer.from(detail.value, "base64")).error };
  }

  // A plain string field Connect's decoder refuses itself when it is not Unicode (invalid_unicode);
  // NUL it passes on, and the validator answers the field's code; Structs are all the validator's.
  it.each([
    ["message metadata", "MessageService/CreateMessage", (v: string) => `{"identifier":"CH","content":"x","metadata":{"a":${v}}}`, false],
    ["a message metadata key", "MessageService/CreateMessage", (v: string) => `{"identifier":"CH","content":"x","metadata":{${v}:1}}`, false],
    ["message content", "MessageService/CreateMessage", (v: string) => `{"identifier":"CH","content":${v}}`, true],
    ["a channel name", "ChannelService/CreateChannel", (v: string) => `{"name":${v}}`, true],
    ["a metadata_schema", "ChannelService/CreateChannel", (v: string) => `{"name":"s","metadataSchema":{"pattern":${v}}}`, false],
    ["actor metadata", "ActorService/CreateActor", (v: string) => `{"name":"bot","metadata":{"v":${v}}}`, false],
  ] as const)("%s with an unpaired surrogate or NUL is refused with invalid_argument and a catalog code", async (_what, procedure, body, plain) => {
    const before = await listAllIds(server.url, key, channel);
    const cases = [
      ['"a\\ud800b"', plain ? "invalid_unicode" : "invalid_object"],
      ['"\\udc00"', plain ? "invalid_unicode" : "invalid_object"],
      ['"a\\u0000b"', plain ? "invalid_string" : "invalid_object"],
    ] as const;
    for (const [value, expected] of cases) {
      const answer = await connectJson(procedure, body(value).replace("CH", channel));
      expect(answer, value).toEqual({ status: 400, code: "invalid_argument", error: expected });
    }
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });
});

describe("requests Connect cannot decode", () => {
  const garbage = [
    ["truncated", Buffer.from([0x0a, 0x05, 0x61])],
    ["invalid UTF-8 in a string", Buffer.from([0x0a, 0x02, 0xc3, 0x28])],
    ["an invalid wire type", Buffer.from([0x0f, 0x01])],
    ["random bytes", Buffer.from("ffffffffffffffffff01", "hex")],
  ] as const;

  it.each(garbage)("malformed protobuf (%s) is InvalidArgument with invalid_protobuf over gRPC", async (_name, payload) => {
    const client = new RawGrpcClient(server.url);
    try {
      const answer = await client.call("/agentbus.v1.ChannelService/CreateChannel", grpcFrame(payload), { "x-api-key": key });
      expect(answer.grpcStatus).toBe(Code.InvalidArgument);
      expect(answer.detail?.error).toBe("invalid_protobuf");
    } finally {
      client.close();
    }
  });

  it.each(garbage)("malformed protobuf (%s) is 400 with invalid_protobuf over Connect binary", async (_name, payload) => {
    const res = await fetch(`${server.url}/agentbus.v1.MessageService/CreateMessage`, {
      method: "POST",
      headers: { "Content-Type": "application/proto", "X-API-Key": key },
      body: payload,
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; details: Array<{ type: string; value: string }> };
    expect(body.code).toBe("invalid_argument");
    const detail = body.details.find((d) => d.type === ErrorDetailSchema.typeName)!;
    expect(fromBinary(ErrorDetailSchema, Buffer.from(detail.value, "base64")).error).toBe("invalid_protobuf");
  });

  it("malformed protobuf over gRPC-Web is InvalidArgument with invalid_protobuf", async () => {
    const res = await fetch(`${server.url}/agentbus.v1.ActorService/CreateActor`, {
      method: "POST",
      headers: { "Content-Type": "application/grpc-web+proto", "X-API-Key": key },
      body: grpcFrame(Buffer.from([0x0a, 0x05, 0x61])),
    });
    const body = Buffer.from(await res.arrayBuffer());
    const error = findTrailerError(trailerParse(body.subarray(5)));
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error?.findDetails(ErrorDetailSchema)[0]?.error).toBe("invalid_protobuf");
  });
});

describe("non-finite numbers over gRPC", () => {
  it.each([Infinity, -Infinity, Number.NaN])("%s in message, actor, claim metadata and metadata_schema is refused with the field's code", async (n) => {
    const transport = createGrpcTransport({ baseUrl: server.url });
    const headers = { "x-api-key": key };
    const message = await postMessage(server.url, key, channel, { content: "task" });
    const before = await listAllIds(server.url, key, channel);
    const calls = [
      createClient(MessageService, transport).createMessage({ identifier: channel, metadata: { n } }, { headers }),
      createClient(MessageService, transport).claimMessage({ messageId: message.id, metadata: { n } }, { headers }),
      createClient(ActorService, transport).createActor({ name: "bot", metadata: { n } }, { headers }),
      createClient(ChannelService, transport).createChannel({ name: "s", metadataSchema: { maximum: n } }, { headers }),
      createClient(MessageService, transport).listMessages({ identifier: channel, wait: n }, { headers }),
    ];
    const codes = [];
    for (const call of calls) {
      const err = await rejected(call);
      expect(err.code).toBe(Code.InvalidArgument);
      codes.push(errorCode(err));
    }
    expect(codes).toEqual(["invalid_object", "invalid_object", "invalid_object", "invalid_object", "invalid_wait"]);
    expect(await listAllIds(server.url, key, channel)).toEqual(before);
  });
});
