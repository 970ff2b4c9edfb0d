/**
 * The compiled REST renderer (json-render.ts) against the reference renderer
 * by reflection (json-render-reflect.ts): same JSON, byte for byte, for
 * messages and for init shapes (which the REST path renders without create()),
 * over every message type of the API and a few well-known and proto2 types,
 * with seeded random values, plus the edge cases picked by hand.
 */
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  ScalarType,
  create,
  fromBinary,
  toBinary,
  type DescField,
  type DescFile,
  type DescMessage,
  type JsonObject,
} from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import {
  DescriptorProtoSchema,
  DurationSchema,
  FieldDescriptorProtoSchema,
  FileOptionsSchema,
  Int64ValueSchema,
  ListValueSchema,
  StructSchema,
  TimestampSchema,
  ValueSchema,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { JobSchema } from "../../gen/agentbus/v1/job_pb.js";
import { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import { ListMessagesResponseSchema } from "../../gen/agentbus/v1/message_service_pb.js";
import { renderMessage } from "../../src/protocol/json-render.js";
import { renderMessageByReflection } from "../../src/protocol/json-render-reflect.js";
import { renderMessageJson } from "../../src/protocol/json-render-text.js";
import { mulberry32 } from "../support/random.js";

const genDir = fileURLToPath(new URL("../../gen/", import.meta.url));

/** Every generated file of the repository (new protos are covered without touching this test). */
async function generatedFiles(): Promise<DescFile[]> {
  const files: DescFile[] = [];
  for (const path of readdirSync(genDir, { recursive: true, encoding: "utf8" })) {
    if (!path.endsWith("_pb.ts")) continue;
    const module = (await import(`${genDir}${path}`)) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      if (typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "file") files.push(value as DescFile);
    }
  }
  return files;
}

const messagesOf = (file: DescFile): DescMessage[] => [...nestedTypes(file)].filter((t): t is DescMessage => t.kind === "message");

const apiSchemas = (await generatedFiles()).flatMap(messagesOf);
/** Well-known types (the reference renders them by their canonical JSON or their fields) and proto2 ones with defaults. */
const otherSchemas = [
  ValueSchema,
  StructSchema,
  ListValueSchema,
  DurationSchema,
  TimestampSchema,
  DescriptorProtoSchema,
  FieldDescriptorProtoSchema,
  FileOptionsSchema,
  ...messagesOf(file_google_protobuf_wrappers),
];

// ---------------------------------------------------------------------------
// Seeded random values of every field kind

type Rnd = () => number;
const pick = <T,>(rnd: Rnd, items: readonly T[]): T => items[Math.floor(rnd() * items.length)] as T;

function randomScalar(rnd: Rnd, type: ScalarType, longAsString: boolean): unknown {
  switch (type) {
    case ScalarType.STRING:
      // Everything JSON.stringify escapes (quote, backslash, controls, lone surrogates) and what it does not.
      return pick(rnd, ["", "a", "héllo ☃", "quote \" and \\ backslash", "line\nbreak", "\u0001\u001f\u007f", "\u2028", "😀 pair", "lone \ud800", "\udc00", "12"]);
    case ScalarType.BOOL:
      return rnd() < 0.5;
    case ScalarType.BYTES:
      return pick(rnd, [new Uint8Array(), new Uint8Array([0, 1, 255]), new Uint8Array([104, 105])]);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return pick(rnd, [0, -0, 1.5, -2, 85000.5, Number.NaN, Number.POSITIVE_INFINITY, 1e300]);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64: {
      const value = pick(rnd, [0n, 7n, -3n, 9007199254740991n, 9007199254740993n, -(2n ** 63n)]);
      return longAsString ? value.toString() : value;
    }
    case ScalarType.UINT64:
    case ScalarType.FIXED64: {
      const value = pick(rnd, [0n, 7n, 2n ** 64n - 1n]);
      return longAsString ? value.toString() : value;
    }
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return pick(rnd, [0, 1, 4294967295]);
    default:
      return pick(rnd, [0, 1, -5, 2147483647, -2147483648]);
  }
}

function randomJson(rnd: Rnd, depth: number): unknown {
  const r = rnd();
  if (depth > 2 || r < 0.5) return pick(rnd, [null, true, false, 0, -1.25, 1e21, "", "text", "☃", "10"]);
  if (r < 0.75) return Array.from({ length: Math.floor(rnd() * 3) }, () => randomJson(rnd, depth + 1));
  return randomJsonObject(rnd, depth + 1);
}

function randomJsonObject(rnd: Rnd, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // Integer-like keys sort first in a JS object: both renderers must keep that order.
  for (const key of ["b", "2", "a", "10", "x y"]) if (rnd() < 0.4) out[key] = randomJson(rnd, depth);
  return out;
}

function randomTimestamp(rnd: Rnd): Record<string, unknown> {
  const ts: Record<string, unknown> = {};
  if (rnd() < 0.8) ts.seconds = pick(rnd, [0n, 1795230879n, -1n, 253402300799n, 1n]);
  if (rnd() < 0.8) ts.nanos = pick(rnd, [0, 1000, 743512999, 999999999, 1]);
  return ts;
}

const isWrapper = (desc: DescMessage) => desc.file === file_google_protobuf_wrappers;

/** A value for a singular message field, a list element or a oneof member, as an init shape or a message. */
function randomMessageValue(rnd: Rnd, field: DescField, desc: DescMessage, depth: number): unknown {
  if (desc.typeName === TimestampSchema.typeName) return rnd() < 0.5 ? randomTimestamp(rnd) : create(TimestampSchema, randomTimestamp(rnd));
  // protobuf-es keeps a Struct field as its JSON object, except inside google.protobuf.Value.
  if (desc.typeName === StructSchema.typeName && field.parent.typeName !== ValueSchema.typeName) return randomJsonObject(rnd, 1);
  // Singular wrapper fields hold the bare value.
  if (isWrapper(desc) && field.fieldKind === "message" && !field.oneof) {
    const inner = desc.fields[0] as DescField & { fieldKind: "scalar" };
    return randomScalar(rnd, inner.scalar, false);
  }
  const init = randomInit(rnd, desc, depth + 1);
  return rnd() < 0.3 ? create(desc, init) : init;
}

function randomFieldValue(rnd: Rnd, field: DescField, depth: number): unknown {
  switch (field.fieldKind) {
    case "scalar":
      return randomScalar(rnd, field.scalar, field.longAsString);
    case "enum":
      return rnd() < 0.15 ? 99 : pick(rnd, field.enum.values).number;
    case "message":
      return randomMessageValue(rnd, field, field.message, depth);
    case "list":
      return Array.from({ length: Math.floor(rnd() * 3) }, () =>
        field.listKind === "message"
          ? randomMessageValue(rnd, field, field.message, depth)
          : field.listKind === "enum"
            ? pick(rnd, field.enum.values).number
            : randomScalar(rnd, field.scalar, field.longAsString),
      );
    case "map": {
      const out: Record<string, unknown> = {};
      const keys = field.mapKey === ScalarType.STRING ? ["k", "2", "a b"] : field.mapKey === ScalarType.BOOL ? ["true", "false"] : ["1", "-2", "30"];
      for (const key of keys) {
        if (rnd() < 0.5) continue;
        out[key] =
          field.mapKind === "message"
            ? randomMessageValue(rnd, field, field.message, depth)
            : field.mapKind === "enum"
              ? pick(rnd, field.enum.values).number
              : randomScalar(rnd, field.scalar, false);
      }
      return out;
    }
  }
}

function randomInit(rnd: Rnd, desc: DescMessage, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  if (depth > 3) return init;
  for (const member of desc.members) {
    const r = rnd();
    if (r < 0.25) continue; // unset
    if (r < 0.32) {
      init[member.localName] = r < 0.29 ? null : undefined; // create() ignores both
      continue;
    }
    if (member.kind === "oneof") {
      if (rnd() < 0.15) {
        init[member.localName] = { case: undefined };
        continue;
      }
      const field = pick(rnd, member.fields);
      // A set case without a value renders the member's zero value.
      init[member.localName] = { case: field.localName, value: rnd() < 0.1 ? undefined : randomFieldValue(rnd, field, depth) };
    } else {
      init[member.localName] = randomFieldValue(rnd, member, depth);
    }
  }
  return init;
}

// ---------------------------------------------------------------------------
// The comparison

/** The rendering, as the bytes a client gets, or the error it throws. */
function outcome(render: () => unknown): { json: string } | { error: true } {
  try {
    return { json: JSON.stringify(render()) };
  } catch {
    return { error: true };
  }
}

/** The text renderer's outcome, in outcome()'s terms. */
function textOutcome(render: () => string): { json: string } | { error: true } {
  try {
    return { json: render() };
  } catch {
    return { error: true };
  }
}

function expectSame(schema: DescMessage, init: Record<string, unknown>): void {
  const reference = outcome(() => renderMessageByReflection(schema, create(schema, init)));
  expect(outcome(() => renderMessage(schema, init)), `init shape of ${schema.typeName}`).toEqual(reference);
  expect(outcome(() => renderMessage(schema, create(schema, init))), `message of ${schema.typeName}`).toEqual(reference);
  // The text renderer of the response bodies: JSON.stringify of the reference, exactly.
  expect(textOutcome(() => renderMessageJson(schema, init)), `text of ${schema.typeName}`).toEqual(reference);
  expect(textOutcome(() => renderMessageJson(schema, create(schema, init))), `text of message ${schema.typeName}`).toEqual(reference);
  // Idempotent replays render a message decoded from the stored binary
  // (when the random values can be encoded at all: a float32 cannot hold 1e300).
  let replayed;
  try {
    replayed = fromBinary(schema, toBinary(schema, create(schema, init)));
  } catch {
    return;
  }
  const replayReference = outcome(() => renderMessageByReflection(schema, replayed));
  expect(outcome(() => renderMessage(schema, replayed)), `replay of ${schema.typeName}`).toEqual(replayReference);
  expect(textOutcome(() => renderMessageJson(schema, replayed)), `replay text of ${schema.typeName}`).toEqual(replayReference);
}

describe("compiled renderer ≡ reference renderer", () => {
  it("knows the API's message types", () => {
    expect(apiSchemas.map((s) => s.typeName)).toContain(MessageSchema.typeName);
    expect(apiSchemas.length).toBeGreaterThan(40);
  });

  it("renders the zero message and the empty init shape of every type alike", () => {
    for (const schema of [...apiSchemas, ...otherSchemas]) {
      expectSame(schema, {});
      expect(renderMessage(schema, create(schema))).toStrictEqual(renderMessageByReflection(schema, create(schema)));
    }
  });

  it("renders random values of every type alike (seeded)", () => {
    for (const schema of [...apiSchemas, ...otherSchemas]) {
      const rnd = mulberry32(schema.typeName.length * 7919 + 17);
      for (let i = 0; i < 60; i++) expectSame(schema, randomInit(rnd, schema));
    }
  });

  it("renders a page of messages alike, with every optional part present", () => {
    const rnd = mulberry32(42);
    const data = Array.from({ length: 50 }, (_, i) => ({
      id: `m${i}`,
      channelId: "c1",
      actor: i % 2 ? { id: "a1", name: "planner" } : undefined,
      actorLabel: i % 3 ? undefined : "label",
      content: `hello ${i}`,
      metadata: randomJsonObject(rnd, 0),
      createdAt: { seconds: BigInt(1795230879 + i), nanos: i * 1000 },
      expiresAt: { seconds: 1795234479n, nanos: 0 },
      claimedBy: i % 4 ? undefined : { id: "a2", name: "worker" },
      claimedByKeyId: i % 4 ? undefined : "ak_2",
      claimedAt: i % 4 ? undefined : { seconds: 1795230900n, nanos: 5000 },
      mentions: [{ id: "a3", name: "x" }],
      acknowledgedBy: i % 5 ? [] : [{ id: "a2", name: "worker", occurredAt: { seconds: 1795230901n, nanos: 1000 } }],
      active: i % 7 !== 0,
    }));
    expectSame(ListMessagesResponseSchema, { data, limit: 50, nextCursor: "2026-11-21T03:14:39.743512Z" });
  });
});

describe("compiled renderer: edge cases", () => {
  it("falls back to the reference for a Struct it cannot pass through: a __proto__ key is dropped as before", () => {
    const metadata = JSON.parse('{"a": 1, "__proto__": {"b": 2}}') as JsonObject;
    expectSame(MessageSchema, { metadata });
    expect(renderMessage(MessageSchema, { metadata }).metadata).toEqual(renderMessageByReflection(MessageSchema, create(MessageSchema, { metadata })).metadata);
  });

  it("fails like the reference on a non-finite number in a Struct", () => {
    expect(() => renderMessageByReflection(MessageSchema, create(MessageSchema, { metadata: { n: Number.NaN } }))).toThrow();
    expect(() => renderMessage(MessageSchema, { metadata: { n: Number.NaN } })).toThrow();
  });

  it("returns a Struct's own plain JSON unchanged", () => {
    const metadata = { z: 1, nested: { list: [1, "two", null, { deep: true }] }, "1": "first" };
    expect(JSON.stringify(renderMessage(MessageSchema, { metadata }).metadata)).toBe(JSON.stringify(metadata));
  });

  it("renders a oneof member selected without a value as its zero value", () => {
    expectSame(JobSchema, { result: { case: "pdf", value: undefined } });
    expect(renderMessage(JobSchema, { result: { case: "pdf" } }).result).toEqual({ url: "" });
  });

  it("renders values of the wrong JS type as the reference does (a handler bug, but not a different one)", () => {
    expectSame(MessageSchema, { mentions: [undefined, null, { id: "a" }] as never, active: "yes" as never, content: 5 as never });
    expectSame(MessageSchema, { createdAt: { seconds: 5, nanos: undefined } as never, actorLabel: 0 as never });
  });

  it("renders an int64 given as a number or as a string (jstype) as a number", () => {
    expectSame(Int64ValueSchema, { value: 12n });
    expect(renderMessage(Int64ValueSchema, { value: 12n })).toEqual({ value: 12 });
  });
});
