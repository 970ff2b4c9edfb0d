/**
 * The REST JSON dialect of the API (docs/decisions.md#the-apis-shape), between plain JSON and
 * protobuf-es messages. protobuf-es' own toJson/fromJson speak the canonical
 * proto3 JSON mapping (camelCase, int64 as strings, omitted defaults,
 * "CHANNEL_MODE_CLAIMABLE"), which the contract does not, so these modules
 * walk the descriptors themselves:
 *
 * - Rendering (src/protocol/json-render.ts, compiled per message type; the
 *   reference implementation by reflection is json-render-reflect.ts beside
 *   it, shared with the webhook payloads): snake_case keys in
 *   declaration order, every field present (null / [] / {}), integers as
 *   numbers, short lowercase enum names with UNSPECIFIED as null, timestamps
 *   with exactly six fractional digits, and a oneof as one key named after
 *   the oneof.
 * - Decoding (here): binds body, query string and path variables the way
 *   google.api.http (and grpc-gateway) do, with strict JSON types and errors
 *   that carry the contract's codes (`invalid_<field>` when the catalog has
 *   one). Bad input only ever raises ApiError.
 */
import {
  ScalarType,
  create,
  fromJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type Message,
  type MessageShape,
  type JsonValue as ProtobufJsonValue,
} from "@bufbuild/protobuf";
import { reflect, type ReflectMessage, type ScalarValue } from "@bufbuild/protobuf/reflect";
import { EmptySchema, FieldMaskSchema, ListValueSchema, StructSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { ApiError } from "../../model/errors.js";
import { parseTimestamp, toProtoTimestamp } from "../../model/time.js";
import { assertNoProtoKey, assertStorableText, fieldErrorCode } from "../rpc/validate-request.js";
import { enumFromJson, enumJsonNames } from "../../protocol/json-enums.js";
import { isWellKnown } from "../../protocol/json-render-reflect.js";

export { fieldErrorCode } from "../rpc/validate-request.js";

const TYPE_TIMESTAMP = TimestampSchema.typeName;
const TYPE_STRUCT = StructSchema.typeName;
const TYPE_LIST_VALUE = ListValueSchema.typeName;
const TYPE_FIELD_MASK = FieldMaskSchema.typeName;
const TYPE_EMPTY = EmptySchema.typeName;

// ---------------------------------------------------------------------------
// Decoding

export interface RequestInput {
  /** Variables captured from the path template, already percent-decoded. */
  pathParams: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON body, or undefined when the request had none. */
  body: unknown;
  /** The HttpRule's body: "" (no body), "*" (the whole request) or a field name. */
  bodyField: string;
  /** docs/decisions.md#json-bodies: unknown body keys are ignored on create and rejected on PATCH. */
  rejectUnknownBodyFields: boolean;
}

/**
 * Builds a request message from a REST request: the body first, then query
 * parameters for the fields neither the path nor the body binds, then (for
 * PATCH-style rules) the update mask from the body's keys, then the path
 * variables, which override anything else.
 */
export function decodeRequest<T extends DescMessage>(schema: T, input: RequestInput): MessageShape<T> {
  const message = create(schema);
  const root = reflect(schema, message);
  const pathBound = Object.keys(input.pathParams).map((name) => canonicalPath(schema, name));
  const bodyKeys = bindBody(root, input);
  bindQuery(root, input, pathBound);
  fillUpdateMask(root, input, bodyKeys);
  bindPath(root, input.pathParams);
  return message;
}

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Binds the body; returns the proto names of the known keys it had (for the update mask). */
function bindBody(root: ReflectMessage, input: RequestInput): string[] {
  if (input.bodyField === "") return [];
  const body = input.body === undefined ? {} : input.body;
  if (!isJsonObject(body)) {
    throw new ApiError("invalid_json_shape", `The request body must be a JSON object, not ${describeJson(body)}`);
  }
  const target = input.bodyField === "*" ? root.desc : bodyFieldOf(root.desc, input.bodyField).message;
  if (input.rejectUnknownBodyFields && !isWellKnown(target)) rejectUnknownKeys(target, body);

  if (input.bodyField === "*") {
    decodeObjectInto(root, body, "");
  } else {
    const field = bodyFieldOf(root.desc, input.bodyField);
    root.set(field, decodeMessage(field, field.message, body, ""));
  }
  if (isWellKnown(target)) return [];
  const names: string[] = [];
  for (const key of Object.keys(body)) {
    const field = findField(target, key);
    if (field !== undefined && !names.includes(field.name)) names.push(field.name);
  }
  return names;
}

function bodyFieldOf(desc: DescMessage, name: string): DescField & { fieldKind: "message" } {
  const field = desc.fields.find((f) => f.name === name);
  // A rule naming a missing or non-message field is a bug in the proto, not bad input.
  if (field?.fieldKind !== "message") {
    throw new Error(`HttpRule body "${name}" is not a message field of ${desc.typeName}`);
  }
  return field;
}

/** Unknown fields on PATCH: every key the request cannot take is listed at once, nested ones dotted. */
function rejectUnknownKeys(desc: DescMessage, body: Record<string, unknown>): void {
  const unknown: string[] = [];
  collectUnknownKeys(desc, body, "", unknown);
  if (unknown.length > 0) {
    throw new ApiError("invalid_fields", `Unknown field${unknown.length > 1 ? "s" : ""}: ${unknown.join(", ")}`, {
      details: { fields: unknown },
    });
  }
}

function collectUnknownKeys(desc: DescMessage, object: Record<string, unknown>, prefix: string, out: string[]): void {
  for (const [key, value] of Object.entries(object)) {
    const field = findField(desc, key);
    if (field === undefined) {
      out.push(prefix + key);
      continue;
    }
    const nested = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message");
    if (!nested || field.message === undefined || isWellKnown(field.message)) continue;
    const elements = field.fieldKind === "list" && Array.isArray(value) ? value : [value];
    for (const element of elements) {
      if (isJsonObject(element)) collectUnknownKeys(field.message, element, `${prefix}${field.name}.`, out);
    }
  }
}

const fieldIndex = new WeakMap<DescMessage, Map<string, DescField>>();

/** Finds a field by its proto name (snake_case) or its JSON name (camelCase). */
function findField(desc: DescMessage, name: string): DescField | undefined {
  let index = fieldIndex.get(desc);
  if (index === undefined) {
    index = new Map();
    for (const field of desc.fields) {
      index.set(field.jsonName, field);
      index.set(field.name, field); // the proto name wins if the two ever collide
    }
    fieldIndex.set(desc, index);
  }
  return index.get(name);
}

function decodeObjectInto(r: ReflectMessage, object: Record<string, unknown>, prefix: string): void {
  for (const [key, value] of Object.entries(object)) {
    const field = findField(r.desc, key);
    if (field !== undefined) decodeFieldInto(r, field, value, prefix + field.name);
  }
}

function decodeFieldInto(r: ReflectMessage, field: DescField, json: unknown, path: string): void {
  // null (or a key set to undefined by a caller) leaves the field unset; on PATCH
  // the key still lands in the update mask, which is how a field is cleared.
  if (json === null || json === undefined) {
    r.clear(field);
    return;
  }
  switch (field.fieldKind) {
    case "scalar":
      r.set(field, scalarFromJson(field, field.scalar, json, path));
      return;
    case "enum":
      r.set(field, enumFromJsonValue(field, field.enum, json, path));
      return;
    case "message":
      r.set(field, decodeMessage(field, field.message, json, path));
      return;
    case "list": {
      if (!Array.isArray(json)) throw invalid(field, path, `must be an array of ${elementNoun(field)}`);
      const list = r.get(field);
      list.clear();
      json.forEach((item: unknown, i) => {
        if (item === null || item === undefined) {
          throw invalid(field, path, `must be an array of ${elementNoun(field)} (item ${i + 1} is null)`);
        }
        const itemPath = `${path}[${i}]`;
        if (field.listKind === "scalar") list.add(scalarFromJson(field, field.scalar, item, path, itemPath));
        else if (field.listKind === "enum") list.add(enumFromJsonValue(field, field.enum, item, path, itemPath));
        else list.add(decodeMessage(field, field.message, item, path, itemPath));
      });
      return;
    }
    case "map": {
      if (!isJsonObject(json)) throw invalid(field, path, "must be a JSON object");
      const map = r.get(field);
      map.clear();
      for (const [key, item] of Object.entries(json)) {
        const itemPath = `${path}.${key}`;
        const mapKey = scalarFromText(field, field.mapKey, key, path, itemPath);
        if (item === null || item === undefined) throw invalid(field, path, `must not have null values ('${itemPath}')`);
        if (field.mapKind === "scalar") map.set(mapKey, scalarFromJson(field, field.scalar, item, path, itemPath));
        else if (field.mapKind === "enum") map.set(mapKey, enumFromJsonValue(field, field.enum, item, path, itemPath));
        else map.set(mapKey, decodeMessage(field, field.message, item, path, itemPath));
      }
      return;
    }
  }
}

/**
 * Decodes a JSON value into a message of type `desc` held by `field` (a
 * singular field, a list element or a map value). `path` names the field in
 * errors; `shown` is what the message quotes (the element, for lists).
 */
function decodeMessage(field: DescField, desc: DescMessage, json: unknown, path: string, shown = path): ReflectMessage {
  switch (desc.typeName) {
    case TYPE_TIMESTAMP: {
      const micros = typeof json === "string" ? parseTimestamp(json) : undefined;
      if (micros === undefined) throw invalid(field, path, TIMESTAMP_EXPECTATION, shown);
      return reflect(TimestampSchema, create(TimestampSchema, toProtoTimestamp(micros)));
    }
    case TYPE_FIELD_MASK:
      if (typeof json !== "string") throw invalid(field, path, FIELD_MASK_EXPECTATION, shown);
      return reflect(FieldMaskSchema, fieldMaskFromText(field, json, path, shown));
    case TYPE_EMPTY:
      if (!isJsonObject(json)) throw invalid(field, path, "must be a JSON object", shown);
      return reflect(EmptySchema, create(EmptySchema));
    case TYPE_STRUCT:
      if (!isJsonObject(json)) throw invalid(field, path, "must be a JSON object", shown);
      return reflect(desc, wellKnownFromJson(field, desc, json, path, "must be a JSON object", shown));
    case TYPE_LIST_VALUE:
      if (!Array.isArray(json)) throw invalid(field, path, "must be a JSON array", shown);
      return reflect(desc, wellKnownFromJson(field, desc, json, path, "must be a JSON array", shown));
  }
  if (isWellKnown(desc)) {
    // Value, wrappers, Duration: the canonical proto3 JSON form.
    return reflect(desc, wellKnownFromJson(field, desc, json, path, `must be a valid ${desc.name}`, shown));
  }
  if (!isJsonObject(json)) throw invalid(field, path, "must be a JSON object", shown);
  const nested = reflect(desc, create(desc));
  // The body-bound message itself is the caller's top level: its keys are not prefixed.
  decodeObjectInto(nested, json, shown === "" ? "" : `${shown}.`);
  return nested;
}

function wellKnownFromJson(
  field: DescField,
  desc: DescMessage,
  json: unknown,
  path: string,
  expectation: string,
  shown: string,
): Message {
  // protobuf-es would drop a "__proto__" key unseen (validate-request.ts): refused here, where the JSON still has it.
  assertNoProtoKey(field, shown, json);
  try {
    return fromJson(desc, json as ProtobufJsonValue);
  } catch {
    // protobuf-es refuses Struct values nested past its recursion limit;
    // say so rather than blame the value's type.
    const depth = nestingDepth(json);
    throw invalid(field, path, depth >= PROTOBUF_RECURSION_LIMIT ? `must nest fewer than ${PROTOBUF_RECURSION_LIMIT} levels of objects and arrays (it nests ${depth})` : expectation, shown);
  }
}

/** protobuf-es' fromJson default: each nested object or array is one level. */
const PROTOBUF_RECURSION_LIMIT = 100;

/** How deep arrays and objects nest in a JSON value, without recursion (the value may nest arbitrarily deep). */
function nestingDepth(json: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[json, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push([child, depth + 1]);
  }
  return deepest;
}

const TIMESTAMP_EXPECTATION = "must be an RFC 3339 timestamp such as 2026-11-21T03:14:39.743512Z";
const FIELD_MASK_EXPECTATION = "must be a comma-separated list of field names";
const FIELD_NAME_PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

function fieldMaskFromText(field: DescField, text: string, path: string, shown: string) {
  const paths = text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  if (!paths.every((p) => FIELD_NAME_PATH.test(p))) throw invalid(field, path, FIELD_MASK_EXPECTATION, shown);
  return create(FieldMaskSchema, { paths });
}

function enumFromJsonValue(field: DescField, desc: DescEnum, json: unknown, path: string, shown = path): number {
  const value = typeof json === "string" ? enumFromJson(desc, json) : undefined;
  if (value === undefined) {
    const names = enumJsonNames(desc).map((n) => JSON.stringify(n));
    throw invalid(field, path, `must be one of ${names.join(", ")}`, shown);
  }
  return value;
}

// ---- scalars

interface IntegerRange {
  readonly min: bigint;
  readonly max: bigint;
  readonly is64: boolean;
}

const INT32: IntegerRange = { min: -(2n ** 31n), max: 2n ** 31n - 1n, is64: false };
const UINT32: IntegerRange = { min: 0n, max: 2n ** 32n - 1n, is64: false };
const INT64: IntegerRange = { min: -(2n ** 63n), max: 2n ** 63n - 1n, is64: true };
const UINT64: IntegerRange = { min: 0n, max: 2n ** 64n - 1n, is64: true };
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER);

function integerRange(type: ScalarType): IntegerRange | undefined {
  switch (type) {
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return INT32;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return UINT32;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return INT64;
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return UINT64;
    default:
      return undefined;
  }
}

const FLOAT_MAX = 3.4028234663852886e38;
const CANONICAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL_NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const BASE64 = /^([A-Za-z0-9+/_-]{4})*([A-Za-z0-9+/_-]{2}(==)?|[A-Za-z0-9+/_-]{3}=?)?$/;

/** A JSON body value: strict JSON types (integers must be numbers, not numeric strings: docs/decisions.md#json-integers). */
function scalarFromJson(field: DescField, type: ScalarType, json: unknown, path: string, shown = path): ScalarValue {
  const range = integerRange(type);
  if (range !== undefined) {
    if (typeof json !== "number" || !Number.isInteger(json)) throw invalid(field, path, "must be an integer", shown);
    // A JSON number beyond 2^53 has already lost digits, so 64-bit values must be safe integers.
    const min = range.is64 && range.min < -SAFE_MAX ? -SAFE_MAX : range.min;
    const max = range.is64 && range.max > SAFE_MAX ? SAFE_MAX : range.max;
    return integerInRange(field, BigInt(json), { ...range, min, max }, path, shown);
  }
  switch (type) {
    case ScalarType.STRING:
      if (typeof json !== "string") throw invalid(field, path, "must be a string", shown);
      assertStorableText(field, shown, json);
      return json;
    case ScalarType.BOOL:
      if (typeof json !== "boolean") throw invalid(field, path, "must be true or false", shown);
      return json;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof json !== "number") throw invalid(field, path, "must be a number", shown);
      return floatInRange(field, type, json, path, shown);
    case ScalarType.BYTES:
      if (typeof json !== "string") throw invalid(field, path, "must be a base64 string", shown);
      return bytesFromBase64(field, json, path, shown);
    default:
      throw new Error(`unhandled scalar type ${String(type)}`);
  }
}

/** A query-string or path value: text converted per the field's type. */
function scalarFromText(field: DescField, type: ScalarType, text: string, path: string, shown = path): ScalarValue {
  const range = integerRange(type);
  if (range !== undefined) {
    if (!CANONICAL_INTEGER.test(text)) throw invalid(field, path, "must be an integer", shown);
    return integerInRange(field, BigInt(text), range, path, shown);
  }
  switch (type) {
    case ScalarType.STRING:
      assertStorableText(field, shown, text);
      return text;
    case ScalarType.BOOL:
      if (text !== "true" && text !== "false") throw invalid(field, path, "must be true or false", shown);
      return text === "true";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (!DECIMAL_NUMBER.test(text)) throw invalid(field, path, "must be a number", shown);
      return floatInRange(field, type, Number(text), path, shown);
    case ScalarType.BYTES:
      return bytesFromBase64(field, text, path, shown);
    default:
      throw new Error(`unhandled scalar type ${String(type)}`);
  }
}

function integerInRange(field: DescField, value: bigint, range: IntegerRange, path: string, shown: string): ScalarValue {
  if (value < range.min || value > range.max) {
    throw invalid(field, path, `must be an integer from ${range.min} to ${range.max}`, shown);
  }
  return range.is64 ? value : Number(value);
}

function floatInRange(field: DescField, type: ScalarType, value: number, path: string, shown: string): number {
  const limit = type === ScalarType.FLOAT ? FLOAT_MAX : Number.MAX_VALUE;
  if (!Number.isFinite(value) || Math.abs(value) > limit) throw invalid(field, path, "must be a finite number", shown);
  return value;
}

function bytesFromBase64(field: DescField, text: string, path: string, shown: string): Uint8Array {
  if (!BASE64.test(text)) throw invalid(field, path, "must be a base64 string", shown);
  return new Uint8Array(Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64"));
}

// ---- query string and path

/** A field path from the request root, resolved against proto and JSON names. */
type FieldChain = DescField[];

/** The fields a dotted path (proto or JSON names) names, outermost first; undefined when it names none. */
export function resolveFieldPath(root: DescMessage, dotted: string): FieldChain | undefined {
  const chain: FieldChain = [];
  let desc: DescMessage | undefined = root;
  for (const part of dotted.split(".")) {
    if (desc === undefined) return undefined;
    const field = findField(desc, part);
    if (field === undefined) return undefined;
    chain.push(field);
    // Only singular, non-well-known messages can be stepped into.
    desc = field.fieldKind === "message" && !isWellKnown(field.message) ? field.message : undefined;
  }
  return chain;
}

function canonicalPath(root: DescMessage, dotted: string): string {
  return resolveFieldPath(root, dotted)?.map((f) => f.name).join(".") ?? dotted;
}

/** Whether two dotted field paths are the same field or one contains the other. */
export const overlaps = (a: string, b: string) => a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);

/** Whether a field given as text (query or path) can take the value; the rest need a JSON body. */
export function acceptsText(field: DescField): boolean {
  switch (field.fieldKind) {
    case "scalar":
    case "enum":
      return true;
    case "list":
      return field.listKind !== "message";
    case "message":
      return field.message.typeName === TYPE_TIMESTAMP || field.message.typeName === TYPE_FIELD_MASK;
    case "map":
      return false;
  }
}

function bindQuery(root: ReflectMessage, input: RequestInput, pathBound: string[]): void {
  const names = [...new Set(input.query.keys())];
  const rejected: string[] = [];
  // Grouped by canonical field path, so `max_messages` and `maxMessages` are one field.
  const bindings = new Map<string, { chain: FieldChain; values: string[] }>();
  for (const name of names) {
    const chain = resolveFieldPath(root.desc, name);
    const leaf = chain?.at(-1);
    const canonical = chain?.map((f) => f.name).join(".") ?? name;
    const boundByBody =
      input.bodyField === "*" || (input.bodyField !== "" && overlaps(canonical, input.bodyField));
    const boundByPath = pathBound.some((p) => overlaps(canonical, p));
    if (chain === undefined || leaf === undefined || !acceptsText(leaf) || boundByBody || boundByPath) {
      rejected.push(name);
    } else {
      const binding = bindings.get(canonical) ?? { chain, values: [] };
      binding.values.push(...input.query.getAll(name));
      bindings.set(canonical, binding);
    }
  }
  if (rejected.length > 0) {
    throw new ApiError(
      "invalid_fields",
      `Unknown query parameter${rejected.length > 1 ? "s" : ""}: ${rejected.join(", ")}`,
      { details: { fields: rejected } },
    );
  }
  for (const { chain, values } of bindings.values()) setFromText(root, chain, values);
}

function bindPath(root: ReflectMessage, pathParams: Record<string, string>): void {
  for (const [name, value] of Object.entries(pathParams)) {
    const chain = resolveFieldPath(root.desc, name);
    const leaf = chain?.at(-1);
    // The router builds pathParams from the proto's own templates, so a
    // mismatch is a bug in the proto rather than bad input.
    if (chain === undefined || leaf === undefined || !acceptsText(leaf) || leaf.fieldKind === "list") {
      throw new Error(`Path variable "${name}" is not a scalar field of ${root.desc.typeName}`);
    }
    setFromText(root, chain, [value]);
  }
}

/** Sets the field at the end of `chain` from text values, creating the messages on the way. */
function setFromText(root: ReflectMessage, chain: FieldChain, values: string[]): void {
  let target = root;
  for (const step of chain.slice(0, -1)) {
    if (step.fieldKind !== "message") throw new Error(`cannot step into ${step.toString()}`);
    if (!target.isSet(step)) target.set(step, reflect(step.message, create(step.message)));
    target = target.get(step);
  }
  const field = chain[chain.length - 1];
  if (field === undefined) return;
  const path = chain.map((f) => f.name).join(".");

  if (field.fieldKind === "list") {
    const list = target.get(field);
    list.clear();
    values.forEach((text, i) => {
      const shown = `${path}[${i}]`;
      if (field.listKind === "scalar") list.add(scalarFromText(field, field.scalar, text, path, shown));
      else if (field.listKind === "enum") list.add(enumFromJsonValue(field, field.enum, text, path, shown));
    });
    return;
  }
  if (values.length !== 1) throw invalid(field, path, "must be given only once");
  const text = values[0] ?? "";
  switch (field.fieldKind) {
    case "scalar":
      target.set(field, scalarFromText(field, field.scalar, text, path));
      return;
    case "enum":
      target.set(field, enumFromJsonValue(field, field.enum, text, path));
      return;
    case "message":
      // Timestamp and FieldMask take the same text as in a JSON body.
      target.set(field, decodeMessage(field, field.message, text, path));
      return;
    case "map":
      throw new Error(`cannot set map ${field.toString()} from text`);
  }
}

// ---- update mask

/**
 * grpc-gateway's PATCH convention: when the body binds one message field and
 * the request has an `update_mask` the caller did not give (query or path),
 * the mask lists the body's known keys, in body order, nulls included (a key
 * set to null means "clear this field"). Nested objects are replaced whole,
 * so only top-level keys enter the mask.
 */
function fillUpdateMask(root: ReflectMessage, input: RequestInput, bodyKeys: string[]): void {
  if (input.bodyField === "" || input.bodyField === "*" || input.bodyField === "update_mask") return;
  const mask = root.desc.fields.find((f) => f.name === "update_mask");
  if (mask?.fieldKind !== "message" || mask.message.typeName !== TYPE_FIELD_MASK) return;
  if (root.isSet(mask) || Object.keys(input.pathParams).some((p) => overlaps(canonicalPath(root.desc, p), "update_mask"))) {
    return;
  }
  root.set(mask, reflect(FieldMaskSchema, create(FieldMaskSchema, { paths: bodyKeys })));
}

// ---------------------------------------------------------------------------
// Errors

function invalid(field: DescField, path: string, expectation: string, shown = path): ApiError {
  return new ApiError(fieldErrorCode(field), `'${shown}' ${expectation}`, { details: { field: path } });
}

function elementNoun(field: DescField & { fieldKind: "list" }): string {
  switch (field.listKind) {
    case "enum":
      return `values (${enumJsonNames(field.enum).map((n) => JSON.stringify(n)).join(", ")})`;
    case "message":
      return isWellKnown(field.message) && field.message.typeName === TYPE_TIMESTAMP ? "timestamps" : "objects";
    case "scalar":
      return field.scalar === ScalarType.STRING
        ? "strings"
        : field.scalar === ScalarType.BOOL
          ? "booleans"
          : integerRange(field.scalar) !== undefined
            ? "integers"
            : field.scalar === ScalarType.BYTES
              ? "base64 strings"
              : "numbers";
  }
}

function describeJson(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}
