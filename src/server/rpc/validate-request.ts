/**
 * What every decoded request must satisfy before anything acts on it,
 * whichever decoder produced it (REST JSON, Connect JSON, protobuf binary):
 * every string — fields, list items, map keys, `Struct` keys and values — is
 * text PostgreSQL can store (well-formed UTF-16, so no unpaired surrogate,
 * and no NUL, which text and jsonb reject), and every double or float is
 * finite (JSON's 1e999 is Infinity, which jsonb cannot hold and the renderer
 * cannot answer with). One walk over the descriptors, so a new RPC or field
 * is covered without being listed, and no invalid value reaches the store.
 *
 * One more rule the decoders need help with: no JSON object (a `Struct`, at
 * any depth) may have the key "__proto__". protobuf-es builds objects by
 * assignment, and assigning "__proto__" sets an object's prototype instead of
 * adding a key, so every decoder would drop it without a word. The REST codec
 * (assertNoProtoKey) and, for gRPC, gRPC-Web and Connect, raw-request.ts look
 * for it in what the client sent, before protobuf-es sees it, and it is
 * refused like any other invalid value. "constructor", "prototype" and every
 * other key are ordinary keys.
 */
import { ScalarType, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { ApiError, isErrorCode, type ErrorCode } from "../../model/errors.js";

/** The first invalid value of a request, found by walking its fields. */
export interface InvalidValue {
  /** The request field it belongs to, outermost named field (not Struct/Value internals). */
  field: DescField;
  /** Where it is, e.g. `metadata.tags[2]` or `metadata.<key>`. */
  path: string;
  problem: "unpaired_surrogate" | "nul" | "non_finite" | "proto_key";
}

/** The object key no decoder keeps (see above). */
export const PROTO_KEY = "__proto__";

/** Struct, Value and ListValue fields hold plain JSON in protobuf-es; walked as JSON. */
const JSON_TYPES = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

type Pending =
  | { kind: "message"; message: ReflectMessage; path: string }
  | { kind: "json"; value: unknown; path: string; owner: DescField };

/**
 * Walks `message` and returns its first invalid value, or undefined. Iterative,
 * so a Struct nested thousands of levels deep (which JSON decoders accept)
 * cannot overflow the stack.
 */
export function findInvalidValue(desc: DescMessage, message: Message): InvalidValue | undefined {
  const stack: Pending[] = [{ kind: "message", message: reflect(desc, message), path: "" }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (next.kind === "json") {
      const found = jsonProblem(next.value, next.path, next.owner, stack);
      if (found !== undefined) return found;
      continue;
    }
    const { message: r, path } = next;
    for (const field of r.fields) {
      if (!r.isSet(field)) continue;
      const fieldPath = path === "" ? field.name : `${path}.${field.name}`;
      const fail = (at: string, problem: InvalidValue["problem"]): InvalidValue => ({ field, path: at, problem });
      switch (field.fieldKind) {
        case "scalar": {
          const problem = scalarProblem(field.scalar, r.get(field));
          if (problem !== undefined) return fail(fieldPath, problem);
          break;
        }
        case "enum":
          break;
        case "message":
          if (JSON_TYPES.has(field.message.typeName)) stack.push({ kind: "json", value: rawValue(r, field), path: fieldPath, owner: field });
          else stack.push({ kind: "message", message: r.get(field), path: fieldPath });
          break;
        case "list": {
          let i = 0;
          for (const item of r.get(field)) {
            const at = `${fieldPath}[${i++}]`;
            if (field.listKind === "message") stack.push({ kind: "message", message: item as ReflectMessage, path: at });
            else if (field.listKind === "scalar") {
              const problem = scalarProblem(field.scalar, item);
              if (problem !== undefined) return fail(at, problem);
            }
          }
          break;
        }
        case "map":
          for (const [key, value] of r.get(field)) {
            const at = `${fieldPath}.${shown(String(key))}`;
            const keyProblem = typeof key === "string" ? textProblem(key) : undefined;
            if (keyProblem !== undefined) return fail(at, keyProblem);
            if (field.mapKind === "message") stack.push({ kind: "message", message: value as ReflectMessage, path: at });
            else if (field.mapKind === "scalar") {
              const problem = scalarProblem(field.scalar, value);
              if (problem !== undefined) return fail(at, problem);
            }
          }
          break;
      }
    }
  }
  return undefined;
}

/** The field's value as the message holds it (plain JSON for Struct, Value and ListValue). */
function rawValue(r: ReflectMessage, field: DescField): unknown {
  const message = r.message as unknown as Record<string, unknown>;
  if (field.oneof === undefined) return message[field.localName];
  const oneof = message[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
  return oneof?.case === field.localName ? oneof.value : undefined;
}

/** Checks one JSON value; containers push their items onto `stack`. */
function jsonProblem(value: unknown, path: string, owner: DescField, stack: Pending[]): InvalidValue | undefined {
  const fail = (at: string, problem: InvalidValue["problem"]): InvalidValue => ({ field: owner, path: at, problem });
  if (typeof value === "string") {
    const problem = textProblem(value);
    return problem === undefined ? undefined : fail(path, problem);
  }
  if (typeof value === "number") return Number.isFinite(value) ? undefined : fail(path, "non_finite");
  if (Array.isArray(value)) {
    for (let i = value.length - 1; i >= 0; i--) stack.push({ kind: "json", value: value[i], path: `${path}[${i}]`, owner });
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const at = `${path}.${shown(key)}`;
      const keyProblem = textProblem(key);
      if (keyProblem !== undefined) return fail(at, keyProblem);
      stack.push({ kind: "json", value: item, path: at, owner });
    }
  }
  return undefined;
}

function scalarProblem(type: ScalarType, value: unknown): InvalidValue["problem"] | undefined {
  switch (type) {
    case ScalarType.STRING:
      return typeof value === "string" ? textProblem(value) : undefined;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return typeof value === "number" && !Number.isFinite(value) ? "non_finite" : undefined;
    default:
      return undefined;
  }
}

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSHOWABLE = new RegExp(`${UNPAIRED_SURROGATE.source}|\\u0000`, "g");

/** A map key as it can be quoted in a message and a header: the bad code units as \uXXXX escapes. */
export function shown(key: string): string {
  return key.replace(UNSHOWABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function textProblem(text: string): InvalidValue["problem"] | undefined {
  if (UNPAIRED_SURROGATE.test(text)) return "unpaired_surrogate";
  if (text.includes("\u0000")) return "nul";
  return undefined;
}

// Codes that name a field-sounding word but mean something else.
const NOT_FIELD_CODES = new Set<string>(["invalid_json", "invalid_json_shape", "invalid_fields"]);

/**
 * The catalog code for a bad value of `field`, whichever decoder found it:
 * `invalid_<field name>` when the catalog defines it (the contract's own
 * codes, e.g. invalid_mode), otherwise a code for the kind of value expected
 * (invalid_string, invalid_object for Structs and messages, invalid_field).
 */
export function fieldErrorCode(field: DescField): ErrorCode {
  const specific = `invalid_${field.name}`;
  if (isErrorCode(specific) && !NOT_FIELD_CODES.has(specific)) return specific;
  if (field.fieldKind === "scalar" && field.scalar === ScalarType.STRING) return "invalid_string";
  if (field.fieldKind === "map") return "invalid_object";
  if (field.fieldKind === "message" && (field.message.typeName === STRUCT || !field.message.typeName.startsWith("google.protobuf."))) {
    return "invalid_object";
  }
  return "invalid_field";
}

const STRUCT = "google.protobuf.Struct";

const PROBLEMS: Record<InvalidValue["problem"], { text: string; suggestion: string }> = {
  unpaired_surrogate: {
    text: "contains an unpaired UTF-16 surrogate (an escape such as \\ud800 without its pair), which is not Unicode text",
    suggestion: "Send well-formed Unicode: escape characters beyond U+FFFF as a surrogate pair, or send them as UTF-8.",
  },
  nul: {
    text: "contains the NUL character (U+0000), which cannot be stored",
    suggestion: "Remove U+0000 from the text; encode binary data as base64 instead.",
  },
  non_finite: {
    text: "must be a finite number (it overflows to infinity or is not a number)",
    suggestion: "Send a number within ±1.7976931348623157e308; send larger values as strings.",
  },
  proto_key: {
    text: `is an object key "${PROTO_KEY}", which this service cannot store (JavaScript objects reserve it; it would be lost)`,
    suggestion: `Rename the key, e.g. to "proto"; every other key, "constructor" and "prototype" included, is stored as sent.`,
  },
};

/**
 * For decoders that check each string as they bind it (the REST codec, whose
 * protobuf-es setters refuse ill-formed strings with an exception of their own).
 */
export function assertStorableText(field: DescField, path: string, text: string): void {
  const problem = textProblem(text);
  if (problem !== undefined) throw invalidValueError({ field, path, problem });
}

/**
 * Where a JSON value as JSON.parse built it (which keeps "__proto__" as an
 * own key) has an object with the key "__proto__": the path of that key under
 * `path`, or undefined. Iterative: the value may nest arbitrarily deep.
 */
export function protoKeyPath(json: unknown, path: string): string | undefined {
  const stack: Array<[unknown, string]> = [[json, path]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [value, at] = next;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${at}[${i}]`]);
    } else if (typeof value === "object" && value !== null) {
      for (const [key, item] of Object.entries(value)) {
        if (key === PROTO_KEY) return `${at}.${key}`;
        stack.push([item, `${at}.${shown(key)}`]);
      }
    }
  }
  return undefined;
}

/** For decoders that hold a Struct, Value or ListValue's JSON before protobuf-es builds it (and drops "__proto__"). */
export function assertNoProtoKey(field: DescField, path: string, json: unknown): void {
  const at = protoKeyPath(json, path);
  if (at !== undefined) throw invalidValueError({ field, path: at, problem: "proto_key" });
}

function invalidValueError(invalid: InvalidValue): ApiError {
  const { text, suggestion } = PROBLEMS[invalid.problem];
  return new ApiError(fieldErrorCode(invalid.field), `'${invalid.path}' ${text}`, { suggestion, details: { field: invalid.path } });
}

/**
 * Throws the catalog error for the first invalid value of the request, if
 * any: `seenBeforeDecoding` (what raw-request.ts found in the request as sent), or the first one it holds now.
 */
export function assertValidRequest(desc: DescMessage, message: Message, seenBeforeDecoding?: InvalidValue): void {
  const invalid = seenBeforeDecoding ?? findInvalidValue(desc, message);
  if (invalid !== undefined) throw invalidValueError(invalid);
}
