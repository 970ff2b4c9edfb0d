/**
 * The MCP tools' way to the service: its REST API over HTTP, with the
 * session's API key, so a tool call passes every check a REST call passes
 * (an MCP session has exactly the rights of its key). Stdio talks to
 * AGENTBUS_URL; /mcp talks to the process's own listener.
 */
import { pause } from "../../platform/pause.js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ApiError } from "../../model/errors.js";
import type { JsonObject, JsonValue } from "../../model/json.js";
import { routesInDeclarationOrder } from "../docs/openapi.js";
import type { RestRoute } from "../rest/routes.js";

/** The REST error body: the catalog's code, message and suggestion, with the error's details (retry_after, fields, violations, ...). */
export interface ApiErrorBody {
  error: string;
  message: string;
  suggestion?: string;
  [detail: string]: JsonValue | undefined;
}

/** An answer of the API other than 2xx, in the error catalog's shape. */
export class ApiCallError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiErrorBody,
  ) {
    super(body.message);
  }

  /** One of our own refusals, as the API would have answered it. */
  static of(err: ApiError): ApiCallError {
    return new ApiCallError(err.status, { ...err.details, error: err.code, message: err.message, ...(err.suggestion === undefined ? {} : { suggestion: err.suggestion }) });
  }
}

export interface CallOptions {
  /** Sent as Idempotency-Key. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Added to the request's time limit: how long the call may long-poll. */
  waitSeconds?: number;
  /** A stream (server-sent events): no time limit but the signal's. */
  stream?: boolean;
  /** Sent with this call (a trace context). */
  headers?: Record<string, string>;
}

/** A binary answer (HttpBody), or only its size when it is larger than the caller takes. */
export type Download = { bytes: Buffer; contentType: string } | { tooLarge: true; size: number | undefined };

/** An ordinary call's time limit; a long-poll gets its wait on top. */
const CALL_TIMEOUT_MS = 30_000;

export class AgentbusApi {
  private readonly routes = new Map<DescMethod, RestRoute>();

  constructor(
    services: readonly DescService[],
    private readonly baseUrl: () => string,
    private readonly apiKey: string | undefined,
    /** Sent with every call (the /mcp endpoint's mark that its request was already charged). */
    private readonly extraHeaders: Record<string, string> = {},
  ) {
    // Each method's primary binding (the first declared).
    for (const route of routesInDeclarationOrder(services)) if (!this.routes.has(route.method)) this.routes.set(route.method, route);
  }

  /** Where the API answers (the tools' links to the service start here). */
  get url(): string {
    return this.baseUrl();
  }

  /** Calls `method` with `args` (REST JSON: path fields fill the path, the rest the body or the query). */
  async call(method: DescMethod, args: JsonObject, options: CallOptions = {}): Promise<JsonObject> {
    const res = await this.send(method, args, options);
    const parsed = parseJson(await res.text());
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : { value: parsed };
  }

  /**
   * Calls a method whose answer is a file (google.api.HttpBody: the PDF
   * download). A body larger than `maxBytes` is not read: the caller gets its
   * size (when the service declared one) and links to it instead.
   */
  async download(method: DescMethod, args: JsonObject, maxBytes: number, options: CallOptions = {}): Promise<Download> {
    const res = await this.send(method, args, options);
    const declared = res.headers.get("content-length");
    const size = declared === null ? undefined : Number(declared);
    if (size !== undefined && size > maxBytes) {
      await res.body?.cancel();
      return { tooLarge: true, size };
    }
    const chunks: Buffer[] = [];
    let read = 0;
    for await (const chunk of res.body ?? []) {
      read += chunk.byteLength;
      // Leaving the loop cancels the rest of the body.
      if (read > maxBytes) return { tooLarge: true, size };
      chunks.push(Buffer.from(chunk));
    }
    return { bytes: Buffer.concat(chunks), contentType: res.headers.get("content-type") ?? "application/octet-stream" };
  }

  /** Opens a streaming method (its REST form: server-sent events); the caller reads the body and ends it with the signal. */
  async open(method: DescMethod, args: JsonObject, signal: AbortSignal): Promise<Response> {
    return this.send(method, args, { signal, stream: true });
  }

  /** The path `method` is called at with `args` (e.g. a download route, to link to). */
  pathOf(method: DescMethod, args: JsonObject): string {
    return this.route(method, { ...args }).path;
  }

  /** The method's route with its path filled from `rest`, whose path fields are taken out. */
  private route(method: DescMethod, rest: JsonObject): { route: RestRoute; path: string } {
    const route = this.routes.get(method);
    if (route === undefined) throw new Error(`${method.name} has no REST route`);
    const path = route.template.template.replace(/\{([a-z_.]+)(=[^}]*)?\}/g, (_all, name: string) => {
      const value = rest[name];
      delete rest[name];
      if (value === undefined || value === null || value === "") {
        throw new ApiCallError(422, { error: "missing_field", message: `'${name}' is required`, field: name, suggestion: `Pass '${name}'.` });
      }
      return encodeURIComponent(String(value));
    });
    return { route, path };
  }

  /** Sends the request; a non-2xx answer is thrown as ApiCallError. */
  private async send(method: DescMethod, args: JsonObject, options: CallOptions): Promise<Response> {
    const rest: JsonObject = { ...args };
    const { route, path } = this.route(method, rest);
    const url = new URL(path, this.baseUrl());
    const headers: Record<string, string> = { ...this.extraHeaders, ...options.headers, Accept: "application/json" };
    if (this.apiKey !== undefined) headers["X-API-Key"] = this.apiKey;
    if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
    let body: string | undefined;
    if (route.bodyField === "") {
      for (const [name, value] of Object.entries(rest)) {
        if (value === null || value === undefined) continue;
        for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, typeof item === "object" ? JSON.stringify(item) : String(item));
      }
    } else {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(route.bodyField === "*" ? rest : (rest[route.bodyField] ?? {}));
    }
    const timeout = AbortSignal.timeout(CALL_TIMEOUT_MS + (options.waitSeconds ?? 0) * 1000);
    const signal = options.stream === true && options.signal ? options.signal : options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const res = await fetch(url, { method: route.httpMethod, headers, body, signal });
    if (res.ok) return res;
    const parsed = parseJson(await res.text());
    const error = (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}) as JsonObject;
    throw new ApiCallError(res.status, {
      ...error,
      error: typeof error.error === "string" ? error.error : "internal_error",
      message: typeof error.message === "string" ? error.message : `HTTP ${res.status}`,
      ...(typeof error.suggestion === "string" ? { suggestion: error.suggestion } : {}),
    });
  }
}

function parseJson(text: string): JsonValue {
  try {
    return text === "" ? {} : (JSON.parse(text) as JsonValue);
  } catch {
    return { error: "internal_error", message: text.slice(0, 500) };
  }
}

export { pause };

/** An empty long-poll answered sooner than this (the key's waiter slots are full) is not repeated before it. */
export const MIN_EMPTY_POLL_MS = 1000;

/**
 * After an empty long-poll that did not wait (the key holds all its waiter
 * slots, so the service answered at once), pause before asking again rather
 * than spin. For every loop that long-polls through this client.
 */
export async function notSpinning(found: number, startedAt: number, signal: AbortSignal): Promise<void> {
  if (found === 0 && Date.now() - startedAt < MIN_EMPTY_POLL_MS) await pause(MIN_EMPTY_POLL_MS, signal);
}

