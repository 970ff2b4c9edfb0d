/**
 * Serves a matched REST route: reads and decodes the JSON request, runs the
 * method through the same call pipeline as gRPC and Connect, and renders the
 * response (or error) as the REST JSON of decisions J1–J6 and E1–E3.
 */
import { create, type DescMethod, type Message } from "@bufbuild/protobuf";
import { createContextValues } from "@connectrpc/connect";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { HttpBody } from "../../../gen/google/api/httpbody_pb.js";
import { ApiError } from "../../domain/errors.js";
import { rulesOf } from "../rpc/method-rules.js";
import { clientAddressKey, httpStatusKey, requestIdKey } from "../rpc/context.js";
import type { CallPipeline } from "../rpc/pipeline.js";
import { toRestError } from "../rpc/errors.js";
import { RestCallContext } from "./call-context.js";
import { decodeRequest } from "./json-codec.js";
import { renderMessageJson } from "./json-render.js";
import type { RestRoute } from "./routes.js";

export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;

export interface RequestInfo {
  requestId: string;
  clientAddress: string;
  url: URL;
}

export interface TranscoderOptions {
  pipeline: CallPipeline;
  defaultMaxBodyBytes: number;
  shutdownSignal: AbortSignal;
}

const HTTP_BODY = "google.api.HttpBody";

export function sendJson(res: NodeResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/** Sends JSON that is already text (a rendered response). */
export function sendJsonText(res: NodeResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: NodeResponse, err: ApiError, requestId: string, headers: Record<string, string> = {}): void {
  const rest = toRestError(err, requestId);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, rest.status, rest.body, { ...rest.headers, ...headers });
}

/** Reads the body up to `limit` bytes; 413 beyond it, without buffering the excess. */
async function readBody(req: NodeRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? "0");
  const tooLarge = () =>
    new ApiError("payload_too_large", `The request body exceeds ${limit} bytes`, { details: { max_body_bytes: limit } });
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch (err) {
    throw new ApiError("invalid_json", `The request body is not valid JSON: ${(err as Error).message}`);
  }
}

export class RestTranscoder {
  constructor(private readonly options: TranscoderOptions) {}

  async handle(req: NodeRequest, res: NodeResponse, route: RestRoute, pathParams: Record<string, string>, info: RequestInfo): Promise<void> {
    const method = route.method;
    const rules = rulesOf(method);
    try {
      let body: unknown;
      if (route.bodyField !== "") body = parseJson(await readBody(req, rules.maxBodyBytes || this.options.defaultMaxBodyBytes));
      else if (req.headers["content-length"] && Number(req.headers["content-length"]) > this.options.defaultMaxBodyBytes) {
        throw new ApiError("payload_too_large");
      }
      const request = decodeRequest(method.input, {
        pathParams,
        query: info.url.searchParams,
        body,
        bodyField: route.bodyField,
        rejectUnknownBodyFields: rules.rejectUnknownFields,
      });
      if (method.methodKind !== "unary") {
        // Server-Sent Events for WatchMessages land with the delivery work.
        throw new ApiError("not_implemented", `${method.name} is not available over REST yet; use gRPC or Connect`);
      }
      await this.callUnary(req, res, method, request, rules.successStatus, info);
    } catch (err) {
      if (err instanceof ApiError) sendError(res, err, info.requestId);
      else throw err;
    }
  }

  private async callUnary(
    req: NodeRequest,
    res: NodeResponse,
    method: DescMethod,
    request: Message,
    successStatus: number,
    info: RequestInfo,
  ): Promise<void> {
    const values = createContextValues().set(requestIdKey, info.requestId).set(clientAddressKey, info.clientAddress);
    const ctx = new RestCallContext(method, req.method ?? "GET", headersOf(req), values, info.url, this.options.shutdownSignal);
    const onClose = () => ctx.clientClosed();
    res.once("close", onClose);
    try {
      // An init shape or a message: renderMessage reads both, so the REST
      // path skips create()'s copy of the response.
      const response = await this.options.pipeline.callUnaryShape(method, request, ctx);
      const headers = headersObject(ctx.responseHeader);
      const status = ctx.values.get(httpStatusKey) ?? successStatus;
      if (method.output.typeName === HTTP_BODY) {
        const body = create(method.output, response as Parameters<typeof create>[1]) as unknown as HttpBody;
        res.writeHead(status, { ...headers, "Content-Type": body.contentType, "Content-Length": body.data.byteLength });
        res.end(Buffer.from(body.data.buffer, body.data.byteOffset, body.data.byteLength));
      } else if (status === 204) {
        res.writeHead(204, headers);
        res.end();
      } else {
        sendJsonText(res, status, renderMessageJson(method.output, response), headers);
      }
    } catch (err) {
      // The pipeline only throws ApiError; headers set before the failure still apply.
      sendError(res, err as ApiError, info.requestId, headersObject(ctx.responseHeader));
    } finally {
      res.off("close", onClose);
      ctx.end();
    }
  }
}

function headersObject(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => (out[key] = value));
  return out;
}

function headersOf(req: NodeRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    // HTTP/2 pseudo-headers (:path, :method) are not request headers.
    if (name.startsWith(":") || value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}
