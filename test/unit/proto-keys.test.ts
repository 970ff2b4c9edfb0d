/**
 * A JSON object key "__proto__" is refused wherever a client sends a JSON
 * object (docs/decisions.md#validate-at-decode), because protobuf-es drops it while
 * decoding: the REST codec looks for it in the parsed body, raw-request.ts
 * in a Connect, gRPC or gRPC-Web request as sent. Every other key,
 * "constructor" and "prototype" included, is an ordinary key.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ClaimMessageRequestSchema, CreateMessageRequestSchema } from "../../gen/agentbus/v1/message_service_pb.js";
import { CreateSessionRequestSchema, UpdateSessionRequestSchema } from "../../gen/agentbus/v1/session_service_pb.js";
import { ApiError } from "../../src/model/errors.js";
import { decodeRequest, type RequestInput } from "../../src/server/rest/json-codec.js";
import { protoKeyInBinary, protoKeyInJson } from "../../src/server/rpc/raw-request.js";
import { thrownBy } from "../support/errors.js";
import { PROTO_STAND_IN, withProtoKey } from "../support/proto-key.js";

/** A REST body as JSON.parse gives it to the codec: "__proto__" an own key. */
const restBody = (json: string): RequestInput => ({
  pathParams: {},
  query: new URLSearchParams(),
  body: JSON.parse(json) as unknown,
  bodyField: "*",
  rejectUnknownBodyFields: false,
});

describe("the REST codec", () => {
  it("refuses a Struct key __proto__ with 422, naming its path, before protobuf-es drops it", () => {
    const err = thrownBy(ApiError, () => decodeRequest(CreateMessageRequestSchema, restBody('{"content":"x","metadata":{"a":[1,{"__proto__":{"b":1}}]}}')));
    expect(err.status).toBe(422);
    expect(err.code).toBe("invalid_object");
    expect(err.details).toEqual({ field: "metadata.a[1].__proto__" });
    expect(err.suggestion).toContain("Rename the key");
  });

  it("refuses it at the top of session state, with a primitive value (which protobuf-es would drop without a trace)", () => {
    const err = thrownBy(ApiError, () => decodeRequest(CreateSessionRequestSchema, restBody('{"name":"s","state":{"__proto__":1}}')));
    expect(err.details).toEqual({ field: "state.__proto__" });
  });

  it("keeps constructor and prototype as ordinary keys", () => {
    const request = decodeRequest(UpdateSessionRequestSchema, restBody('{"state":{"constructor":{"prototype":1},"prototype":"x","toString":null}}'));
    expect(request.state).toEqual({ constructor: { prototype: 1 }, prototype: "x", toString: null });
    expect(Object.keys(request.state!)).toEqual(["constructor", "prototype", "toString"]);
  });
});

describe("requests as sent over gRPC, gRPC-Web and Connect", () => {
  it("finds __proto__ in protobuf binary, at any depth, with the Struct field's path", () => {
    const bytes = withProtoKey(CreateMessageRequestSchema, { identifier: "c", content: "x", metadata: { a: [1, { [PROTO_STAND_IN]: { b: 1 } }] } });
    // What protobuf-es makes of it: the key is gone.
    expect(fromBinary(CreateMessageRequestSchema, bytes).metadata).toEqual({ a: [1, {}] });
    expect(protoKeyInBinary(CreateMessageRequestSchema, bytes)).toMatchObject({ path: "metadata.a[1].__proto__", problem: "proto_key" });
    const top = withProtoKey(UpdateSessionRequestSchema, { id: "s", state: { ok: 1, [PROTO_STAND_IN]: "v" } });
    expect(protoKeyInBinary(UpdateSessionRequestSchema, top)).toMatchObject({ path: "state.__proto__", problem: "proto_key" });
  });

  it("is not misled by __proto__ as a string value, as content or as a field's text", () => {
    const bytes = withProtoKey(ClaimMessageRequestSchema, { messageId: PROTO_STAND_IN, metadata: { note: PROTO_STAND_IN, list: [PROTO_STAND_IN] } });
    expect(protoKeyInBinary(ClaimMessageRequestSchema, bytes)).toBeUndefined();
  });

  it("finds __proto__ in Connect JSON, whether fields are named by their proto or JSON names", () => {
    const request = JSON.parse('{"identifier":"c","content":"x","metadata":{"a":{"b":[{"__proto__":null}]}}}') as unknown;
    expect(protoKeyInJson(CreateMessageRequestSchema, request)).toMatchObject({ path: "metadata.a.b[0].__proto__", problem: "proto_key" });
    const byJsonName = JSON.parse('{"messageId":"m","metadata":{"__proto__":{}}}') as unknown;
    expect(protoKeyInJson(ClaimMessageRequestSchema, byJsonName)).toMatchObject({ path: "metadata.__proto__" });
    expect(protoKeyInJson(CreateMessageRequestSchema, JSON.parse('{"content":"__proto__","metadata":{"k":"__proto__"}}'))).toBeUndefined();
  });
});
