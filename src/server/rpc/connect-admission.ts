/**
 * gRPC, gRPC-Web and Connect calls are judged from their headers before
 * Connect reads their body (issue 26, F3), as REST calls are: Connect
 * buffers a unary request whole (up to the service's readMaxBytes, 10 MiB
 * for the job service) before any handler or interceptor runs, so without
 * this a caller with no valid key could pin that much memory per stream.
 *
 * Each Connect handler is wrapped (like decoder-errors.ts does) at the
 * universal layer, where the body is still an unread stream:
 * - refused (no key, a bad key, over the request budget, a missing scope):
 *   the body is never read. Connect is handed an empty request message
 *   instead, and the pipeline throws the refusal admitEarly recorded, so the
 *   answer is Connect's own, in whichever protocol the call came (gRPC
 *   status and trailers, gRPC-Web, Connect JSON); the transport then cuts
 *   off the unread body (http-handler.ts).
 * - admitted: the body is read through a counter that holds it to the
 *   method's limit (the keyless limit without a key) and charges every
 *   chunk to the key's share of the process's body budget.
 */
import { createContextValues, type ContextValues } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { ApiError } from "../../model/errors.js";
import { callerKey } from "../../protocol/context.js";
import { KEYLESS_ACCOUNT, type BodyBudget } from "../http/body-budget.js";
import { bodyLimit, type BodyLimits } from "./body-limits.js";
import { toConnectError } from "./errors.js";
import { wrapHandler } from "./wrap-handler.js";
import { rulesOf } from "./method-rules.js";
import type { CallPipeline } from "./pipeline.js";

export interface ConnectAdmissionOptions extends BodyLimits {
  pipeline: CallPipeline;
  budget: BodyBudget;
}

/** Wraps every handler in place (the adapter reads the list after the routes are registered). */
export function admitBeforeBody(handlers: UniversalHandler[], options: ConnectAdmissionOptions): void {
  handlers.forEach((handler, i) => {
    const method = handler.method;
    const rules = rulesOf(method);
    const wrapped = async (given: UniversalServerRequest) => {
      // The adapter passes the values our contextValues option made; one of our own otherwise.
      const values: ContextValues = given.contextValues ?? createContextValues();
      const req = { ...given, contextValues: values };
      const ctx = { requestHeader: req.header, responseHeader: new Headers(), values };
      const admitted = await options.pipeline.admitEarly(method, ctx).then(
        () => true,
        () => false,
      );
      if (!admitted) return handler({ ...req, body: emptyRequest(req) });
      if (!isByteStream(req.body)) return handler(req);
      const caller = values.get(callerKey);
      const account = options.budget.open(caller?.keyId ?? KEYLESS_ACCOUNT);
      try {
        return await handler({ ...req, body: counted(req.body, bodyLimit(rules, caller !== undefined, options), account) });
      } finally {
        account.release();
      }
    };
    handlers[i] = wrapHandler(handler, wrapped);
  });
}

const isByteStream = (body: UniversalServerRequest["body"]): body is AsyncIterable<Uint8Array> =>
  typeof body === "object" && body !== null && Symbol.asyncIterator in body;

/** The body, read through a limit and the body budget; either refusal ends the read with the catalog's error. */
async function* counted(body: AsyncIterable<Uint8Array>, limit: number, account: { charge(bytes: number): void }): AsyncIterable<Uint8Array> {
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    try {
      if (size > limit) throw new ApiError("payload_too_large", `The request body exceeds ${limit} bytes`, { details: { max_body_bytes: limit } });
      account.charge(chunk.byteLength);
    } catch (err) {
      throw err instanceof ApiError ? toConnectError(err) : err;
    }
    yield chunk;
  }
}

/**
 * A request body holding one empty message, framed as the call's protocol
 * frames it: what Connect decodes in place of a body that is not read.
 * Connect GET requests carry their message in the URL and have none.
 */
function emptyRequest(req: UniversalServerRequest): AsyncIterable<Uint8Array> {
  const type = (req.header.get("content-type") ?? "").toLowerCase();
  const message = /^application\/(?:grpc-web\+json|grpc\+json|connect\+json|json)/.test(type) ? Buffer.from("{}") : Buffer.alloc(0);
  let bytes: Buffer = message;
  if (/^application\/(?:grpc|connect\+)/.test(type)) {
    // Enveloped: a flags byte (0: one uncompressed message) and the length.
    bytes = Buffer.alloc(5 + message.length);
    bytes.writeUInt32BE(message.length, 1);
    message.copy(bytes, 5);
    if (type.startsWith("application/grpc-web-text")) bytes = Buffer.from(bytes.toString("base64"));
  }
  return (async function* () {
    if (req.method !== "GET") yield bytes;
  })();
}
