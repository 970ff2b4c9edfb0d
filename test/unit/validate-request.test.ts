import { create, fromBinary, toBinary, type DescMessage, type JsonObject, type Message } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { CreateActorRequestSchema } from "../../gen/agentbus/v1/actor_service_pb.js";
import { CreateChannelRequestSchema, UpdateChannelRequestSchema } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ClaimMessageRequestSchema, CreateMessageRequestSchema, ListMessagesRequestSchema } from "../../gen/agentbus/v1/message_service_pb.js";
import { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import { ApiError, errorCatalog } from "../../src/model/errors.js";
import { renderMessageJson } from "../../src/protocol/json-render-text.js";
import { assertValidRequest, findInvalidValue } from "../../src/server/rpc/validate-request.js";
import { thrownBy } from "../support/errors.js";

const LONE_HIGH = "\ud800";
const LONE_LOW = "\udc00";
const NUL = "\u0000";

const errorOf = (desc: DescMessage, message: Message) => thrownBy(ApiError, () => assertValidRequest(desc, message));

describe("request validation", () => {
  it("accepts well-formed text, surrogate pairs and finite numbers everywhere", () => {
    const request = create(CreateMessageRequestSchema, {
      identifier: "jobs",
      content: "héllo 😀 中文",
      metadata: { "😀": ["a", 1.5, -1e308, { deep: { deeper: [true, null, "ok"] } }] },
      mentions: ["a", "b"],
    });
    expect(findInvalidValue(CreateMessageRequestSchema, request)).toBeUndefined();
  });

  it.each([
    ["an unpaired high surrogate", `a${LONE_HIGH}b`, "unpaired_surrogate"],
    ["an unpaired low surrogate", `${LONE_LOW}x`, "unpaired_surrogate"],
    ["a reversed pair", `${LONE_LOW}${LONE_HIGH}`, "unpaired_surrogate"],
    ["NUL", `a${NUL}`, "nul"],
  ])("rejects %s in a string field with invalid_string", (_name, text, problem) => {
    const request = create(CreateMessageRequestSchema, { identifier: "jobs", content: text });
    expect(findInvalidValue(CreateMessageRequestSchema, request)).toMatchObject({ path: "content", problem });
    const err = errorOf(CreateMessageRequestSchema, request);
    expect(err.code).toBe("invalid_string");
    expect(err.status).toBe(422);
    expect(err.details).toEqual({ field: "content" });
  });

  it("names the catalog's field-specific code when there is one", () => {
    const err = errorOf(CreateChannelRequestSchema, create(CreateChannelRequestSchema, { relatedChannels: ["ok", `x${LONE_HIGH}`] }));
    expect(err.code).toBe("invalid_related_channels");
    expect(err.details).toEqual({ field: "related_channels[1]" });
  });

  it("rejects bad Struct values, nested in lists and objects, naming the path under the request field", () => {
    const request = create(CreateMessageRequestSchema, { metadata: { a: [1, { b: `x${NUL}` }] } });
    const err = errorOf(CreateMessageRequestSchema, request);
    expect(err.code).toBe("invalid_object");
    expect(err.details).toEqual({ field: "metadata.a[1].b" });
  });

  it("rejects bad Struct keys, showing the bad code unit as an escape", () => {
    const err = errorOf(ClaimMessageRequestSchema, create(ClaimMessageRequestSchema, { metadata: { [`k${LONE_HIGH}`]: 1 } }));
    expect(err.code).toBe("invalid_object");
    expect(err.details).toEqual({ field: "metadata.k\\ud800" });
    expect(err.message).not.toMatch(/[\ud800-\udfff]/);
  });

  it.each([Infinity, -Infinity, Number.NaN])("rejects the non-finite number %s in a Struct with the field's invalid_object", (n) => {
    const err = errorOf(CreateActorRequestSchema, create(CreateActorRequestSchema, { name: "a", metadata: { x: { y: n } } }));
    expect(err.code).toBe("invalid_object");
    expect(err.details).toEqual({ field: "metadata.x.y" });
  });

  it("rejects a non-finite double field with its own code", () => {
    const err = errorOf(ListMessagesRequestSchema, create(ListMessagesRequestSchema, { identifier: "c", wait: Number.POSITIVE_INFINITY }));
    expect(err.code).toBe("invalid_wait");
  });

  it("walks nested request messages (metadata_schema under an update)", () => {
    const request = create(UpdateChannelRequestSchema, { identifier: "c", channel: { metadataSchema: { type: "string", pattern: `^${LONE_LOW}$` } } });
    expect(errorOf(UpdateChannelRequestSchema, request).details).toEqual({ field: "channel.metadata_schema.pattern" });
  });

  it("finds NUL in a message decoded from protobuf binary", () => {
    const bytes = toBinary(CreateMessageRequestSchema, create(CreateMessageRequestSchema, { identifier: `c${NUL}` }));
    expect(errorOf(CreateMessageRequestSchema, fromBinary(CreateMessageRequestSchema, bytes)).details).toEqual({ field: "identifier" });
  });

  it("walks a Struct nested thousands of levels deep without overflowing the stack", () => {
    let deep: Record<string, unknown> = { bad: Infinity };
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    const request = create(CreateMessageRequestSchema, { metadata: deep as never });
    expect(findInvalidValue(CreateMessageRequestSchema, request)?.problem).toBe("non_finite");
  });

  it("uses codes that are in the catalog, each with a suggestion", () => {
    for (const code of ["invalid_unicode", "invalid_protobuf"] as const) {
      expect(errorCatalog[code].suggestion).toBeTruthy();
    }
  });
});

describe("what validation lets through can be answered", () => {
  // A message is answered after its commit: rendering must not fail for anything
  // the validator accepts, or a client sees 500 for a write that happened (docs/decisions.md#validate-at-decode).
  const storable: JsonObject = {
    text: "héllo 😀 \u200b\ufeff \u0001 \ud83d\ude00 \"quoted\" \\ </script>",
    numbers: [0, -0, 1, -1, 1.5, 1e308, -1.7976931348623157e308, 5e-324, 2 ** 53 + 2, 123456789.12345679],
    flags: [true, false, null],
    empty: { object: {}, array: [], string: "" },
    nested: { a: [{ b: [[{ c: null }]] }] },
    "key with spaces and 😀": 1,
    "": "empty key",
  };

  it("accepts the storable sample (the test below would prove nothing otherwise)", () => {
    expect(findInvalidValue(CreateMessageRequestSchema, create(CreateMessageRequestSchema, { metadata: storable }))).toBeUndefined();
  });

  it("renders every kind of accepted value as REST JSON and as protobuf, unchanged", () => {
    const message = create(MessageSchema, { id: "m", content: storable.text as string, metadata: storable });
    const rendered = JSON.parse(renderMessageJson(MessageSchema, message)) as { metadata: unknown; content: unknown };
    expect(rendered.metadata).toEqual(JSON.parse(JSON.stringify(storable)));
    expect(rendered.content).toBe(storable.text);
    expect(fromBinary(MessageSchema, toBinary(MessageSchema, message)).metadata).toEqual(storable);
  });

  it("would fail to render what validation refuses", () => {
    // The reason the validator refuses non-finite numbers: they cannot be answered.
    const message = create(MessageSchema, { id: "m", metadata: { n: Infinity } });
    expect(() => renderMessageJson(MessageSchema, message)).toThrow();
  });
});
