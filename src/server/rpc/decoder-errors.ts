/**
 * Connect decodes a unary request before any handler or interceptor runs, so
 * a request it cannot decode (malformed protobuf, invalid UTF-8, JSON that is
 * not the request type) is answered by Connect itself: malformed binary as
 * INTERNAL, and without the ErrorDetail every other error carries. This wraps
 * each Connect handler and gives such an answer the catalog's shape:
 * InvalidArgument with `invalid_protobuf` (or `invalid_unicode`), on gRPC,
 * gRPC-Web and Connect unary alike. Answers that already carry an
 * ErrorDetail (everything from the call pipeline) pass unchanged.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { gunzipSync } from "node:zlib";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { ErrorDetailSchema } from "../../../gen/agentbus/v1/errors_pb.js";
import { ApiError } from "../../model/errors.js";
import { toApiError, toConnectError, type InternalErrorReporter } from "./errors.js";
import { wrapHandler } from "./wrap-handler.js";

/** The catalog error for an error Connect raised while decoding or framing a request. */
export function decoderError(err: ConnectError, report: InternalErrorReporter): ApiError {
  const text = err.rawMessage;
  if (/invalid UTF-?8/i.test(text)) {
    return new ApiError("invalid_unicode", `The request has a string that is not valid UTF-8 text: ${text}`);
  }
  // Connect's own wording for a message it could not decode: binary ("parse binary: …", as
  // INTERNAL) or JSON ("cannot decode …" as INVALID_ARGUMENT).
  if (text.startsWith("parse binary:") || (err.code === Code.InvalidArgument && /decode|parse|JSON|unexpected|expected/i.test(text))) {
    return new ApiError("invalid_protobuf", `The request could not be decoded: ${text}`);
  }
  return toApiError(err, report);
}

const hasDetail = (err: ConnectError) => err.findDetails(ErrorDetailSchema).length > 0;

function replacement(err: ConnectError | undefined, report: InternalErrorReporter): ConnectError | undefined {
  if (err === undefined || hasDetail(err)) return undefined;
  return toConnectError(decoderError(err, report));
}

/** Wraps every handler in place (the adapter reads the list after the routes are registered). */
export function normaliseDecoderErrors(handlers: UniversalHandler[], report: InternalErrorReporter): void {
  handlers.forEach((handler, i) => {
    const wrapped = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
      const res = await handler(req);
      return rewrite(handler, protocolOf(req.header.get("content-type") ?? ""), res, report);
    };
    handlers[i] = wrapHandler(handler, wrapped);
  });
}

/** One handler serves every protocol, told apart by the request's content type. */
function protocolOf(contentType: string): "grpc" | "grpc-web" | "connect" {
  if (/^application\/grpc-web/i.test(contentType)) return "grpc-web";
  if (/^application\/grpc/i.test(contentType)) return "grpc";
  return "connect";
}

async function rewrite(
  handler: UniversalHandler,
  protocol: ReturnType<typeof protocolOf>,
  res: UniversalServerResponse,
  report: InternalErrorReporter,
): Promise<UniversalServerResponse> {
  if (protocol === "grpc") {
    // A request that failed to decode has ended by now, its status already in the trailer.
    const fixed = res.trailer && replacement(findTrailerError(res.trailer), report);
    if (fixed) setTrailerStatus(res.trailer!, fixed);
    return res;
  }
  if (protocol === "grpc-web") {
    // An early failure's body is the trailer frame alone; anything else streams untouched.
    if (res.body === undefined || handler.method.methodKind !== "unary") return res;
    const body = await collect(res.body);
    const flags = body[0] ?? 0;
    if (body.length >= 5 && (flags & trailerFlag) === trailerFlag && body.length === 5 + body.readUInt32BE(1)) {
      const trailer = trailerParse(body.subarray(5));
      const fixed = replacement(findTrailerError(trailer), report);
      if (fixed) {
        const data = trailerSerialize(setTrailerStatus(trailer, fixed));
        const frame = Buffer.alloc(5 + data.byteLength);
        frame[0] = trailerFlag;
        frame.writeUInt32BE(data.byteLength, 1);
        frame.set(data, 5);
        return { ...res, body: once(frame) };
      }
    }
    return { ...res, body: once(body) };
  }
  if (protocol === "connect" && handler.method.methodKind === "unary" && res.status !== 200 && res.body !== undefined) {
    const body = await collect(res.body);
    const header = new Headers(res.header);
    // Connect compresses an error body over 1 KiB when the client accepts gzip.
    const encoding = header.get("content-encoding");
    let json: Uint8Array = body;
    try {
      if (encoding === "gzip") json = gunzipSync(body);
      else if (encoding !== null && encoding !== "identity") return { ...res, body: once(body) };
    } catch {
      return { ...res, body: once(body) };
    }
    const fallback = new ConnectError("", codeFromStatus(res.status));
    let err: ConnectError;
    try {
      err = errorFromJsonBytes(json, undefined, fallback);
    } catch (thrown) {
      // errorFromJsonBytes throws its fallback when the body is not an error.
      err = thrown instanceof ConnectError ? thrown : fallback;
    }
    const fixed = replacement(err, report);
    if (!fixed) return { ...res, body: once(body) };
    const bytes = errorToJsonBytes(fixed, {});
    header.delete("content-encoding");
    header.set("content-length", String(bytes.byteLength));
    return { ...res, status: codeToHttpStatus(fixed.code), header, body: once(bytes) };
  }
  return res;
}

function codeFromStatus(status: number): Code {
  // Only used when Connect's error body cannot be read, which it always can; unknown then.
  return status === 400 ? Code.InvalidArgument : Code.Unknown;
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
