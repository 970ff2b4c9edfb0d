/**
 * The reference renderer of the REST JSON (docs/decisions.md#the-apis-shape), by generic
 * reflection over a protobuf-es message. It is the specification the compiled
 * renderer (json-render.ts) is tested against, and that renderer's fallback
 * for the field kinds it does not compile (maps, wrappers, Value, Duration…).
 *
 * - snake_case keys in declaration order, every field present (null / [] / {}),
 * - integers as numbers, short lowercase enum names with UNSPECIFIED as null,
 * - timestamps with exactly six fractional digits,
 * - a oneof as one key named after the oneof.
 */
import { ScalarType, isMessage, toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { isReflectMessage, reflect, type ReflectMessage, type ScalarValue } from "@bufbuild/protobuf/reflect";
import { EmptySchema, FeatureSet_FieldPresence, FieldMaskSchema, TimestampSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { JsonObject, JsonValue } from "../model/json.js";
import { formatTimestamp, fromProtoTimestamp } from "../model/time.js";
import { enumToJson } from "./json-enums.js";


export const isWellKnown = (desc: DescMessage): boolean => desc.typeName.startsWith("google.protobuf.");

const hasExplicitPresence = (field: DescField): boolean => field.presence === FeatureSet_FieldPresence.EXPLICIT;

/** Renders a message as its REST JSON object, by reflection. */
export function renderMessageByReflection(schema: DescMessage, message: Message): JsonObject {
  return renderFields(reflect(schema, message));
}

function renderFields(r: ReflectMessage): JsonObject {
  const out: JsonObject = {};
  // members keeps declaration order and lists a oneof once, where it is declared.
  for (const member of r.desc.members) {
    if (member.kind === "oneof") {
      const selected = r.oneofCase(member);
      out[member.name] = selected === undefined ? null : renderField(r, selected);
    } else {
      out[member.name] = renderField(r, member);
    }
  }
  return out;
}

function renderField(r: ReflectMessage, field: DescField): JsonValue {
  switch (field.fieldKind) {
    case "list": {
      const items: JsonValue[] = [];
      for (const item of r.get(field)) items.push(renderElement(field, item));
      return items;
    }
    case "map": {
      const entries: [string, JsonValue][] = [];
      for (const [key, value] of r.get(field)) entries.push([String(key), renderElement(field, value)]);
      return Object.fromEntries(entries);
    }
    case "message":
      return r.isSet(field) ? renderMessageValue(r.get(field)) : null;
    case "enum":
      return hasExplicitPresence(field) && !r.isSet(field) ? null : enumToJson(field.enum, r.get(field));
    case "scalar":
      return hasExplicitPresence(field) && !r.isSet(field) ? null : renderScalar(field.scalar, r.get(field));
  }
}

/** An element of a list or a value of a map, as ReflectList/ReflectMap hand it out. */
function renderElement(field: DescField & { fieldKind: "list" | "map" }, item: unknown): JsonValue {
  const kind = field.fieldKind === "list" ? field.listKind : field.mapKind;
  if (kind === "message") return isReflectMessage(item) ? renderMessageValue(item) : null;
  if (kind === "enum") return typeof item === "number" && field.enum ? enumToJson(field.enum, item) : null;
  return field.scalar === undefined ? null : renderScalar(field.scalar, item as ScalarValue);
}

function renderMessageValue(m: ReflectMessage): JsonValue {
  const message = m.message;
  if (isMessage(message, TimestampSchema)) return formatTimestamp(fromProtoTimestamp(message));
  // Our clients send and read field names in snake_case, so masks stay as stored.
  if (isMessage(message, FieldMaskSchema)) return message.paths.join(",");
  if (isMessage(message, EmptySchema)) return {};
  if (isMessage(message, ValueSchema) && message.kind.case === undefined) return null;
  // Struct, Value, ListValue, wrappers, Duration: their canonical JSON is already plain JSON.
  if (isWellKnown(m.desc)) return toJson(m.desc, message) as JsonValue;
  return renderFields(m);
}

/** A scalar as JSON: integers are numbers (even int64), bytes base64, non-finite floats null. */
export function renderScalar(type: ScalarType, value: ScalarValue): JsonValue {
  if (typeof value === "bigint") return Number(value); // Integers are JSON numbers, even int64 (docs/decisions.md#json-integers)
  if (typeof value === "number") {
    if ((type === ScalarType.DOUBLE || type === ScalarType.FLOAT) && !Number.isFinite(value)) return null;
    return value;
  }
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  return value;
}
