import { create, type DescMessage } from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import {
  ChannelAccess,
  ChannelAccessSchema,
  ChannelMode,
  ChannelModeSchema,
  ChannelSchema,
} from "../../gen/agentbus/v1/channel_pb.js";
import { CreateChannelRequestSchema, GetChannelRequestSchema, UpdateChannelRequestSchema } from "../../gen/agentbus/v1/channel_service_pb.js";
import { JobKind, JobPostingResultSchema, JobSchema, JobStatus } from "../../gen/agentbus/v1/job_pb.js";
import { GetJobRequestSchema, JobSubmissionSchema } from "../../gen/agentbus/v1/job_service_pb.js";
import { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import {
  AckStatus,
  AckStatusSchema,
  CreateMessageRequestSchema,
  ListMessagesRequestSchema,
  MessageStatus,
} from "../../gen/agentbus/v1/message_service_pb.js";
import { ApiError } from "../../src/model/errors.js";
import { parseTimestamp, toProtoTimestamp } from "../../src/model/time.js";
import { decodeRequest, type RequestInput } from "../../src/server/rest/json-codec.js";
import { enumFromJson, enumJsonNames, enumToJson } from "../../src/protocol/json-enums.js";
import { renderMessage } from "../../src/protocol/json-render.js";
import { thrownBy } from "../support/errors.js";

const timestamp = (text: string) => create(TimestampSchema, toProtoTimestamp(parseTimestamp(text) ?? Number.NaN));

function input(overrides: Partial<RequestInput>): RequestInput {
  return {
    pathParams: {},
    query: new URLSearchParams(),
    body: undefined,
    bodyField: "",
    rejectUnknownBodyFields: false,
    ...overrides,
  };
}

/** Runs a decode that must fail and returns its ApiError. */
const decodeError = (schema: DescMessage, overrides: Partial<RequestInput>) => thrownBy(ApiError, () => decodeRequest(schema, input(overrides)));

describe("renderMessage: defaults (json-all-fields)", () => {
  const rendered = renderMessage(ChannelSchema, create(ChannelSchema));

  it("emits every field under its snake_case name, in declaration order", () => {
    expect(Object.keys(rendered)).toEqual(ChannelSchema.fields.map((f) => f.name));
    expect(rendered).toHaveProperty("owner_id");
    expect(rendered).toHaveProperty("max_writes_per_minute");
  });

  it("renders unset optional scalars as null", () => {
    expect(rendered.pinned_message).toBeNull();
    expect(rendered.max_messages).toBeNull();
  });

  it("renders unset message fields (Struct, Timestamp) as null", () => {
    expect(rendered.metadata_schema).toBeNull();
    expect(rendered.created_at).toBeNull();
  });

  it("renders empty lists as []", () => {
    expect(rendered.aliases).toEqual([]);
    expect(rendered.related_channels).toEqual([]);
  });

  it("renders implicit-presence scalars with their zero value", () => {
    expect(rendered.id).toBe("");
    expect(rendered.discoverable).toBe(false);
    expect(rendered.ttl_seconds).toBe(0);
  });

  it("renders an optional scalar set to its zero value as that value, not null", () => {
    const out = renderMessage(ChannelSchema, create(ChannelSchema, { pinnedMessage: "", maxMessages: 0 }));
    expect(out.pinned_message).toBe("");
    expect(out.max_messages).toBe(0);
  });

  it("renders an empty Struct as {}", () => {
    expect(renderMessage(ChannelSchema, create(ChannelSchema, { metadataSchema: {} })).metadata_schema).toEqual({});
  });
});

describe("renderMessage: enums (json-enums)", () => {
  it("renders enum values lowercase without the enum prefix", () => {
    const out = renderMessage(
      ChannelSchema,
      create(ChannelSchema, { mode: ChannelMode.CLAIMABLE, access: ChannelAccess.RESTRICTED }),
    );
    expect(out.mode).toBe("claimable");
    expect(out.access).toBe("restricted");
  });

  it("renders the UNSPECIFIED zero value as null", () => {
    expect(renderMessage(ChannelSchema, create(ChannelSchema)).mode).toBeNull();
  });

  it("enumToJson keeps the words after the prefix: ACK_STATUS_ALREADY_ACKNOWLEDGED → already_acknowledged", () => {
    expect(enumToJson(AckStatusSchema, AckStatus.ALREADY_ACKNOWLEDGED)).toBe("already_acknowledged");
  });

  it("enumToJson renders an undeclared number as null", () => {
    expect(enumToJson(ChannelModeSchema, 99)).toBeNull();
  });

  it("enumFromJson accepts the short name case-insensitively and the full proto name", () => {
    expect(enumFromJson(ChannelModeSchema, "claimable")).toBe(ChannelMode.CLAIMABLE);
    expect(enumFromJson(ChannelModeSchema, "Claimable")).toBe(ChannelMode.CLAIMABLE);
    expect(enumFromJson(ChannelModeSchema, "CHANNEL_MODE_CLAIMABLE")).toBe(ChannelMode.CLAIMABLE);
  });

  it("enumFromJson never returns the zero value, nor a value for an unknown name", () => {
    expect(enumFromJson(ChannelModeSchema, "unspecified")).toBeUndefined();
    expect(enumFromJson(ChannelModeSchema, "CHANNEL_MODE_UNSPECIFIED")).toBeUndefined();
    expect(enumFromJson(ChannelModeSchema, "weird")).toBeUndefined();
  });

  it("enumJsonNames lists the names a caller may send", () => {
    expect(enumJsonNames(ChannelAccessSchema)).toEqual(["open", "restricted"]);
  });
});

describe("renderMessage: numbers (json-integers)", () => {
  it("renders int64 as a JSON number, not a string", () => {
    const out = renderMessage(JobSubmissionSchema, create(JobSubmissionSchema, { jobId: 9007199254740991n }));
    expect(out.job_id).toBe(9007199254740991);
  });

  it("renders a non-finite double as null", () => {
    const out = renderMessage(
      JobPostingResultSchema,
      create(JobPostingResultSchema, { salaryMin: Number.NaN, salaryMax: 85000.5 }),
    );
    expect(out.salary_min).toBeNull();
    expect(out.salary_max).toBe(85000.5);
  });
});

describe("renderMessage: timestamps (json-timestamps)", () => {
  it("renders RFC 3339 UTC with exactly six fractional digits", () => {
    const out = renderMessage(
      ChannelSchema,
      create(ChannelSchema, { createdAt: create(TimestampSchema, { seconds: 1795230879n, nanos: 743512000 }) }),
    );
    expect(out.created_at).toBe("2026-11-21T03:14:39.743512Z");
  });

  it("renders zero microseconds as .000000Z", () => {
    const out = renderMessage(ChannelSchema, create(ChannelSchema, { createdAt: create(TimestampSchema, { seconds: 1795230879n }) }));
    expect(out.created_at).toBe("2026-11-21T03:14:39.000000Z");
  });

  it("truncates nanoseconds below the microsecond", () => {
    const out = renderMessage(
      ChannelSchema,
      create(ChannelSchema, { createdAt: create(TimestampSchema, { seconds: 1795230879n, nanos: 743512999 }) }),
    );
    expect(out.created_at).toBe("2026-11-21T03:14:39.743512Z");
  });
});

describe("renderMessage: Struct, nested messages and lists", () => {
  const message = create(MessageSchema, {
    id: "m1",
    channelId: "c1",
    actor: { id: "a1", name: "planner" },
    content: "hello",
    metadata: { priority: 2, tags: ["x", "y"], nested: { ok: true, none: null } },
    createdAt: timestamp("2026-11-21T03:14:39.743512Z"),
    mentions: [{ id: "a2", name: "worker" }],
    acknowledgedBy: [{ id: "a2", name: "worker", occurredAt: timestamp("2026-11-21T03:15:00.000001Z") }],
    active: true,
  });
  const out = renderMessage(MessageSchema, message);

  it("passes a Struct through as the plain JSON object", () => {
    expect(out.metadata).toEqual({ priority: 2, tags: ["x", "y"], nested: { ok: true, none: null } });
  });

  it("renders nested messages recursively with every field", () => {
    expect(out.actor).toEqual({ id: "a1", name: "planner" });
    expect(out.claimed_by).toBeNull();
    expect(out.claimed_by_key_id).toBeNull();
  });

  it("renders repeated messages as arrays, applying the same rules inside", () => {
    expect(out.mentions).toEqual([{ id: "a2", name: "worker" }]);
    expect(out.acknowledged_by).toEqual([{ id: "a2", name: "worker", occurred_at: "2026-11-21T03:15:00.000001Z", metadata: null }]);
  });
});

describe("renderMessage: oneofs", () => {
  it("renders a set oneof as one key named after the oneof, in declaration position", () => {
    const job = create(JobSchema, {
      jobId: 7n,
      kind: JobKind.PDF,
      status: JobStatus.COMPLETED,
      result: { case: "pdf", value: { url: "/v1/pdf/7" } },
    });
    const out = renderMessage(JobSchema, job);
    expect(Object.keys(out)).toEqual([
      "job_id",
      "kind",
      "status",
      "result",
      "error",
      "created_at",
      "updated_at",
      "completed_at",
      "expires_at",
      "trace",
    ]);
    expect(out).toMatchObject({ job_id: 7, kind: "pdf", status: "completed", result: { url: "/v1/pdf/7" }, error: null });
  });

  it("renders an unset oneof as null", () => {
    const out = renderMessage(JobSchema, create(JobSchema, { jobId: 8n, status: JobStatus.QUEUED }));
    expect(out.result).toBeNull();
    expect(out).not.toHaveProperty("pdf");
  });

  it("renders the set member with its own defaults (json-all-fields inside the oneof)", () => {
    const out = renderMessage(JobSchema, create(JobSchema, { result: { case: "jobPosting", value: { title: "Engineer" } } }));
    expect(out.result).toMatchObject({ title: "Engineer", company: null, salary_min: null, skills: [] });
  });
});

describe("decodeRequest: body binding", () => {
  it('binds the whole body to the request with body "*"', () => {
    const request = decodeRequest(
      CreateChannelRequestSchema,
      input({
        bodyField: "*",
        body: {
          name: "jobs",
          mode: "claimable",
          access: "restricted",
          discoverable: true,
          ttl_seconds: 600,
          related_channels: ["a", "b"],
          metadata_schema: { type: "object" },
        },
      }),
    );
    expect(request).toMatchObject({
      name: "jobs",
      mode: ChannelMode.CLAIMABLE,
      access: ChannelAccess.RESTRICTED,
      discoverable: true,
      ttlSeconds: 600,
      relatedChannels: ["a", "b"],
      metadataSchema: { type: "object" },
    });
  });

  it("accepts camelCase JSON names as well as snake_case proto names", () => {
    const request = decodeRequest(CreateChannelRequestSchema, input({ bodyField: "*", body: { ttlSeconds: 900 } }));
    expect(request.ttlSeconds).toBe(900);
  });

  it("treats an absent body as {}", () => {
    const request = decodeRequest(CreateChannelRequestSchema, input({ bodyField: "*", body: undefined }));
    expect(request.name).toBeUndefined();
  });

  it('ignores the body when the rule has no body ("")', () => {
    const request = decodeRequest(GetChannelRequestSchema, input({ body: { identifier: "x" }, pathParams: { identifier: "c1" } }));
    expect(request.identifier).toBe("c1");
  });

  it("decodes the body into the named field", () => {
    const request = decodeRequest(
      UpdateChannelRequestSchema,
      input({ bodyField: "channel", body: { name: "renamed", paused: true }, pathParams: { identifier: "c1" } }),
    );
    expect(request.identifier).toBe("c1");
    expect(request.channel).toMatchObject({ name: "renamed", paused: true });
  });

  it.each([
    ["an array", [1, 2]],
    ["a string", "hello"],
    ["a number", 42],
    ["null", null],
  ])("rejects a body that is %s with invalid_json_shape", (_what, body) => {
    expect(decodeError(CreateChannelRequestSchema, { bodyField: "*", body }).code).toBe("invalid_json_shape");
    expect(decodeError(UpdateChannelRequestSchema, { bodyField: "channel", body }).code).toBe("invalid_json_shape");
  });

  it("leaves a field unset when the body gives null", () => {
    const request = decodeRequest(
      CreateChannelRequestSchema,
      input({ bodyField: "*", body: { pinned_message: null, max_messages: null, metadata_schema: null, mode: null } }),
    );
    expect(request.pinnedMessage).toBeUndefined();
    expect(request.maxMessages).toBeUndefined();
    expect(request.metadataSchema).toBeUndefined();
    expect(request.mode).toBe(ChannelMode.UNSPECIFIED);
  });

  it("keeps strings verbatim, including whitespace and the empty string (strings-verbatim)", () => {
    const request = decodeRequest(CreateChannelRequestSchema, input({ bodyField: "*", body: { name: "  x  ", description: "" } }));
    expect(request.name).toBe("  x  ");
    expect(request.description).toBe("");
  });
});

describe("decodeRequest: unknown body fields (json-bodies)", () => {
  it("ignores unknown body fields when not rejecting them (create)", () => {
    const request = decodeRequest(CreateChannelRequestSchema, input({ bodyField: "*", body: { name: "x", colour: "red" } }));
    expect(request.name).toBe("x");
  });

  it("rejects unknown body fields with invalid_fields listing all of them (PATCH)", () => {
    const err = decodeError(UpdateChannelRequestSchema, {
      bodyField: "channel",
      rejectUnknownBodyFields: true,
      body: { name: "x", colour: "red", ttl_seconds: 600 },
    });
    expect(err.code).toBe("invalid_fields");
    expect(err.details).toEqual({ fields: ["colour", "ttl_seconds"] });
    expect(err.message).toContain("colour");
    expect(err.message).toContain("ttl_seconds");
  });

  it("accepts camelCase names as known when rejecting unknown fields", () => {
    const request = decodeRequest(
      UpdateChannelRequestSchema,
      input({ bodyField: "channel", rejectUnknownBodyFields: true, body: { maxMessages: 10 } }),
    );
    expect(request.channel?.maxMessages).toBe(10);
  });
});

describe("decodeRequest: update masks", () => {
  it("fills update_mask from the body keys in body order, including keys set to null", () => {
    const request = decodeRequest(
      UpdateChannelRequestSchema,
      input({
        bodyField: "channel",
        body: { description: "d", pinned_message: null, maxMessages: 5 },
        pathParams: { identifier: "c1" },
      }),
    );
    expect(request.updateMask?.paths).toEqual(["description", "pinned_message", "max_messages"]);
    expect(request.channel?.pinnedMessage).toBeUndefined();
    expect(request.channel?.maxMessages).toBe(5);
  });

  it("leaves unknown (ignored) keys out of the mask", () => {
    const request = decodeRequest(UpdateChannelRequestSchema, input({ bodyField: "channel", body: { name: "n", colour: "red" } }));
    expect(request.updateMask?.paths).toEqual(["name"]);
  });

  it("sets an empty mask for an empty body", () => {
    const request = decodeRequest(UpdateChannelRequestSchema, input({ bodyField: "channel", body: {} }));
    expect(request.updateMask?.paths).toEqual([]);
  });

  it("keeps an update_mask given in the query instead of deriving one", () => {
    const request = decodeRequest(
      UpdateChannelRequestSchema,
      input({ bodyField: "channel", body: { name: "n", paused: true }, query: new URLSearchParams("update_mask=name") }),
    );
    expect(request.updateMask?.paths).toEqual(["name"]);
  });

  it('does not derive a mask when the body is the whole request ("*")', () => {
    const request = decodeRequest(UpdateChannelRequestSchema, input({ bodyField: "*", body: { channel: { name: "n" } } }));
    expect(request.updateMask).toBeUndefined();
  });
});

describe("decodeRequest: path parameters", () => {
  it("override a value given in the body", () => {
    const request = decodeRequest(
      CreateMessageRequestSchema,
      input({ bodyField: "*", body: { identifier: "other", content: "hi" }, pathParams: { identifier: "general" } }),
    );
    expect(request.identifier).toBe("general");
    expect(request.content).toBe("hi");
  });

  it("convert to int64 for job_id", () => {
    expect(decodeRequest(GetJobRequestSchema, input({ pathParams: { job_id: "42" } })).jobId).toBe(42n);
  });

  it.each(["abc", "1.5", "007", "", "9223372036854775808"])("reject job_id %j with invalid_job_id", (jobId) => {
    const err = decodeError(GetJobRequestSchema, { pathParams: { job_id: jobId } });
    expect(err.code).toBe("invalid_job_id");
    expect(err.details).toEqual({ field: "job_id" });
  });
});

describe("decodeRequest: query parameters", () => {
  it("fill the fields the path and body do not bind, converted per type", () => {
    const request = decodeRequest(
      ListMessagesRequestSchema,
      input({
        pathParams: { identifier: "general" },
        query: new URLSearchParams("since=2026-11-21T03:14:39.743512Z&limit=10&wait=2.5&status=unclaimed"),
      }),
    );
    expect(request).toMatchObject({
      identifier: "general",
      since: "2026-11-21T03:14:39.743512Z",
      limit: 10,
      wait: 2.5,
      status: MessageStatus.UNCLAIMED,
    });
  });

  it("take a repeated field from a repeated parameter, under either spelling", () => {
    const request = decodeRequest(
      CreateChannelRequestSchema,
      input({ query: new URLSearchParams("related_channels=a&related_channels=b&relatedChannels=c") }),
    );
    expect(request.relatedChannels).toEqual(["a", "b", "c"]);
  });

  it("treat both spellings of one singular field as giving it twice", () => {
    const twice = decodeError(CreateChannelRequestSchema, { query: new URLSearchParams("ttl_seconds=300&ttlSeconds=600") });
    expect(twice.code).toBe("invalid_ttl_seconds");
  });

  it("reach nested message fields through dotted paths", () => {
    const request = decodeRequest(
      UpdateChannelRequestSchema,
      input({ query: new URLSearchParams("channel.name=n&channel.paused=true&channel.mode=broadcast") }),
    );
    expect(request.channel).toMatchObject({ name: "n", paused: true, mode: ChannelMode.BROADCAST });
  });

  it("parse bools only as true or false", () => {
    const err = decodeError(CreateChannelRequestSchema, { query: new URLSearchParams("discoverable=yes") });
    expect(err.code).toBe("invalid_discoverable");
  });

  it("reject an unknown parameter with invalid_fields naming every one", () => {
    const err = decodeError(ListMessagesRequestSchema, {
      pathParams: { identifier: "general" },
      query: new URLSearchParams("limit=5&foo=1&bar=2"),
    });
    expect(err.code).toBe("invalid_fields");
    expect(err.details).toEqual({ fields: ["foo", "bar"] });
  });

  it("reject a parameter for a field the path binds", () => {
    const err = decodeError(ListMessagesRequestSchema, {
      pathParams: { identifier: "general" },
      query: new URLSearchParams("identifier=other"),
    });
    expect(err.code).toBe("invalid_fields");
    expect(err.details).toEqual({ fields: ["identifier"] });
  });

  it('reject any parameter when the body is the whole request ("*")', () => {
    const err = decodeError(CreateChannelRequestSchema, { bodyField: "*", body: {}, query: new URLSearchParams("name=x") });
    expect(err.code).toBe("invalid_fields");
  });

  it("limit=abc → invalid_limit, naming the field and what was expected", () => {
    const err = decodeError(ListMessagesRequestSchema, { query: new URLSearchParams("limit=abc") });
    expect(err.code).toBe("invalid_limit");
    expect(err.message).toBe("'limit' must be an integer");
    expect(err.details).toEqual({ field: "limit" });
  });

  it("a singular field given twice → its invalid_ code", () => {
    expect(decodeError(ListMessagesRequestSchema, { query: new URLSearchParams("limit=1&limit=2") }).code).toBe("invalid_limit");
  });

  it("wait=soon → invalid_wait", () => {
    expect(decodeError(ListMessagesRequestSchema, { query: new URLSearchParams("wait=soon") }).code).toBe("invalid_wait");
  });

  it("status=open → invalid_status, listing the accepted values", () => {
    const err = decodeError(ListMessagesRequestSchema, { query: new URLSearchParams("status=open") });
    expect(err.code).toBe("invalid_status");
    expect(err.message).toBe(`'status' must be one of "unclaimed", "claimed"`);
  });
});

describe("decodeRequest: JSON value types and error codes", () => {
  const create1 = (body: Record<string, unknown>) => decodeError(CreateChannelRequestSchema, { bodyField: "*", body });

  it("bad enum value → invalid_mode naming the accepted values", () => {
    const err = create1({ mode: "fanout" });
    expect(err.code).toBe("invalid_mode");
    expect(err.message).toBe(`'mode' must be one of "broadcast", "claimable"`);
    expect(err.details).toEqual({ field: "mode" });
    expect(err.status).toBe(422);
  });

  it("a Struct nested past protobuf's recursion limit → invalid_object naming the depth, at any depth", () => {
    for (const depth of [100, 100_000]) {
      let schema: unknown = 1;
      for (let i = 0; i < depth; i++) schema = { a: schema };
      const err = create1({ metadata_schema: schema });
      expect(err.code).toBe("invalid_object");
      expect(err.message).toContain(`must nest fewer than 100 levels of objects and arrays (it nests ${depth})`);
    }
  });

  it("an enum given as a number → invalid_access", () => {
    expect(create1({ access: 1 }).code).toBe("invalid_access");
  });

  it('boolean given as the string "true" → invalid_discoverable', () => {
    const err = create1({ discoverable: "true" });
    expect(err.code).toBe("invalid_discoverable");
    expect(err.message).toBe("'discoverable' must be true or false");
  });

  it("float for an integer field → invalid_ttl_seconds", () => {
    const err = create1({ ttl_seconds: 1.5 });
    expect(err.code).toBe("invalid_ttl_seconds");
    expect(err.message).toBe("'ttl_seconds' must be an integer");
  });

  it("numeric string for an integer field in a JSON body → rejected (json-integers)", () => {
    expect(create1({ ttl_seconds: "600" }).code).toBe("invalid_ttl_seconds");
    expect(decodeError(JobSubmissionSchema, { bodyField: "*", body: { job_id: "7" } }).code).toBe("invalid_job_id");
  });

  it("integer outside the field's range → its invalid_ code with the range", () => {
    const err = create1({ retention_days: 2 ** 31 });
    expect(err.code).toBe("invalid_retention_days");
    expect(err.message).toBe("'retention_days' must be an integer from -2147483648 to 2147483647");
  });

  it("int64 from a JSON body must be a safe integer", () => {
    expect(decodeRequest(JobSubmissionSchema, input({ bodyField: "*", body: { job_id: 7 } })).jobId).toBe(7n);
    expect(decodeError(JobSubmissionSchema, { bodyField: "*", body: { job_id: 2 ** 60 } }).code).toBe("invalid_job_id");
  });

  it("number for a string field without its own code → invalid_string", () => {
    const err = create1({ name: 42 });
    expect(err.code).toBe("invalid_string");
    expect(err.message).toBe("'name' must be a string");
  });

  it("non-object for a Struct field → invalid_object", () => {
    expect(create1({ metadata_schema: [1, 2] }).code).toBe("invalid_object");
    expect(create1({ metadata_schema: "{}" }).code).toBe("invalid_object");
  });

  it("non-array for a repeated field → invalid_related_channels", () => {
    const err = create1({ related_channels: "general" });
    expect(err.code).toBe("invalid_related_channels");
    expect(err.message).toBe("'related_channels' must be an array of strings");
  });

  it("null element in a repeated field → its invalid_ code", () => {
    expect(create1({ related_channels: ["a", null] }).code).toBe("invalid_related_channels");
  });

  it("wrongly typed element in a repeated field → invalid_mentions, naming the element", () => {
    const err = decodeError(CreateMessageRequestSchema, { bodyField: "*", body: { mentions: ["a", 7] } });
    expect(err.code).toBe("invalid_mentions");
    expect(err.message).toBe("'mentions[1]' must be a string");
    expect(err.details).toEqual({ field: "mentions" });
  });

  it("errors inside a body-bound field name the field as the caller sent it", () => {
    const err = decodeError(UpdateChannelRequestSchema, { bodyField: "channel", body: { mode: "fanout" } });
    expect(err.code).toBe("invalid_mode");
    expect(err.details).toEqual({ field: "mode" });
  });

  it("only ever throws ApiError for bad input", () => {
    const bodies: unknown[] = [
      { ttl_seconds: Number.NaN },
      { ttl_seconds: {} },
      { related_channels: [[1]] },
      { metadata_schema: { a: undefined } },
      { name: ["x"] },
      { created_at: 5 },
      { mode: { value: 1 } },
    ];
    for (const body of bodies) {
      try {
        decodeRequest(CreateChannelRequestSchema, input({ bodyField: "*", body }));
      } catch (err) {
        expect(err).toBeInstanceOf(ApiError);
      }
    }
  });
});

describe("decodeRequest: timestamps", () => {
  it("parses an RFC 3339 timestamp with an offset into the same instant", () => {
    const request = decodeRequest(ChannelSchema, input({ bodyField: "*", body: { created_at: "2026-11-21T04:14:39.743512+01:00" } }));
    expect(renderMessage(ChannelSchema, request).created_at).toBe("2026-11-21T03:14:39.743512Z");
  });

  it("parses a timestamp from the query string", () => {
    const request = decodeRequest(
      ChannelSchema,
      input({ query: new URLSearchParams({ created_at: "2026-11-20T22:14:39.5-05:00" }) }),
    );
    expect(renderMessage(ChannelSchema, request).created_at).toBe("2026-11-21T03:14:39.500000Z");
  });

  it("rejects a malformed timestamp with invalid_field", () => {
    const err = decodeError(ChannelSchema, { bodyField: "*", body: { created_at: "yesterday" } });
    expect(err.code).toBe("invalid_field");
    expect(err.message).toContain("RFC 3339");
    expect(err.details).toEqual({ field: "created_at" });
  });
});
