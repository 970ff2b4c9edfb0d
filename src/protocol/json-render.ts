/**
 * The REST JSON renderer of the hot path (docs/decisions.md#the-apis-shape), compiled once per
 * message type into an array of per-member writers that read properties
 * directly. Generic reflection (json-render-reflect.ts) cost a ReflectMessage,
 * a ReflectList and several descriptor checks per field of every message of a
 * page; this does the same work with plain property reads.
 *
 * The response bodies are rendered as text by json-render-text.ts, from the
 * same field readers.
 *
 * It renders a protobuf-es message or its init shape alike, with create()'s
 * reading of an init shape (a missing or null field is unset, so it renders
 * as its default), so the REST path can skip create()'s copy of a handler's
 * result. The output is the reference renderer's, key for key and value for
 * value; test/unit/json-render.test.ts compares the two.
 *
 * Compiled: scalars, enums, nested messages, Timestamp, Struct, Empty,
 * FieldMask, lists of scalars, enums, messages and Timestamps, and oneofs of
 * scalars, enums, messages and Timestamps. A message type with any other
 * member (maps, wrappers, Value, Duration, well-known types in lists or
 * oneofs) renders through the reference renderer, after create() for an
 * init shape.
 */
import {
  ScalarType,
  create,
  isMessage,
  protoInt64,
  type DescField,
  type DescMessage,
  type DescOneof,
} from "@bufbuild/protobuf";
import { scalarZeroValue, type ScalarValue } from "@bufbuild/protobuf/reflect";
import { Edition, EmptySchema, FeatureSet_FieldPresence, FieldMaskSchema, StructSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "../model/json.js";
import { MICROS_PER_SECOND, formatTimestamp, type Micros } from "../model/time.js";
import { enumJsonLookup } from "./json-enums.js";
import { isWellKnown, renderMessageByReflection, renderScalar } from "./json-render-reflect.js";
import type { JsonObject } from "../model/json.js";

/** A message, or its init shape: the renderers only read properties. */
export type Source = Record<string, unknown>;
type Renderer = (source: Source) => JsonObject;
/** Renders one member (field or oneof) of a source. */
export type MemberWriter = (source: Source) => JsonValue;
/** Renders a field's value that is present (not undefined or null). */
export type ValueWriter = (value: unknown) => JsonValue;

export const EDITION_PROTO3 = Edition.EDITION_PROTO3;
export const TYPE_TIMESTAMP = TimestampSchema.typeName;
const TYPE_STRUCT = StructSchema.typeName;
const TYPE_EMPTY = EmptySchema.typeName;
const TYPE_FIELD_MASK = FieldMaskSchema.typeName;
/** Well-known types a singular field renders directly (see presentMessageWriter). */
const DIRECT_WELL_KNOWN = new Set<string>([TYPE_STRUCT, TYPE_EMPTY, TYPE_FIELD_MASK]);

/** Thrown by a writer that meets a value it does not render exactly like the reference (see structWriter). */
class NeedsReflection extends Error {}
export const NEEDS_REFLECTION = new NeedsReflection("needs the reference renderer");

const renderers = new WeakMap<DescMessage, Renderer>();

/** Renders a message, or its init shape, as its REST JSON object. */
export function renderMessage(schema: DescMessage, message: object): JsonObject {
  return rendererOf(schema)(message as Source);
}

function rendererOf(desc: DescMessage): Renderer {
  let renderer = renderers.get(desc);
  if (renderer === undefined) {
    renderer = compile(desc);
    renderers.set(desc, renderer);
  }
  return renderer;
}

/** The reference renderer on a source: create() turns an init shape into the message it stands for. */
export const byReflection = (desc: DescMessage, source: Source): JsonObject =>
  renderMessageByReflection(desc, create(desc, source as Parameters<typeof create>[1]));

function compile(desc: DescMessage): Renderer {
  if (!desc.members.every(compilable)) return (source) => byReflection(desc, source);
  const names: string[] = [];
  const writers: MemberWriter[] = [];
  for (const member of desc.members) {
    names.push(member.name);
    writers.push(member.kind === "oneof" ? oneofWriter(member) : fieldWriter(desc, member));
  }
  const count = names.length;
  return (source) => {
    try {
      const out: JsonObject = {};
      for (let i = 0; i < count; i++) out[names[i] as string] = (writers[i] as MemberWriter)(source);
      return out;
    } catch (err) {
      if (err === NEEDS_REFLECTION) return byReflection(desc, source);
      throw err;
    }
  };
}

// ---------------------------------------------------------------------------
// What compiles

const compiledMessage = (desc: DescMessage): boolean => !isWellKnown(desc) || desc.typeName === TYPE_TIMESTAMP;

/** Whether the compiled renderers take this member; a message with any other renders by reflection. */
export function compilable(member: DescField | DescOneof): boolean {
  if (member.kind === "oneof") return member.fields.every((f) => f.fieldKind !== "message" || compiledMessage(f.message));
  switch (member.fieldKind) {
    case "scalar":
    case "enum":
      return true;
    case "message":
      return compiledMessage(member.message) || DIRECT_WELL_KNOWN.has(member.message.typeName);
    case "list":
      return member.listKind !== "message" || compiledMessage(member.message);
    case "map":
      return false;
  }
}

// ---------------------------------------------------------------------------
// Fields

const hasOwn = (source: Source, key: string): boolean => Object.prototype.hasOwnProperty.call(source, key);

export function fieldWriter(parent: DescMessage, field: DescField): MemberWriter {
  const key = field.localName;
  switch (field.fieldKind) {
    case "scalar":
    case "enum": {
      const write = field.fieldKind === "scalar" ? scalarWriter(field) : enumWriter(field);
      if (field.presence !== FeatureSet_FieldPresence.EXPLICIT) {
        // Implicit presence: absent from an init shape means the zero value
        // (or its default, for proto2 fields), as create() would fill it in.
        const zero = write(field.getDefaultValue() ?? (field.fieldKind === "scalar" ? scalarZeroValue(field.scalar, false) : (field.enum.values[0]?.number ?? 0)));
        return (source) => {
          const value = source[key];
          return value === undefined || value === null ? zero : write(value);
        };
      }
      // Outside proto3, a message keeps default values of explicit-presence
      // fields on its prototype: only an own property is set.
      const checkOwn = parent.file.edition !== EDITION_PROTO3;
      return (source) => {
        const value = source[key];
        if (value === undefined || value === null) return null;
        if (checkOwn && isMessage(source) && !hasOwn(source, key)) return null;
        return write(value);
      };
    }
    case "message": {
      const write = messageWriter(field.message);
      return (source) => {
        const value = source[key];
        return value === undefined || value === null ? null : write(value);
      };
    }
    case "list": {
      const write =
        field.listKind === "message"
          ? messageWriter(field.message, true)
          : field.listKind === "enum"
            ? enumElementWriter(field)
            : scalarWriter(field);
      return (source) => {
        const value = source[key] as unknown[] | undefined | null;
        const items: JsonValue[] = [];
        if (value === undefined || value === null) return items;
        // Not map(): a hole renders like undefined, as the reference's iteration does.
        for (let i = 0; i < value.length; i++) items.push(write(value[i]));
        return items;
      };
    }
    case "map":
      throw new Error(`map field ${field.toString()} is not compiled`);
  }
}

/**
 * The set member of a oneof, under the oneof's name; null when none is. The
 * member renders even with an undefined value (its zero value), as a set
 * oneof case does in a message.
 */
export function oneofWriter(oneof: DescOneof): MemberWriter {
  const cases = new Map<string, ValueWriter>();
  for (const field of oneof.fields) {
    if (field.fieldKind === "message") cases.set(field.localName, messageWriter(field.message, true));
    else if (field.fieldKind === "enum") {
      const write = enumWriter(field);
      const zero = field.enum.values[0]?.number ?? 0;
      cases.set(field.localName, (value) => write(value === undefined || value === null ? zero : value));
    } else if (field.fieldKind === "scalar") {
      const write = scalarWriter(field);
      const zero = write(scalarZeroValue(field.scalar, false));
      // Only undefined is the zero value here; the reference renders a null as null.
      cases.set(field.localName, (value) => (value === undefined ? zero : write(value)));
    }
  }
  const key = oneof.localName;
  return (source) => {
    const selected = source[key] as { case?: unknown; value?: unknown } | undefined | null;
    if (selected === undefined || selected === null || typeof selected.case !== "string") return null;
    const write = cases.get(selected.case);
    return write === undefined ? null : write(selected.value);
  };
}

// ---------------------------------------------------------------------------
// Values

export function scalarWriter(field: DescField & { scalar: ScalarType }): ValueWriter {
  const type = field.scalar;
  if ("longAsString" in field && field.longAsString) {
    // A 64-bit field kept as a string reads back as a bigint (then a number).
    const unsigned = type === ScalarType.UINT64 || type === ScalarType.FIXED64;
    return (value) =>
      renderScalar(type, typeof value === "string" ? (unsigned ? protoInt64.uParse(value) : protoInt64.parse(value)) : (value as ScalarValue));
  }
  if (type === ScalarType.STRING) return (value) => (typeof value === "string" ? value : renderScalar(type, value as ScalarValue));
  return (value) => renderScalar(type, value as ScalarValue);
}

export function enumWriter(field: DescField & { fieldKind: "enum" }): ValueWriter {
  const name = enumJsonLookup(field.enum);
  return (value) => name(value as number);
}

/** List elements: only numbers name enum values. */
function enumElementWriter(field: DescField & { fieldKind: "list" }): ValueWriter {
  const name = field.enum === undefined ? () => null : enumJsonLookup(field.enum);
  return (value) => (typeof value === "number" ? name(value) : null);
}

/**
 * A message value of type `desc`. Singular fields only call it with a value;
 * list elements and oneof members (`orZero`) may hold none, which the
 * reference renders as the zero message.
 */
function messageWriter(desc: DescMessage, orZero = false): ValueWriter {
  const present = presentMessageWriter(desc);
  if (!orZero) return present;
  return (value) => present(value === undefined || value === null ? {} : value);
}

function presentMessageWriter(desc: DescMessage): ValueWriter {
  switch (desc.typeName) {
    case TYPE_TIMESTAMP:
      return (value) => formatTimestamp(timestampMicros(value as TimestampLike));
    case TYPE_STRUCT:
      return structWriter;
    case TYPE_EMPTY:
      return () => ({});
    case TYPE_FIELD_MASK:
      return (value) => {
        const paths = (value as { paths?: string[] | null }).paths;
        return paths === undefined || paths === null ? "" : paths.join(",");
      };
  }
  // Resolved on first use: a message type may contain itself.
  let renderer: Renderer | undefined;
  return (value) => (renderer ??= rendererOf(desc))(value as Source);
}

/** A google.protobuf.Timestamp message or its init shape. */
export type TimestampLike = { seconds?: unknown; nanos?: unknown };

/** Timestamp seconds and nanos as microseconds; an init shape may leave either out (zero). */
export function timestampMicros(ts: TimestampLike): Micros {
  const seconds = ts.seconds === undefined || ts.seconds === null ? 0 : Number(ts.seconds);
  const nanos = typeof ts.nanos === "number" ? ts.nanos : 0;
  return seconds * MICROS_PER_SECOND + Math.floor(nanos / 1000);
}

/**
 * A Struct field holds its JSON object (protobuf-es keeps Struct fields as
 * JsonObject), which the reference renderer rebuilds as a Struct and turns
 * back into the same JSON. So the object itself is the output, provided it is
 * plain JSON: anything else (a non-finite number, undefined, a class
 * instance, a "__proto__" key, which a Struct's map drops) goes to the
 * reference renderer, so that it fails or drops exactly as before.
 */
function structWriter(value: unknown): JsonValue {
  if (!isPlainJson(value) || value === null || typeof value !== "object" || Array.isArray(value)) throw NEEDS_REFLECTION;
  return value as JsonObject;
}

function isPlainJson(value: unknown): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null) return true;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i])) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return false;
      for (const key in value) {
        if (key === "__proto__" || !isPlainJson((value as Record<string, unknown>)[key])) return false;
      }
      return true;
    }
    default:
      return false;
  }
}
