/**
 * GET /openapi.json: an OpenAPI 3.1 document generated from the proto
 * descriptors through the same RestRoutes table, method rules and JSON
 * dialect the REST layer uses (docs/decisions.md#proto-source), so the document cannot list a
 * route the server does not serve, or render a field the server renders
 * differently.
 *
 * Schemas follow the renderer (src/protocol/json-render*.ts), not proto3's canonical JSON:
 * snake_case keys, every field present (required, unset → null), int64 as
 * JSON numbers, enums as short lowercase names with the zero value as null,
 * timestamps with exactly six fractional digits, a oneof as one key named
 * after the oneof. Request schemas follow the decoder (json-codec.ts): null
 * leaves a field unset, integers must be JSON numbers, query parameters are
 * the fields neither the path nor the body binds.
 */
import { ScalarType, type DescEnum, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { errorCatalog, isErrorCode, type ErrorCode } from "../../model/errors.js";
import type { JsonObject } from "../../model/json.js";
import { enumJsonNames } from "../../protocol/json-enums.js";
import { acceptsText, fieldErrorCode, overlaps, resolveFieldPath } from "../rest/json-codec.js";
import { isWellKnown } from "../../protocol/json-render-reflect.js";
import { RestRoutes, type RestRoute } from "../rest/routes.js";
import { rulesOf, type MethodRules } from "../rpc/method-rules.js";

/** A JSON Schema 2020-12 object (OpenAPI 3.1 Schema Object). */
export type Schema = JsonObject;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: JsonObject;
  servers: JsonObject[];
  tags: JsonObject[];
  security: JsonObject[];
  paths: Record<string, Record<string, JsonObject>>;
  components: {
    schemas: Record<string, Schema>;
    securitySchemes: Record<string, JsonObject>;
    headers: Record<string, JsonObject>;
    responses: Record<string, JsonObject>;
    parameters: Record<string, JsonObject>;
  };
}

export interface OpenApiOptions {
  /** info.version; the API version by default. */
  version?: string;
}

/**
 * Success statuses a handler chooses at run time (httpStatusKey) besides the
 * method's success_status. The proto cannot say this, so it is listed here;
 * a test checks each entry names a real method.
 */
export const EXTRA_SUCCESS_STATUSES: Readonly<Record<string, readonly number[]>> = {
  // 200 when no request is filed (open channel, already a member), 202 while pending.
  "agentbus.v1.ChannelService.CreateAccessRequest": [200],
};

/**
 * The content type of google.api.HttpBody responses, which the handler sets
 * at run time; a test checks every HttpBody method has an entry.
 */
export const HTTP_BODY_MEDIA_TYPES: Readonly<Record<string, string>> = {
  "agentbus.v1.JobService.DownloadPdf": "application/pdf",
};

/**
 * Extra keys of the REST error body: toRestError spreads an ApiError's
 * details next to error/message (not under a `details` key). Listed so the
 * Error schema can stay closed (additionalProperties: false).
 */
const ERROR_DETAIL_FIELDS: Record<string, Schema> = {
  field: { type: "string", description: "The request field the error is about (dotted for nested fields)." },
  fields: { type: "array", items: { type: "string" }, description: "Unknown or conflicting fields (invalid_fields)." },
  violations: {
    type: "array",
    description: "metadata_validation_failed: what does not match the channel's metadata_schema.",
    items: {
      type: "object",
      properties: { field: { type: "string" }, issue: { type: "string" } },
      required: ["field", "issue"],
      additionalProperties: false,
    },
  },
  retry_after: { type: "integer", description: "Seconds to wait before retrying (also in the Retry-After header)." },
  max_body_bytes: { type: "integer", description: "payload_too_large: the body limit of the route." },
  max_content_bytes: { type: "integer", description: "content_too_large: the limit on `content` in UTF-8 bytes." },
  max_metadata_bytes: { type: "integer", description: "metadata_too_large: the limit on `metadata`." },
  received_bytes: { type: "integer", description: "The size that was sent." },
  alias: { type: "string", description: "alias_conflict: the alias that is taken." },
  channel: { type: "string", description: "The related channel that was not found." },
  key_id: { type: "string", description: "The key the error is about." },
  invitation_id: { type: "string", description: "The invitation the error is about." },
  access_request_id: { type: "string", description: "The access request the error is about (`request_id` is the failed call's own id)." },
  status: { type: "string", description: "access_request_resolved: how the request was decided." },
  name: { type: "string", description: "limit_not_found, limit_exists: the shared limit's name." },
  limit: { anyOf: [{ type: "string" }, { type: "integer" }], description: "unknown_limit: the limit name that is not the channel owner's; too_many_limits: how many limits a key may own." },
  max: { type: "integer", description: "invalid_ttl_seconds on a message: the channel's ttl_seconds, the most a message may have." },
};

const HTTP_BODY = "google.api.HttpBody";
const PACKAGE_PREFIX = "agentbus.v1.";
const TIMESTAMP_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$";
const IDEMPOTENCY_KEY_PATTERN = "^[\\x20-\\x7e]{1,255}$";
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
/** How deep query parameters reach into nested request messages (`a.b.c`). */
const MAX_QUERY_DEPTH = 4;

const fullName = (method: DescMethod) => `${method.parent.typeName}.${method.name}`;
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const errorContent = (): JsonObject => ({ "application/json": { schema: ref("Error") } });

/** Adds null to what a schema accepts (the renderer's null for unset fields). */
function nullable(schema: Schema): Schema {
  if (Object.keys(schema).length === 0) return schema; // {} accepts null already
  const type = schema.type;
  if (typeof type === "string" && !("$ref" in schema) && !("anyOf" in schema)) {
    const out: Schema = { ...schema, type: [type, "null"] };
    if (Array.isArray(schema.enum)) out.enum = [...schema.enum, null];
    return out;
  }
  if (Array.isArray(type)) return type.includes("null") ? schema : { ...schema, type: [...type, "null"] };
  if (Array.isArray(schema.anyOf)) return { ...schema, anyOf: [...schema.anyOf, { type: "null" }] };
  return { anyOf: [schema, { type: "null" }] };
}

const isExplicit = (field: DescField) => field.presence === FeatureSet_FieldPresence.EXPLICIT;
const isFloat = (type: ScalarType) => type === ScalarType.DOUBLE || type === ScalarType.FLOAT;

function integerBounds(type: ScalarType): { format: string; minimum: number; maximum: number } | undefined {
  switch (type) {
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { format: "int32", minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { format: "int32", minimum: 0, maximum: 2 ** 32 - 1 };
    // A JSON number beyond 2^53 has lost digits; the decoder refuses it and the renderer cannot produce it exactly.
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { format: "int64", minimum: -MAX_SAFE, maximum: MAX_SAFE };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { format: "int64", minimum: 0, maximum: MAX_SAFE };
    default:
      return undefined;
  }
}

/** A scalar as JSON: integers (int64 too) are numbers, bytes base64. */
/** The compatibility verbs are listed apart, so the native routes stay the documented way. */
const COMPAT_TAG: JsonObject = {
  name: "CompatService",
  description:
    "Compatibility surface: the reference's (Backchannel's) convenience routes, with its request and answer shapes, so its clients work unchanged. Each is built on the native operations; new code should use the native routes.",
};

export function scalarSchema(type: ScalarType, direction: "in" | "out"): Schema {
  const bounds = integerBounds(type);
  if (bounds !== undefined) {
    // Output int64 is Number(bigint): documented without the range the decoder enforces.
    return direction === "in" || bounds.format === "int32" ? { type: "integer", ...bounds } : { type: "integer", format: "int64" };
  }
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    default:
      return { type: "number", format: "double" };
  }
}

export function enumSchema(desc: DescEnum, direction: "in" | "out"): Schema {
  const names = enumJsonNames(desc);
  if (direction === "in") {
    return {
      type: "string",
      enum: names,
      description: `Case-insensitive; the full proto name (${desc.values.at(-1)?.name ?? ""}) is accepted too.`,
    };
  }
  // The zero value (*_UNSPECIFIED) and undeclared numbers render as null (docs/decisions.md#json-enums).
  return { type: ["string", "null"], enum: [...names, null] };
}

/**
 * Well-known types: how the renderer writes them (json-render-reflect.ts
 * renderMessageValue) and the decoder reads them (json-codec.ts decodeMessage).
 */
export function wellKnownSchema(desc: DescMessage, direction: "in" | "out"): Schema {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return direction === "out"
        ? { type: "string", format: "date-time", pattern: TIMESTAMP_PATTERN, description: "RFC 3339 UTC with exactly six fractional digits." }
        : { type: "string", format: "date-time", description: "RFC 3339 with any offset." };
    case "google.protobuf.Struct":
      return { type: "object" };
    case "google.protobuf.ListValue":
      return { type: "array", items: {} };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.Empty":
      return direction === "out" ? { type: "object", maxProperties: 0 } : { type: "object" };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated snake_case field names." };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" };
    case "google.protobuf.Int64Value":
    case "google.protobuf.UInt64Value":
      // Canonical proto3 JSON: 64-bit wrappers are strings (numbers accepted on input).
      return direction === "out" ? { type: "string", pattern: "^-?[0-9]+$" } : { type: ["string", "integer"] };
    case "google.protobuf.Int32Value":
    case "google.protobuf.UInt32Value":
      return { type: "integer" };
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
      return { type: "number" };
    case "google.protobuf.BoolValue":
      return { type: "boolean" };
    case "google.protobuf.StringValue":
      return { type: "string" };
    case "google.protobuf.BytesValue":
      return { type: "string", contentEncoding: "base64" };
    default:
      return { type: "object" };
  }
}

/** Builds the document; one instance per call, so the function stays pure. */
class Builder {
  readonly schemas: Record<string, Schema> = {};
  private readonly outputNames = new Map<DescMessage, string>();
  private readonly inputNames = new Map<string, string>();
  private readonly usedNames = new Set<string>(["Error"]);

  private claimName(base: string, suffix: string): string {
    let name = this.usedNames.has(base) ? `${base}${suffix}` : base;
    for (let i = 2; this.usedNames.has(name); i++) name = `${base}${suffix}${i}`;
    this.usedNames.add(name);
    return name;
  }

  private baseName(desc: DescMessage): string {
    return desc.typeName.startsWith(PACKAGE_PREFIX) ? desc.typeName.slice(PACKAGE_PREFIX.length) : desc.typeName;
  }

  // ---- responses: what json-render*.ts writes

  /** The schema of a message value as rendered (a $ref for our own messages). */
  outputMessage(desc: DescMessage): Schema {
    if (isWellKnown(desc)) return wellKnownSchema(desc, "out");
    let name = this.outputNames.get(desc);
    if (name === undefined) {
      name = this.claimName(this.baseName(desc), "Output");
      this.outputNames.set(desc, name);
      this.schemas[name] = {}; // placeholder: a message may contain itself
      this.schemas[name] = this.outputObject(desc);
    }
    return ref(name);
  }

  private outputObject(desc: DescMessage): Schema {
    const properties: Record<string, Schema> = {};
    for (const member of desc.members) {
      if (member.kind === "oneof") {
        // One key named after the oneof: the set member's value, or null.
        properties[member.name] = {
          anyOf: [...member.fields.map((f) => this.outputValue(f)), { type: "null" }],
          description: `One of: ${member.fields.map((f) => f.name).join(", ")}; null when none is set.`,
        };
      } else {
        properties[member.name] = this.outputField(member);
      }
    }
    // Every member is always present (docs/decisions.md#json-all-fields).
    return { type: "object", properties, required: Object.keys(properties), additionalProperties: false };
  }

  /** A field's value when set (no null for unset). */
  private outputValue(field: DescField): Schema {
    switch (field.fieldKind) {
      case "scalar":
        return scalarSchema(field.scalar, "out");
      case "enum":
        return enumSchema(field.enum, "out");
      case "message":
        return this.outputMessage(field.message);
      case "list":
      case "map":
        return this.outputField(field);
    }
  }

  private outputField(field: DescField): Schema {
    switch (field.fieldKind) {
      case "scalar": {
        const schema = scalarSchema(field.scalar, "out");
        // Non-finite floats render as null, as do unset optional scalars.
        return isExplicit(field) || isFloat(field.scalar) ? nullable(schema) : schema;
      }
      case "enum":
        return enumSchema(field.enum, "out");
      case "message":
        return nullable(this.outputMessage(field.message));
      case "list":
        return { type: "array", items: this.outputElement(field.listKind, field) };
      case "map":
        return { type: "object", additionalProperties: this.outputElement(field.mapKind, field) };
    }
  }

  private outputElement(kind: "scalar" | "enum" | "message", field: DescField & { fieldKind: "list" | "map" }): Schema {
    if (kind === "message" && field.message) return this.outputMessage(field.message);
    if (kind === "enum" && field.enum) return enumSchema(field.enum, "out");
    const scalar = field.scalar ?? ScalarType.STRING;
    return isFloat(scalar) ? nullable(scalarSchema(scalar, "out")) : scalarSchema(scalar, "out");
  }

  // ---- requests: what json-codec.ts accepts

  /**
   * A request message as a JSON body. `exclude` lists the top-level fields
   * the path binds (never read from the body); `strict` mirrors
   * reject_unknown_fields (422 invalid_fields on unknown keys).
   */
  inputMessage(desc: DescMessage, exclude: readonly string[] = [], strict = false): Schema {
    if (isWellKnown(desc)) return wellKnownSchema(desc, "in");
    const key = `${desc.typeName}|${exclude.join(",")}|${strict}`;
    let name = this.inputNames.get(key);
    if (name === undefined) {
      name = this.claimName(this.baseName(desc), "Input");
      this.inputNames.set(key, name);
      this.schemas[name] = {};
      const properties: Record<string, Schema> = {};
      for (const field of desc.fields) {
        if (!exclude.includes(field.name)) properties[field.name] = this.inputField(field, strict);
      }
      const schema: Schema = { type: "object", properties, additionalProperties: !strict };
      schema.description = strict
        ? "Unknown keys are refused (422 invalid_fields). camelCase JSON names are accepted as well as the snake_case names."
        : "Unknown keys are ignored. camelCase JSON names are accepted as well as the snake_case names.";
      if (strict) {
        // Only the documented names, in either spelling.
        delete schema.additionalProperties;
        schema.propertyNames = { enum: desc.fields.filter((f) => !exclude.includes(f.name)).flatMap((f) => (f.jsonName === f.name ? [f.name] : [f.name, f.jsonName])) };
      }
      this.schemas[name] = schema;
    }
    return ref(name);
  }

  /** Any field may be null: the decoder leaves it unset (on PATCH, the field is cleared). */
  private inputField(field: DescField, strict: boolean): Schema {
    switch (field.fieldKind) {
      case "scalar":
        return nullable(scalarSchema(field.scalar, "in"));
      case "enum":
        return nullable(enumSchema(field.enum, "in"));
      case "message":
        return nullable(this.inputMessage(field.message, [], strict));
      case "list": {
        const items =
          field.listKind === "message"
            ? this.inputMessage(field.message, [], strict)
            : field.listKind === "enum"
              ? enumSchema(field.enum, "in")
              : scalarSchema(field.scalar, "in");
        return nullable({ type: "array", items });
      }
      case "map": {
        const values =
          field.mapKind === "message"
            ? this.inputMessage(field.message, [], strict)
            : field.mapKind === "enum"
              ? enumSchema(field.enum, "in")
              : scalarSchema(field.scalar, "in");
        return nullable({ type: "object", additionalProperties: values });
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Routes

/** OpenAPI path template: `{name=segments}` becomes `{name}`; a verb (`:stream`) stays. */
export function openApiPath(template: string): string {
  const path = template.replace(/\{([A-Za-z0-9_.]+)=[^}]*\}/g, "{$1}");
  // An anonymous `*` or `**` binds no field and has no OpenAPI form.
  if (/(^|\/)\*\*?(\/|:|$)/.test(path)) throw new Error(`Path template "${template}" has an anonymous wildcard, which OpenAPI cannot express`);
  return path;
}

/** The field chain of a path variable, resolved as the decoder resolves it. */
function resolveChain(root: DescMessage, dotted: string): DescField[] {
  const chain = resolveFieldPath(root, dotted);
  if (chain === undefined) throw new Error(`${root.typeName} has no field "${dotted}"`);
  return chain;
}

/** A text-bound value (path or query) as a parameter schema. */
function textSchema(field: DescField): Schema {
  switch (field.fieldKind) {
    case "scalar":
      return scalarSchema(field.scalar, "in");
    case "enum":
      return enumSchema(field.enum, "in");
    case "message":
      return wellKnownSchema(field.message, "in");
    case "list":
      if (field.listKind === "message") throw new Error(`list of messages ${field.toString()} cannot be bound to text`);
      return { type: "array", items: field.listKind === "enum" ? enumSchema(field.enum, "in") : scalarSchema(field.scalar, "in") };
    case "map":
      throw new Error(`map field ${field.toString()} cannot be bound to text`);
  }
}

interface QueryField {
  name: string;
  field: DescField;
}

/**
 * The query parameters of a route, as json-codec.ts bindQuery binds them:
 * every field neither the path nor the body binds that takes text, nested
 * singular messages as dotted names.
 */
function queryFields(route: RestRoute, pathBound: readonly string[]): QueryField[] {
  if (route.bodyField === "*") return [];
  const out: QueryField[] = [];
  const walk = (desc: DescMessage, prefix: string, depth: number, seen: ReadonlySet<string>) => {
    for (const field of desc.fields) {
      const name = prefix + field.name;
      if (pathBound.some((p) => overlaps(name, p))) continue;
      if (route.bodyField !== "" && overlaps(name, route.bodyField)) continue;
      if (acceptsText(field)) out.push({ name, field });
      else if (field.fieldKind === "message" && !isWellKnown(field.message) && depth < MAX_QUERY_DEPTH && !seen.has(field.message.typeName)) {
        walk(field.message, `${name}.`, depth + 1, new Set([...seen, field.message.typeName]));
      }
    }
  };
  walk(route.method.input, "", 1, new Set([route.method.input.typeName]));
  return out;
}

/** Catalog codes for a bad value of each given field (json-codec.ts fieldErrorCode). */
function fieldCodes(fields: readonly DescField[]): ErrorCode[] {
  return fields.map((f) => fieldErrorCode(f));
}

function errorResponse(codes: readonly ErrorCode[]): JsonObject {
  const headers: JsonObject = { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } };
  if (codes.some((c) => c === "rate_limit_exceeded" || c === "store_unavailable" || c === "idempotency_in_progress")) {
    headers["Retry-After"] = { $ref: "#/components/headers/Retry-After" };
  }
  return {
    description: `${codes.map((c) => `\`${c}\``).join(", ")}. See /docs/errors.`,
    headers,
    content: errorContent(),
    "x-error-codes": [...codes],
  };
}

/**
 * Error responses shared by many routes (the same status and codes) live in
 * components.responses, referenced by name; route-specific ones (long 422
 * lists) stay inline.
 */
class ErrorResponses {
  readonly shared: Record<string, JsonObject> = {};

  get(status: number, codes: readonly ErrorCode[]): JsonObject {
    const unique = [...new Set(codes)];
    if (unique.length > 3) return errorResponse(unique);
    const name = `${status}-${unique.join("-")}`;
    this.shared[name] ??= errorResponse(unique);
    return { $ref: `#/components/responses/${name}` };
  }
}

/** Error responses the transport itself decides for a route (auth, limits, decoding); the handler's own ones are under `default`. */
function errorResponses(shared: ErrorResponses, route: RestRoute, rules: MethodRules, decodable: readonly DescField[]): Record<string, JsonObject> {
  const byStatus = new Map<number, ErrorCode[]>();
  const add = (code: ErrorCode) => {
    const status = errorCatalog[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  };
  const idempotent = rules.mutates && rules.auth === "api_key" && route.method.methodKind === "unary";
  if (route.bodyField !== "") {
    add("invalid_json");
    add("invalid_json_shape");
  }
  add("payload_too_large");
  // Unknown query parameters (and, on strict bodies, unknown keys).
  add("invalid_fields");
  for (const code of fieldCodes(decodable)) add(code);
  if (rules.auth === "api_key") {
    add(rules.missingKeyError);
    add("unauthorized");
    add("rate_limit_exceeded");
  } else if (rules.auth === "admin_token") {
    add("admin_unauthorized");
    add("admin_disabled");
  }
  if (idempotent) {
    add("invalid_idempotency_key");
    add("idempotency_key_reused");
    add("idempotency_in_progress");
  }
  add("internal_error");
  add("store_unavailable");
  add("shutting_down");
  const out: Record<string, JsonObject> = {};
  for (const status of [...byStatus.keys()].sort((a, b) => a - b)) out[String(status)] = shared.get(status, byStatus.get(status) ?? []);
  out.default = { $ref: "#/components/responses/OtherError" };
  return out;
}

/** The message a route's success body renders: the streamed item's `message` for SSE, none for HttpBody. */
function responseMessage(method: DescMethod): DescMessage | undefined {
  if (method.output.typeName === HTTP_BODY) return undefined;
  if (method.methodKind === "server_streaming") {
    // transcoder.ts streamEvent: an item {message, cursor} is sent as the message, with the cursor as the event id.
    const message = method.output.fields.find((f) => f.name === "message");
    const cursor = method.output.fields.find((f) => f.name === "cursor");
    if (message?.fieldKind === "message" && cursor !== undefined) return message.message;
  }
  return method.output;
}

function successResponses(builder: Builder, route: RestRoute, rules: MethodRules): Record<string, JsonObject> {
  const method = route.method;
  const headers: JsonObject = { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } };
  if (rules.mutates && rules.auth === "api_key" && method.methodKind === "unary") {
    headers["Idempotency-Key"] = { $ref: "#/components/headers/Idempotency-Key" };
    headers["X-Idempotent-Replay"] = { $ref: "#/components/headers/X-Idempotent-Replay" };
  }
  const statuses = [rules.successStatus, ...(EXTRA_SUCCESS_STATUSES[fullName(method)] ?? [])];
  const out: Record<string, JsonObject> = {};
  for (const status of statuses) {
    if (method.methodKind === "server_streaming") {
      const data = builder.outputMessage(responseMessage(method) ?? method.output);
      out[String(status)] = {
        description:
          "Server-Sent Events. First `id: <starting cursor>`, `event: open`, `data: {\"cursor\": <the same>}`; then each message is " +
          "`id: <cursor>`, `event: message`, `data: <the message as a list renders it>` " +
          (method.output.fields.some((f) => f.name === "event")
            ? "(here the event names what changed: `state`, `progress` or `result`, with the whole message; the stream ends when the message is finished); "
            : "; ") +
          "`: keep-alive` comments every 15 s; a failure after the stream opened is `event: error` with `data: {\"error\", \"message\"}`. " +
          "Reconnect with Last-Event-ID (or since=<cursor>) to resume exactly after the last event.",
        headers,
        content: { "text/event-stream": { schema: { type: "string" }, "x-event-data-schema": data } },
      };
    } else if (method.output.typeName === HTTP_BODY) {
      const mediaType = HTTP_BODY_MEDIA_TYPES[fullName(method)] ?? "application/octet-stream";
      out[String(status)] = {
        description: `The ${mediaType} document.`,
        headers,
        content: { [mediaType]: { schema: { type: "string", contentMediaType: mediaType } } },
      };
    } else if (status === 204) {
      out[String(status)] = { description: "No content.", headers };
    } else {
      out[String(status)] = {
        description: status === rules.successStatus ? "Success." : `Also a success (the handler chooses ${status}).`,
        headers,
        content: { "application/json": { schema: builder.outputMessage(method.output) } },
      };
    }
  }
  return out;
}

function describeMethodName(name: string): string {
  const words = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function operation(builder: Builder, shared: ErrorResponses, route: RestRoute, operationId: string): JsonObject {
  const method = route.method;
  const rules = rulesOf(method);
  const input = method.input;
  const variables = route.template.variables;
  const pathChains = variables.map((v) => resolveChain(input, v));
  const pathBound = pathChains.map((chain) => chain.map((f) => f.name).join("."));
  const parameters: JsonObject[] = [];

  pathChains.forEach((chain, i) => {
    const leaf = chain[chain.length - 1];
    if (leaf === undefined) return;
    parameters.push({ name: variables[i] ?? leaf.name, in: "path", required: true, schema: textSchema(leaf) });
  });

  const query = queryFields(route, pathBound);
  for (const { name, field } of query) {
    const param: JsonObject = { name, in: "query", required: false, schema: textSchema(field) };
    if (field.fieldKind === "list") {
      param.style = "form";
      param.explode = true;
      param.description = `Repeat the parameter for each value (${name}=a&${name}=b).`;
    }
    parameters.push(param);
  }

  if (method.methodKind === "server_streaming" && input.fields.some((f) => f.name === "since")) {
    parameters.push({
      name: "Last-Event-ID",
      in: "header",
      required: false,
      schema: { type: "string" },
      description: "Sent by EventSource when it reconnects; resumes after that cursor (overrides since).",
    });
  }
  const idempotent = rules.mutates && rules.auth === "api_key" && method.methodKind === "unary";
  if (idempotent) parameters.push({ $ref: "#/components/parameters/Idempotency-Key" });

  const op: JsonObject = {
    operationId,
    summary: describeMethodName(method.name),
    tags: [method.parent.name],
    security: rules.auth === "none" ? [] : rules.auth === "admin_token" ? [{ AdminToken: [] }] : [{ ApiKeyAuth: [] }],
    parameters,
  };

  let bodyFields: DescField[] = [];
  if (route.bodyField !== "") {
    const maxBytes = rules.maxBodyBytes > 0 ? ` Up to ${rules.maxBodyBytes} bytes.` : " Up to the service's body limit (AGENTBUS_MAX_BODY_BYTES, default 1 MiB).";
    let schema: Schema;
    if (route.bodyField === "*") {
      schema = builder.inputMessage(input, pathBound.filter((p) => !p.includes(".")), rules.rejectUnknownFields);
      bodyFields = input.fields.filter((f) => !pathBound.includes(f.name));
    } else {
      const field = input.fields.find((f) => f.name === route.bodyField);
      if (field?.fieldKind !== "message") throw new Error(`${fullName(method)}: body "${route.bodyField}" is not a message field`);
      schema = builder.inputMessage(field.message, [], rules.rejectUnknownFields);
      bodyFields = [field, ...field.message.fields];
    }
    op.requestBody = {
      // An empty body is read as {}.
      required: false,
      description: `JSON object.${maxBytes}`,
      content: { "application/json": { schema } },
    };
  }

  // Text never fails to decode into a string field; a JSON body value of the wrong type does.
  const fromText = [...pathChains.map((c) => c[c.length - 1]), ...query.map((q) => q.field)].filter(
    (f): f is DescField => f !== undefined && f.scalar !== ScalarType.STRING,
  );
  const decodable = [...fromText, ...bodyFields];
  op.responses = { ...successResponses(builder, route, rules), ...errorResponses(shared, route, rules, decodable) };
  return op;
}

// ---------------------------------------------------------------------------
// The document

/**
 * The route table in the order the protos declare services, methods and
 * bindings (the table itself is sorted for matching), for readers.
 */
export function routesInDeclarationOrder(services: readonly DescService[]): RestRoute[] {
  const table = new RestRoutes(services).routes;
  return services.flatMap((service) => service.methods.flatMap((method) => table.filter((route) => route.method === method)));
}

export function buildOpenApiDocument(services: readonly DescService[], options: OpenApiOptions = {}): OpenApiDocument {
  const routes = routesInDeclarationOrder(services);
  const builder = new Builder();
  const errors = new ErrorResponses();
  // Output schemas first, so that they get the plain proto names.
  for (const route of routes) {
    const data = responseMessage(route.method);
    if (data !== undefined) builder.outputMessage(data);
  }

  const paths: OpenApiDocument["paths"] = {};
  const bindings = new Map<DescMethod, number>();
  for (const route of routes) {
    const n = (bindings.get(route.method) ?? 0) + 1;
    bindings.set(route.method, n);
    const operationId = `${route.method.parent.name}_${route.method.name}${n > 1 ? `_${n}` : ""}`;
    const path = openApiPath(route.template.template);
    const item = (paths[path] ??= {});
    const verb = route.httpMethod.toLowerCase();
    if (item[verb] !== undefined) throw new Error(`Two routes for ${route.httpMethod} ${path}`);
    item[verb] = operation(builder, errors, route, operationId);
  }
  Object.assign(paths, operationalPaths());

  builder.schemas.Error = errorSchema();
  const schemas = Object.fromEntries(Object.entries(builder.schemas).sort(([a], [b]) => a.localeCompare(b)));

  return {
    openapi: "3.1.0",
    info: {
      title: "agentbus",
      version: options.version ?? "1",
      summary: "An ephemeral message bus for software agents, plus async PDF, job-posting and transcript jobs.",
      description: INFO_DESCRIPTION,
    },
    servers: [{ url: "/" }],
    tags: [...services.map((s) => (s.name === "CompatService" ? COMPAT_TAG : { name: s.name })), { name: "Operations" }],
    security: [{ ApiKeyAuth: [] }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        ApiKeyAuth: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "A key minted with POST /v1/keys (no sign-up). gRPC: x-api-key metadata.",
        },
        AdminToken: {
          type: "apiKey",
          in: "header",
          name: "X-Admin-Token",
          description: "The operator token (AGENTBUS_ADMIN_TOKEN); unset disables the admin routes (403 admin_disabled).",
        },
      },
      headers: {
        "X-Request-Id": { description: "The request's id (an incoming valid one is kept); also `request_id` in error bodies.", schema: { type: "string" } },
        "Retry-After": { description: "Seconds to wait before retrying.", schema: { type: "integer" } },
        "Idempotency-Key": { description: "Echo of the request's Idempotency-Key.", schema: { type: "string" } },
        "X-Idempotent-Replay": { description: "`true` when the response is the stored result of an earlier request with the same Idempotency-Key.", schema: { type: "string", enum: ["true"] } },
      },
      responses: {
        ...errors.shared,
        OtherError: {
          description:
            "Any other error of the catalog (e.g. 403 channel_access_denied, 404 channel_not_found, 409 already_claimed), with the same body. Every code is listed at /docs/errors.",
          headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
          content: errorContent(),
        },
      },
      parameters: {
        "Idempotency-Key": {
          name: "Idempotency-Key",
          in: "header",
          required: false,
          schema: { type: "string", pattern: IDEMPOTENCY_KEY_PATTERN },
          description:
            "Makes the request safe to retry for 24 h: the first success is stored and replayed (X-Idempotent-Replay: true) for the same key and body; " +
            "another body under the same key → 422 idempotency_key_reused; while the first is still running → 409 idempotency_in_progress. Scoped to the API key.",
        },
      },
    },
  };
}

function errorSchema(): Schema {
  return {
    type: "object",
    description:
      "The body of every REST error. Extra fields depend on the error (listed below); they sit next to `error`, not under a `details` key.",
    properties: {
      error: { type: "string", enum: Object.keys(errorCatalog).filter(isErrorCode), description: "Stable machine-readable code; match on it." },
      message: { type: "string", description: "Human-readable explanation." },
      suggestion: { type: "string", description: "What to do about it (on every 409 and 422, and most other errors)." },
      request_id: { type: "string", description: "Same as the X-Request-Id header." },
      documentation_url: { type: "string", pattern: "^/docs/errors#[a-z0-9_]+$", description: "/docs/errors#<code>." },
      ...ERROR_DETAIL_FIELDS,
    },
    required: ["error", "message", "request_id", "documentation_url"],
    additionalProperties: false,
  };
}

/** The non-RPC endpoints http-handler.ts serves next to the REST routes. */
function operationalPaths(): OpenApiDocument["paths"] {
  const open = { security: [], tags: ["Operations"] };
  const state: Schema = { type: "string", enum: ["ok", "degraded", "down"] };
  const component: Schema = {
    type: "object",
    properties: { state, detail: { type: "string" } },
    required: ["state", "detail"],
    additionalProperties: false,
  };
  const health: Schema = {
    type: "object",
    properties: {
      status: { type: "string", enum: ["ok", "unavailable"] },
      api_version: { type: "string", const: "1.0", description: "The REST API's version (the /v1 routes' shapes)." },
      state: { ...state, description: "down when the database is; degraded when any component is not ok (the service serves)" },
      database: { type: "string", enum: ["ok", "unreachable"] },
      db_latency_ms: { type: ["number", "null"] },
      components: {
        type: "object",
        description: "database, wake_bus, job_workers, pdf_renderer, language_model: each with its state and what it is",
        additionalProperties: component,
      },
      public_minting_enabled: { type: ["boolean", "null"], description: "Whether POST /v1/keys is open (null when the database cannot say)." },
    },
    required: ["status", "api_version", "state", "database", "db_latency_ms", "components", "public_minting_enabled"],
    additionalProperties: false,
  };
  const stateOnly = (extra: Record<string, Schema> = {}): Schema => ({
    type: "object",
    properties: { state, ...extra },
    required: ["state", ...Object.keys(extra)],
    additionalProperties: false,
  });
  const status: Schema = {
    type: "object",
    properties: {
      service: { type: "string", const: "agentbus" },
      version: { type: "string" },
      state,
      started_at: { type: "string", format: "date-time" },
      uptime_seconds: { type: "integer" },
      database: stateOnly({ kind: { type: "string", enum: ["embedded", "external"] } }),
      wake_bus: stateOnly({ kind: { type: "string", enum: ["postgres-notify", "redis"] } }),
      job_workers: stateOnly({ last_seen_at: { type: ["string", "null"], format: "date-time" }, seen_last_minute: { type: "integer" } }),
      pdf_renderer: stateOnly(),
      language_model: { type: "object", properties: { configured: { type: "boolean" } }, required: ["configured"], additionalProperties: false },
      public_minting_enabled: { type: ["boolean", "null"] },
    },
    required: ["service", "version", "state", "started_at", "uptime_seconds", "database", "wake_bus", "job_workers", "pdf_renderer", "language_model", "public_minting_enabled"],
    additionalProperties: false,
  };
  const landing: Schema = {
    type: "object",
    properties: {
      service: { type: "string", const: "agentbus" },
      version: { type: "string" },
      description: { type: "string" },
      links: {
        type: "object",
        properties: Object.fromEntries(["llms_txt", "openapi", "error_docs", "health"].map((k) => [k, { type: "string", description: "An absolute URL on the address the request came to." }])),
        required: ["llms_txt", "openapi", "error_docs", "health"],
        additionalProperties: false,
      },
      sandbox: {
        type: "object",
        description: "Present when the sandbox channel exists (AGENTBUS_SANDBOX): where a new agent posts and reads at once.",
        properties: { channel: { type: "string", const: "sandbox" }, messages: { type: "string", description: "Its messages' absolute URL." } },
        required: ["channel", "messages"],
        additionalProperties: false,
      },
    },
    required: ["service", "version", "description", "links"],
    additionalProperties: false,
  };
  return {
    "/": {
      get: {
        ...open,
        operationId: "landing",
        summary: "What this service is, and links to its guides",
        responses: {
          "200": {
            description: "JSON, or a small HTML page when the Accept header prefers text/html.",
            content: { "application/json": { schema: landing }, "text/html": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/health": {
      get: {
        ...open,
        operationId: "health",
        summary: "Liveness, database reachability, and the state of each component",
        responses: {
          "200": { description: "The database answers.", content: { "application/json": { schema: health } } },
          "503": { description: "The database does not answer.", content: { "application/json": { schema: health } } },
        },
      },
    },
    "/status": {
      get: {
        ...open,
        operationId: "status",
        summary: "Version, uptime and each component's state, without addresses or secrets",
        responses: { "200": { description: "The service answers.", content: { "application/json": { schema: status } } } },
      },
    },
    "/status.html": {
      get: {
        ...open,
        operationId: "statusPage",
        summary: "The status as a small page for people",
        responses: { "200": { description: "HTML, no scripts or external assets.", content: { "text/html": { schema: { type: "string" } } } } },
      },
    },
    "/metrics": {
      get: {
        ...open,
        operationId: "metrics",
        summary: "Prometheus metrics",
        responses: { "200": { description: "Prometheus text exposition format.", content: { "text/plain": { schema: { type: "string" } } } } },
      },
    },
    "/openapi.json": {
      get: {
        ...open,
        operationId: "openapi",
        summary: "This document",
        responses: { "200": { description: "OpenAPI 3.1.", content: { "application/json": { schema: { type: "object" } } } } },
      },
    },
    "/llms.txt": {
      get: {
        ...open,
        operationId: "llmsTxt",
        summary: "A guide for agents (markdown)",
        responses: { "200": { description: "Markdown, per the llms.txt convention.", content: { "text/plain": { schema: { type: "string" } } } } },
      },
    },
    "/agent-guide": {
      get: {
        ...open,
        operationId: "agentGuide",
        summary: "The same guide, at the reference's address",
        responses: { "200": { description: "The /llms.txt text.", content: { "text/markdown": { schema: { type: "string" } } } } },
      },
    },
    "/docs/errors": {
      get: {
        ...open,
        operationId: "errorDocs",
        summary: "Every error code",
        responses: { "200": { description: "HTML table of the error catalog.", content: { "text/html": { schema: { type: "string" } } } } },
      },
    },
  };
}

const INFO_DESCRIPTION = `Channels are \`claimable\` (each message goes to exactly one consumer: first claim wins, then ack) or \`broadcast\` (every reader sees every message).
The same API is served as gRPC, gRPC-Web and Connect on the same port (proto/agentbus/v1); this document covers the REST/JSON form.

JSON conventions: snake_case field names; every field of a response is present (unset → null, lists [], objects {});
integers (int64 too) are JSON numbers; enums are short lowercase names; timestamps are RFC 3339 UTC with six fractional digits;
cursors (next_cursor, since, cursor) must be passed back unchanged.

Errors: \`{error, message, suggestion, request_id, documentation_url}\` plus per-error fields; a path that exists with another method → 405 method_not_allowed with Allow;
an unknown path → 404 not_found. Agent guide: /llms.txt. Error codes: /docs/errors.`;
