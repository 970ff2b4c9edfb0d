/**
 * The "__proto__" rule of validate-request.ts for gRPC, gRPC-Web and Connect
 * (docs/decisions.md#validate-at-decode). Connect decodes a request with
 * protobuf-es before any handler or interceptor runs, and protobuf-es drops
 * a Struct key "__proto__" (it assigns map entries to a plain object, where
 * that key sets the prototype), so the decoded request no longer shows it.
 * This wraps each Connect handler: it reads the request message as the client
 * sent it (the first message of an enveloped stream, decompressed as Connect
 * would), looks for the key through the method's descriptors, and leaves what
 * it found in the call's context, where the call pipeline refuses the request
 * like any other invalid value. The body goes on to Connect unchanged; one
 * it cannot read (malformed, over the size limit, an unknown compression) goes
 * on unread, for Connect to judge.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { createContextKey, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { parseContentType as parseConnectType } from "@connectrpc/connect/protocol-connect";
import { parseContentType as parseGrpcType } from "@connectrpc/connect/protocol-grpc";
import { parseContentType as parseGrpcWebType } from "@connectrpc/connect/protocol-grpc-web";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ListValueSchema, StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { promisify } from "node:util";
import { brotliDecompress, gunzip } from "node:zlib";
import { rulesOf } from "./method-rules.js";
import { wrapHandler } from "./wrap-handler.js";
import { PROTO_KEY, protoKeyPath, shown, type InvalidValue } from "./validate-request.js";

/** What the wrapper found in the request as sent; the pipeline refuses the call with it. */
export const seenBeforeDecodingKey = createContextKey<InvalidValue | undefined>(undefined, { description: "invalid value seen before decoding" });

const ENVELOPE_HEADER = 5;
const COMPRESSED_FLAG = 0b01;

/** Wraps every handler in place (the adapter reads the list after the routes are registered). */
export function inspectRawRequests(handlers: UniversalHandler[], defaultMaxBytes: number): void {
  handlers.forEach((handler, i) => {
    // Most requests cannot hold a JSON object: theirs go to Connect as they come.
    if (!holdsObjects(handler.method.input)) return;
    // The limit Connect holds the service's messages to (CallPipeline.registerConnect): past it, Connect refuses them anyway.
    const serviceMax = Math.max(0, ...handler.service.methods.map((m) => rulesOf(m).maxBodyBytes));
    const maxBytes = serviceMax > 0 ? serviceMax : defaultMaxBytes;
    const wrapped = async (req: UniversalServerRequest) => {
      const format = formatOf(req.header);
      if (format === undefined || !isByteStream(req.body)) return handler(req);
      const read = await readFirstMessage(req.body, format.enveloped, maxBytes);
      const found = read.message && (await inspect(handler.method.input, format, req.header, read.message, maxBytes));
      // The adapter passes the values our contextValues option made; one of our own otherwise.
      const values = req.contextValues ?? createContextValues();
      if (found !== undefined) values.set(seenBeforeDecodingKey, found);
      return handler({ ...req, contextValues: values, body: read.body });
    };
    handlers[i] = wrapHandler(handler, wrapped);
  });
}

interface Format {
  json: boolean;
  /** gRPC, gRPC-Web and Connect streaming frame each message (flags, length); Connect unary sends it bare. */
  enveloped: boolean;
  /** The header that names the compression of the message (enveloped: of frames flagged compressed). */
  encodingHeader: string;
}

/** The request's framing, by Connect's own reading of its content type (gRPC-Web text Connect refuses). */
function formatOf(header: Headers): Format | undefined {
  const type = header.get("content-type") ?? "";
  const grpc = parseGrpcType(type) ?? parseGrpcWebType(type);
  if (grpc !== undefined && !("text" in grpc && grpc.text)) return { json: !grpc.binary, enveloped: true, encodingHeader: "grpc-encoding" };
  const connect = parseConnectType(type);
  if (connect === undefined) return undefined;
  return connect.stream
    ? { json: !connect.binary, enveloped: true, encodingHeader: "connect-content-encoding" }
    : { json: !connect.binary, enveloped: false, encodingHeader: "content-encoding" };
}

function isByteStream(body: UniversalServerRequest["body"]): body is AsyncIterable<Uint8Array> {
  return typeof body === "object" && body !== null && Symbol.asyncIterator in body;
}

interface FirstMessage {
  /** The message bytes as sent, and whether the encoding header applies to them (a frame flagged compressed, or a whole unary body); undefined when unread. */
  message: { bytes: Uint8Array; encoded: boolean } | undefined;
  /** The body to hand on: what was read, then the rest as it comes. */
  body: AsyncIterable<Uint8Array>;
}

/**
 * Reads up to the end of the first message (an enveloped stream is not read
 * further: a server-streaming client may keep its side open), or up to the
 * size limit, past which it gives up.
 */
async function readFirstMessage(body: AsyncIterable<Uint8Array>, enveloped: boolean, maxBytes: number): Promise<FirstMessage> {
  const source = body[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let ended = false;
  let failure: unknown;
  // An enveloped message's full size (header and length), once its header has arrived.
  let wanted: number | undefined;
  try {
    while (size <= maxBytes + ENVELOPE_HEADER && (wanted === undefined || size < wanted)) {
      const next = await source.next();
      if (next.done === true) {
        ended = true;
        break;
      }
      chunks.push(next.value);
      size += next.value.byteLength;
      if (enveloped && wanted === undefined && size >= ENVELOPE_HEADER) {
        const length = Buffer.concat(chunks).readUInt32BE(1);
        if (length > maxBytes) break;
        wanted = ENVELOPE_HEADER + length;
      }
    }
  } catch (err) {
    // The client went away or the stream broke: Connect meets the same error where it reads.
    failure = err;
  }
  const read = Buffer.concat(chunks);
  let message: FirstMessage["message"];
  if (failure === undefined) {
    if (!enveloped && ended) message = { bytes: read, encoded: true };
    if (enveloped && wanted !== undefined && size >= wanted) message = { bytes: read.subarray(ENVELOPE_HEADER, wanted), encoded: (read[0]! & COMPRESSED_FLAG) !== 0 };
  }
  async function* replay(): AsyncGenerator<Uint8Array> {
    if (read.byteLength > 0) yield read;
    if (failure !== undefined) throw failure;
    if (ended) return;
    try {
      for (let next = await source.next(); next.done !== true; next = await source.next()) yield next.value;
    } finally {
      // Connect stopped reading early (a refusal): the source is not needed.
      await source.return?.();
    }
  }
  return { message, body: replay() };
}

const gunzipAsync = promisify(gunzip);
const brotliAsync = promisify(brotliDecompress);

/** The first "__proto__" key of the request message, or undefined (also when it cannot be read). */
async function inspect(
  desc: DescMessage,
  format: Format,
  header: Headers,
  message: { bytes: Uint8Array; encoded: boolean },
  maxBytes: number,
): Promise<InvalidValue | undefined> {
  try {
    let bytes = message.bytes;
    const encoding = (header.get(format.encodingHeader) ?? "identity").toLowerCase();
    if (message.encoded && encoding !== "identity") {
      const options = { maxOutputLength: maxBytes };
      if (encoding === "gzip") bytes = await gunzipAsync(bytes, options);
      else if (encoding === "br") bytes = await brotliAsync(bytes, options);
      else return undefined;
    }
    if (!format.json) return protoKeyInBinary(desc, bytes);
    return protoKeyInJson(desc, JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)));
  } catch {
    return undefined;
  }
}

const JSON_TYPES: ReadonlySet<string> = new Set([StructSchema.typeName, ValueSchema.typeName, ListValueSchema.typeName]);

const fieldPath = (path: string, field: DescField) => (path === "" ? field.name : `${path}.${field.name}`);

/** Whether a message of this type can hold a Struct, Value, ListValue or map, at any depth. */
function holdsObjects(desc: DescMessage, seen = new Set<string>()): boolean {
  if (JSON_TYPES.has(desc.typeName)) return true;
  if (seen.has(desc.typeName)) return false;
  seen.add(desc.typeName);
  return desc.fields.some((field) => {
    if (field.fieldKind === "map") return true;
    const sub = messageOf(field);
    return sub !== undefined && holdsObjects(sub, seen);
  });
}

/** The message type a field holds (singly, as list items or as map values), if any. */
function messageOf(field: DescField): DescMessage | undefined {
  if (field.fieldKind === "message") return field.message;
  if (field.fieldKind === "list" && field.listKind === "message") return field.message;
  if (field.fieldKind === "map" && field.mapKind === "message") return field.message;
  return undefined;
}

/** In a Connect JSON request (keys by proto or JSON name, as protobuf-es reads them). */
export function protoKeyInJson(desc: DescMessage, json: unknown): InvalidValue | undefined {
  const stack: Array<{ desc: DescMessage; json: unknown; path: string }> = [{ desc, json, path: "" }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (typeof next.json !== "object" || next.json === null || Array.isArray(next.json)) continue;
    for (const [key, value] of Object.entries(next.json)) {
      const field = next.desc.fields.find((f) => f.name === key || f.jsonName === key);
      if (field === undefined || value === null) continue;
      const at = fieldPath(next.path, field);
      // Each value the field holds, with its path.
      let items: Array<[unknown, string]> = [[value, at]];
      if (field.fieldKind === "list") items = Array.isArray(value) ? value.map((item: unknown, i) => [item, `${at}[${i}]`]) : [];
      if (field.fieldKind === "map") {
        if (typeof value !== "object" || Array.isArray(value)) continue;
        const keys = Object.keys(value);
        if (keys.includes(PROTO_KEY)) return { field, path: `${at}.${PROTO_KEY}`, problem: "proto_key" };
        items = Object.entries(value).map(([k, item]) => [item, `${at}.${shown(k)}`]);
      }
      const sub = messageOf(field);
      if (sub === undefined) continue;
      for (const [item, path] of items) {
        if (!JSON_TYPES.has(sub.typeName)) {
          stack.push({ desc: sub, json: item, path });
          continue;
        }
        const found = protoKeyPath(item, path);
        if (found !== undefined) return { field, path: found, problem: "proto_key" };
      }
    }
  }
  return undefined;
}

/** A message still in protobuf binary, with the request field it belongs to once inside a Struct, Value or ListValue. */
interface Pending {
  desc: DescMessage;
  bytes: Uint8Array;
  path: string;
  owner: DescField | undefined;
}

/** In a protobuf binary request; throws when the bytes are not protobuf (the caller passes them on unread). */
export function protoKeyInBinary(desc: DescMessage, bytes: Uint8Array): InvalidValue | undefined {
  const stack: Pending[] = [{ desc, bytes, path: "", owner: undefined }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const found = next.desc.typeName === StructSchema.typeName ? structEntries(next, stack) : messageFields(next, stack);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** A Struct: each entry of `fields` (1) is a key (1) and a Value (2). */
function structEntries(struct: Pending, stack: Pending[]): InvalidValue | undefined {
  const reader = new BinaryReader(struct.bytes);
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number !== 1 || wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, number);
      continue;
    }
    const entry = new BinaryReader(reader.bytes());
    let key = "";
    let value: Uint8Array | undefined;
    while (entry.pos < entry.len) {
      const [n, t] = entry.tag();
      if (n === 1 && t === WireType.LengthDelimited) key = entry.string();
      else if (n === 2 && t === WireType.LengthDelimited) value = entry.bytes();
      else entry.skip(t, n);
    }
    const path = `${struct.path}.${shown(key)}`;
    if (key === PROTO_KEY) return { field: struct.owner!, path, problem: "proto_key" };
    if (value !== undefined) stack.push({ desc: ValueSchema, bytes: value, path, owner: struct.owner });
  }
  return undefined;
}

/** Any other message: its message-typed fields (a Value's struct_value and list_value among them) and maps, with their paths. */
function messageFields(message: Pending, stack: Pending[]): InvalidValue | undefined {
  const reader = new BinaryReader(message.bytes);
  const counts = new Map<number, number>();
  const inJson = message.owner !== undefined;
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    const field = message.desc.fields.find((f) => f.number === number);
    if (field === undefined || wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, number);
      continue;
    }
    const bytes = reader.bytes();
    const index = counts.get(number) ?? 0;
    counts.set(number, index + 1);
    // Inside a Value or ListValue the path is the JSON's; outside it, the fields'.
    const named = inJson ? message.path : fieldPath(message.path, field);
    if (field.fieldKind === "map") {
      const found = mapEntry(field, bytes, named, stack);
      if (found !== undefined) return found;
      continue;
    }
    const sub = messageOf(field);
    if (sub === undefined) continue;
    const path = field.fieldKind === "list" ? `${named}[${index}]` : named;
    stack.push({ desc: sub, bytes, path, owner: message.owner ?? (JSON_TYPES.has(sub.typeName) ? field : undefined) });
  }
  return undefined;
}

/** A map entry outside any Struct: its key (1) and, for a message-valued map, its value (2). */
function mapEntry(field: DescField & { fieldKind: "map" }, bytes: Uint8Array, path: string, stack: Pending[]): InvalidValue | undefined {
  const entry = new BinaryReader(bytes);
  let key: string | undefined;
  let value: Uint8Array | undefined;
  while (entry.pos < entry.len) {
    const [n, t] = entry.tag();
    if (n === 1 && t === WireType.LengthDelimited) key = entry.string();
    else if (n === 2 && t === WireType.LengthDelimited) value = entry.bytes();
    else entry.skip(t, n);
  }
  if (key === PROTO_KEY) return { field, path: `${path}.${key}`, problem: "proto_key" };
  const sub = messageOf(field);
  if (value !== undefined && sub !== undefined) {
    stack.push({ desc: sub, bytes: value, path: `${path}.${shown(key ?? "")}`, owner: JSON_TYPES.has(sub.typeName) ? field : undefined });
  }
  return undefined;
}
