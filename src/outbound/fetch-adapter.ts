/**
 * The guarded client behind the WHATWG `fetch` signature, for libraries that
 * take a custom fetch (the `openai` SDK). Every request still goes through
 * the one guarded client: its address rule, timeouts, size cap and redirect
 * checks apply unchanged.
 *
 * Limits of the adapter, on purpose:
 * - Request bodies must be bytes or text (string, Buffer/typed array,
 *   ArrayBuffer, URLSearchParams); a stream body is refused, since the guarded
 *   client sends a known length.
 * - The response body is buffered (up to maxResponseBytes). A body cut at the
 *   cap is a failure (OutboundError "response_too_large"), never a silently
 *   short answer: a truncated JSON document is worse than none.
 * - No streaming responses, no cookies, no cache: callers that need them are
 *   not meant to use this adapter.
 */
import type { OutboundClient, OutboundRequest } from "./guarded-fetch.js";
import { OutboundError } from "./guarded-fetch.js";

export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export type FetchAdapterOptions = Pick<OutboundRequest, "timeoutMs" | "connectTimeoutMs" | "maxResponseBytes" | "maxRedirects">;

/** Statuses whose Response may not carry a body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function outboundFetch(client: OutboundClient, options: FetchAdapterOptions = {}): FetchFunction {
  return async (input, init = {}) => {
    const request = input instanceof Request ? input : undefined;
    const url = request ? request.url : input.toString();
    const method = init.method ?? request?.method ?? "GET";
    const headers: Record<string, string> = {};
    new Headers(request?.headers).forEach((value, name) => (headers[name] = value));
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    const body = await bodyBytes(init.body ?? (request && request.body ? await request.arrayBuffer() : undefined));
    const signal = init.signal ?? request?.signal ?? undefined;

    const res = await client.request(url, { ...options, method, headers, body, ...(signal ? { signal } : {}) });
    if (res.truncated) {
      throw new OutboundError("response_too_large", `the answer from ${new URL(res.url).host} is larger than ${options.maxResponseBytes ?? "the cap"} bytes`);
    }
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
    }
    return new Response(NULL_BODY.has(res.status) ? null : res.body, { status: res.status, headers: responseHeaders });
  };
}

async function bodyBytes(body: RequestInit["body"] | ArrayBuffer): Promise<string | Buffer | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (Buffer.isBuffer(body)) return body;
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (body instanceof Blob) return Buffer.from(await body.arrayBuffer());
  throw new OutboundError("invalid_request", "streaming request bodies are not supported by the guarded client");
}
