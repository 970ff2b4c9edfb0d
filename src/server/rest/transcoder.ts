/**
 * Serves a matched REST route: reads and decodes the JSON request, runs the
 * method through the same call pipeline as gRPC and Connect, and renders the
 * response (or error) as REST JSON (docs/decisions.md#the-apis-shape).
 */
import { create, type DescMethod, type Message } from "@bufbuild/protobuf";
import { createContextValues } from "@connectrpc/connect";
import type { NodeRequest, NodeResponse } from "../http/node-http.js";
import type { HttpBody } from "../../../gen/google/api/httpbody_pb.js";
import { ApiError } from "../../model/errors.js";
import type { Clock, Timer } from "../../model/time.js";
import { rulesOf } from "../rpc/method-rules.js";
import { bodyLimit, type BodyLimits } from "../rpc/body-limits.js";
import { baseUrlKey, callerKey, clientAddressKey, httpStatusKey, requestIdKey, streamOpenKey } from "../../protocol/context.js";
import { bodyReceived, continueBody, releaseAfterResponse } from "../http/body-deadline.js";
import { KEYLESS_ACCOUNT, type BodyAccount, type BodyBudget } from "../http/body-budget.js";
import type { CallPipeline } from "../rpc/pipeline.js";
import { serialiseOnce } from "../../protocol/shared-response.js";
import { toRestError } from "../rpc/errors.js";
import { RestCallContext } from "./call-context.js";
import { decodeRequest } from "./json-codec.js";
import { renderMessageJson } from "../../protocol/json-render-text.js";
import type { RestRoute } from "./routes.js";

export type { NodeRequest, NodeResponse } from "../http/node-http.js";

export interface RequestInfo {
  requestId: string;
  clientAddress: string;
  /** The validated URL the request came to (base-url.ts). */
  baseUrl: string;
  url: URL;
}

export interface TranscoderOptions extends BodyLimits {
  pipeline: CallPipeline;
  /** Request bodies held at once, per key and in all. */
  budget: BodyBudget;
  /** A client went away while its body arrived (logged quietly by the caller). */
  onClientGone?: (err: ClientGone) => void;
  shutdownSignal: AbortSignal;
  /** Times the keep-alive comments of event streams. */
  clock: Clock;
}

const HTTP_BODY = "google.api.HttpBody";

export function sendJson(res: NodeResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/**
 * Sends JSON that is already text (a rendered response). As one Buffer: the
 * text is encoded once, where Buffer.byteLength, then Node's joining of the
 * head and a string body, then the socket write would each copy it.
 */
export function sendJsonText(res: NodeResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  sendJsonBody(res, status, Buffer.from(text, "utf8"), headers);
}

function sendJsonBody(res: NodeResponse, status: number, body: Buffer, headers: Record<string, string>): void {
  res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": body.length });
  res.end(body);
}

/** The REST JSON of a response; a shared response is serialised once (see src/protocol/shared-response.ts). */
function jsonBodyOf(method: DescMethod, response: object): Buffer {
  return serialiseOnce(response, (r) => Buffer.from(renderMessageJson(method.output, r), "utf8"));
}

export function sendError(res: NodeResponse, err: ApiError, requestId: string, headers: Record<string, string> = {}): void {
  const rest = toRestError(err, requestId);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, rest.status, rest.body, { ...rest.headers, ...headers });
}

/**
 * The client went away while its body was arriving: nothing to answer, and
 * no error of ours (docs/operations.md#logs: a debug line, never a stack).
 */
export class ClientGone extends Error {
  constructor(cause: unknown) {
    super("the client went away before its request body arrived", { cause });
    this.name = "ClientGone";
  }
}

/**
 * Reads the body up to `limit` bytes, charging each chunk to `account` as it
 * arrives; 413 beyond the limit and the budget's refusal beyond it, both
 * without buffering the excess.
 */
export async function readBody(req: NodeRequest, limit: number, account: BodyAccount): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? "0");
  const tooLarge = () =>
    new ApiError("payload_too_large", `The request body exceeds ${limit} bytes`, { details: { max_body_bytes: limit } });
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw tooLarge();
      account.charge(chunk.length);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ClientGone(err);
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
    const values = createContextValues().set(requestIdKey, info.requestId).set(clientAddressKey, info.clientAddress).set(baseUrlKey, info.baseUrl);
    const ctx = new RestCallContext(method, req.method ?? "GET", headersOf(req), values, info.url, this.options.shutdownSignal);
    const onClose = () => ctx.clientClosed();
    res.once("close", onClose);
    let account: BodyAccount | undefined;
    try {
      // The key is judged from the headers before a byte of the body is read.
      await this.options.pipeline.admitEarly(method, ctx);
      const caller = ctx.values.get(callerKey);
      let body: unknown;
      if (route.bodyField !== "") {
        account = this.options.budget.open(caller?.keyId ?? KEYLESS_ACCOUNT);
        const limit = bodyLimit(rules, caller !== undefined, this.options);
        if (Number(req.headers["content-length"] ?? "0") <= limit) continueBody(req, res);
        body = parseJson(await readBody(req, limit, account));
      } else if (req.headers["content-length"] && Number(req.headers["content-length"]) > this.options.defaultMaxBodyBytes) {
        throw new ApiError("payload_too_large");
      }
      const request = decodeRequest(method.input, {
        pathParams,
        query: info.url.searchParams,
        body,
        bodyField: route.bodyField,
        rejectUnknownBodyFields: rules.rejectUnknownFields,
      });
      if (method.methodKind === "server_streaming") await this.callStream(res, method, request, ctx);
      else await this.callUnary(res, method, request, rules.successStatus, ctx, info);
    } catch (err) {
      if (err instanceof ClientGone) this.options.onClientGone?.(err);
      else if (err instanceof ApiError) refuse(req, res, err, info.requestId, headersObject(ctx.responseHeader));
      else throw err;
    } finally {
      account?.release();
      res.off("close", onClose);
      ctx.end();
    }
  }

  private async callStream(res: NodeResponse, method: DescMethod, request: Message, ctx: RestCallContext): Promise<void> {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    ctx.values.set(streamOpenKey, () => open());
    // EventSource reconnects with the id of the last event it saw.
    const lastEventId = ctx.requestHeader.get("last-event-id");
    const sinceField = method.input.fields.find((f) => f.name === "since");
    if (lastEventId && sinceField) (request as unknown as Record<string, unknown>)[sinceField.localName] = lastEventId;
    try {
      await streamEvents(res, this.options.pipeline.callStream(method, request, ctx), (item) => streamEvent(method, item), opened, this.options.clock);
    } catch (err) {
      if (!res.headersSent) sendError(res, err as ApiError, ctx.values.get(requestIdKey));
      else {
        const e = err as ApiError;
        writeText(res, `event: error\ndata: ${JSON.stringify({ error: e.code, message: e.message })}\n\n`);
        res.end();
      }
    }
  }

  private async callUnary(res: NodeResponse, method: DescMethod, request: Message, successStatus: number, ctx: RestCallContext, info: RequestInfo): Promise<void> {
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
        sendJsonBody(res, status, jsonBodyOf(method, response as object), headers);
      }
    } catch (err) {
      // The pipeline only throws ApiError; headers set before the failure still apply.
      sendError(res, err as ApiError, info.requestId, headersObject(ctx.responseHeader));
    }
  }
}

/**
 * Answers a refused request. One refused before its body was read (the
 * key, the budget, the size) is also cut off, so the client stops sending
 * and the connection holds nothing more: HTTP/1.1 closes after the answer,
 * HTTP/2 resets the stream (the connection and its other streams stay).
 */
export function refuse(req: NodeRequest, res: NodeResponse, err: ApiError, requestId: string, headers: Record<string, string> = {}): void {
  const unread = !bodyReceived(req);
  sendError(res, err, requestId, unread && req.httpVersionMajor === 1 ? { ...headers, Connection: "close" } : headers);
  if (unread) releaseAfterResponse(req, res);
}

/**
 * Server-Sent Events for a server-streaming method. A failure before the
 * handler opens the stream (auth, 404, 403) is an ordinary error response;
 * after that each item is an event whose id is its cursor, so a client that
 * reconnects with Last-Event-ID resumes exactly where it stopped. Comments
 * every 15 s keep proxies from closing an idle stream.
 */
async function streamEvents(
  res: NodeResponse,
  items: AsyncIterable<Message>,
  render: (item: Message) => StreamEvent,
  opened: Promise<void>,
  clock: Clock,
): Promise<void> {
  const iterator = items[Symbol.asyncIterator]();
  let first: Promise<IteratorResult<Message>> | undefined = iterator.next();
  // Whichever comes first: the handler opens the stream, or yields, or fails.
  await Promise.race([opened, first]);
  res.writeHead(200, {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
  });
  writeText(res, ": stream open\n\n");
  let keepAlive: Timer;
  const beat = () => {
    writeText(res, ": keep-alive\n\n");
    keepAlive = clock.setTimer(SSE_KEEPALIVE_MS, beat);
  };
  keepAlive = clock.setTimer(SSE_KEEPALIVE_MS, beat);
  try {
    for (;;) {
      const next: IteratorResult<Message> = await (first ?? iterator.next());
      first = undefined;
      if (next.done) break;
      const event = render(next.value);
      writeText(res, `id: ${event.id}\nevent: ${event.event}\ndata: ${event.data}\n\n`);
    }
  } finally {
    keepAlive.cancel();
    await iterator.return?.();
  }
  res.end();
}

const SSE_KEEPALIVE_MS = 15_000;

// The HTTP/1 and HTTP/2 responses both take a string; their overloads do not unify.
const writeText = (res: NodeResponse, text: string) => (res as { write(chunk: string): boolean }).write(text);

interface StreamEvent {
  id: string;
  /** "open", "message", or the name a response gives its event. */
  event: string;
  data: string;
}

/**
 * One event per streamed item. A response of the shape {message, cursor}
 * (WatchMessages) becomes `id: <cursor>` with the message as data, so the
 * data is the same JSON a list returns for that message. The opening item
 * has no message: it becomes an `open` event whose id is the starting
 * cursor, so an EventSource that reconnects before any message still sends
 * a Last-Event-ID and misses nothing.
 */
function streamEvent(method: DescMethod, item: Message): StreamEvent {
  const record = item as unknown as Record<string, unknown>;
  const cursor = method.output.fields.find((f) => f.name === "cursor");
  const message = method.output.fields.find((f) => f.name === "message");
  // A response that names its event (WatchMessage: progress, state, result) is sent as that event.
  const named = method.output.fields.find((f) => f.name === "event");
  if (cursor && message?.fieldKind === "message") {
    const id = String(record[cursor.localName] ?? "");
    const value = record[message.localName] as object | undefined;
    if (value === undefined) return { id, event: "open", data: JSON.stringify({ cursor: id }) };
    const event = named ? String(record[named.localName] ?? "") || "message" : "message";
    return { id, event, data: renderMessageJson(message.message, value) };
  }
  return { id: "", event: "message", data: renderMessageJson(method.output, item) };
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
