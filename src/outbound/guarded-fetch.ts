/**
 * The one HTTP client for every outbound request the service makes
 * (webhooks now; job-posting pages, the video host and the LLM provider
 * later). It enforces timeouts, size caps and the private-address rule
 * (docs/decisions.md#outbound-addresses).
 *
 * - Only http: and https: URLs.
 * - The address rule (src/platform/address-policy.ts) is applied to the
 *   address the socket actually connects to: a custom `lookup` on the
 *   keep-alive agents resolves the name, refuses forbidden addresses and
 *   hands only checked ones to the socket. A name that resolves to a public
 *   address when "checked" and a private one when "used" (DNS rebinding)
 *   cannot slip through, because there is only one resolution. IP literals
 *   never reach `lookup` (Node connects to them directly), so they are
 *   checked before the request. AGENTBUS_ALLOW_PRIVATE_TARGETS=true lifts
 *   the rule (tests, and deployments that post to their own network).
 * - Timeouts: one total deadline for the whole exchange (redirects and
 *   reading the body included) and a shorter one for establishing each
 *   connection.
 * - The response body is read up to maxResponseBytes; the rest is discarded
 *   (the connection is dropped) and `truncated` says so.
 * - At most maxRedirects redirects (default 3), each one re-checked like the
 *   first request (scheme, literal address, resolved address). 307 and 308
 *   keep the method and body; 301, 302 and 303 are followed as GET only for
 *   GET and HEAD requests: any other request gets the redirect itself as its
 *   answer, so a POST is never silently turned into a GET (for a webhook
 *   that would look like a delivery). Credentials (Authorization, Cookie)
 *   are dropped when a redirect leaves the origin.
 *
 * Failures are OutboundError with a short code; an HTTP error status is not
 * a failure (the caller judges the status).
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { refusedRange } from "../platform/address-policy.js";
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { tracer, tracingEnabled } from "../platform/tracing.js";

export type OutboundErrorCode =
  | "invalid_url"
  | "blocked_address"
  | "dns_failed"
  | "connect_timeout"
  | "timeout"
  | "too_many_redirects"
  | "aborted"
  | "network"
  /** Raised by fetch-adapter.ts: the body exceeded maxResponseBytes where a partial body is useless. */
  | "response_too_large"
  /** Raised by fetch-adapter.ts: a request the client cannot send (a streaming body). */
  | "invalid_request";

export class OutboundError extends Error {
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "OutboundError";
  }
}

export interface OutboundRequest {
  /** Default GET. */
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Deadline for the whole exchange, redirects and body included; default 10 s. */
  timeoutMs?: number;
  /** Deadline for establishing each connection; default min(5 s, timeoutMs). */
  connectTimeoutMs?: number;
  /** Bytes of the response body kept; the rest is discarded. Default 1 MiB; 0 keeps nothing. */
  maxResponseBytes?: number;
  /** Default 3; 0 returns redirects as answers. */
  maxRedirects?: number;
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** At most maxResponseBytes of the body. */
  body: Buffer;
  /** The body was longer than maxResponseBytes. */
  truncated: boolean;
  /** The URL that answered (after redirects). */
  url: string;
  redirects: number;
}

export interface OutboundClient {
  request(url: string | URL, init?: OutboundRequest): Promise<OutboundResponse>;
  /** Closes idle keep-alive connections. */
  close(): void;
}

/** Resolves a host name to every address it has. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export interface OutboundClientOptions {
  /** Allow loopback, private, link-local and other non-public targets (AGENTBUS_ALLOW_PRIVATE_TARGETS). */
  allowPrivateTargets: boolean;
  /** Sent unless the request sets its own. */
  userAgent?: string;
  /** Name resolution; default the system resolver (dns.lookup). Tests inject names. */
  resolve?: Resolver;
  /** The address rule; default refusedRange. Tests narrow it to exercise redirects between local servers. */
  refused?: (address: string) => string | undefined;
}

export const OUTBOUND_DEFAULTS = {
  timeoutMs: 10_000,
  connectTimeoutMs: 5_000,
  maxResponseBytes: 1024 * 1024,
  maxRedirects: 3,
} as const;

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const CREDENTIAL_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);

const systemResolve: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export function createOutboundClient(options: OutboundClientOptions): OutboundClient {
  const resolve = options.resolve ?? systemResolve;
  const refused = options.allowPrivateTargets ? () => undefined : (options.refused ?? refusedRange);

  /** net's lookup contract, answered with checked addresses only. */
  const lookup: LookupFunction = (hostname, lookupOptions, done) => {
    resolve(hostname).then(
      (found) => {
        const family = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : 0;
        const candidates = family === 0 ? found : found.filter((a) => a.family === family);
        const allowed = candidates.filter((a) => refused(a.address) === undefined);
        if (allowed.length === 0) {
          // Never the addresses themselves: this text reaches users (job
          // errors), and naming what a name resolves to inside our network
          // would make the service a DNS oracle (docs/decisions.md#failure-classes).
          done(
            candidates.length === 0
              ? new OutboundError("dns_failed", `${hostname} has no address${family ? ` of family IPv${family}` : ""}`)
              : new OutboundError("blocked_address", `${hostname} resolves only to private or reserved addresses`),
            "",
          );
          return;
        }
        if (lookupOptions.all) done(null, allowed);
        else done(null, allowed[0]!.address, allowed[0]!.family);
      },
      (err: unknown) => done(new OutboundError("dns_failed", `cannot resolve ${hostname}`, { cause: err }), ""),
    );
  };

  // Keep-alive: a webhook receiver gets one request after another. Idle
  // sockets close after 4 s, or sooner when the server's Keep-Alive hint
  // says so, so a reused socket is rarely one the server has just dropped.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, timeout: 4_000, maxSockets: 64, lookup }),
    "https:": new https.Agent({ keepAlive: true, timeout: 4_000, maxSockets: 64, lookup }),
  };

  async function request(target: string | URL, init: OutboundRequest = {}): Promise<OutboundResponse> {
    const timeoutMs = init.timeoutMs ?? OUTBOUND_DEFAULTS.timeoutMs;
    const connectTimeoutMs = Math.min(init.connectTimeoutMs ?? OUTBOUND_DEFAULTS.connectTimeoutMs, timeoutMs);
    const maxResponseBytes = init.maxResponseBytes ?? OUTBOUND_DEFAULTS.maxResponseBytes;
    const maxRedirects = init.maxRedirects ?? OUTBOUND_DEFAULTS.maxRedirects;

    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new OutboundError("timeout", `no complete answer within ${timeoutMs} ms`)), timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;

    let url = parseTarget(target);
    let method = (init.method ?? "GET").toUpperCase();
    let body = init.body;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = value;
    if (options.userAgent !== undefined && headers["user-agent"] === undefined) headers["user-agent"] = options.userAgent;

    try {
      for (let redirects = 0; ; redirects++) {
        checkLiteral(url, refused);
        const hop = await exchange(url, method, headers, body, {
          agent: agents[url.protocol as "http:" | "https:"],
          connectTimeoutMs,
          maxResponseBytes,
          signal,
        });
        const location = hop.headers.location;
        const follow =
          REDIRECTS.has(hop.status) &&
          typeof location === "string" &&
          (hop.status === 307 || hop.status === 308 || method === "GET" || method === "HEAD");
        if (!follow || maxRedirects === 0) return { ...hop, url: url.toString(), redirects };
        if (redirects >= maxRedirects) throw new OutboundError("too_many_redirects", `more than ${maxRedirects} redirects`);
        const next = parseTarget(new URL(location, url));
        if (next.origin !== url.origin) for (const name of CREDENTIAL_HEADERS) delete headers[name];
        if (hop.status === 303 && method !== "HEAD") {
          method = "GET";
          body = undefined;
          delete headers["content-type"];
        }
        url = next;
      }
    } catch (err) {
      throw asOutboundError(err, signal);
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    request: (target, init) => (tracingEnabled() ? tracedRequest(request, target, init) : request(target, init)),
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

function parseTarget(target: string | URL): URL {
  let url: URL;
  try {
    url = typeof target === "string" ? new URL(target) : new URL(target.toString());
  } catch {
    throw new OutboundError("invalid_url", `not an absolute URL: ${String(target).slice(0, 200)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OutboundError("invalid_url", `only http and https URLs are allowed, not ${url.protocol}`);
  }
  if (url.hostname === "") throw new OutboundError("invalid_url", "the URL has no host");
  return url;
}

/**
 * A client span around an outbound request (docs/decisions.md#spans), the
 * child of whatever is active (a job's span, a webhook's message trace),
 * whose context the request carries as traceparent. Only the method and the
 * host are recorded: a URL's path or query may hold a secret.
 */
async function tracedRequest(request: OutboundClient["request"], target: string | URL, init: OutboundRequest = {}): Promise<OutboundResponse> {
  const method = (init.method ?? "GET").toUpperCase();
  let host = "";
  try {
    host = new URL(String(target)).host;
  } catch {
    // request() refuses it.
  }
  const span = tracer().startSpan(`HTTP ${method}`, { kind: SpanKind.CLIENT, attributes: { "http.request.method": method, "server.address": host } });
  const active = trace.setSpan(context.active(), span);
  const headers: Record<string, string> = { ...init.headers };
  for (const name of Object.keys(headers)) if (name.toLowerCase() === "traceparent" || name.toLowerCase() === "tracestate") delete headers[name];
  propagation.inject(active, headers);
  try {
    const res = await context.with(active, () => request(target, { ...init, headers }));
    span.setAttribute("http.response.status_code", res.status);
    if (res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    return res;
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: failureClass(err) });
    throw err;
  } finally {
    span.end();
  }
}

/** The URL parser has already normalised IPv4 literals (0x7f.1 → 127.0.0.1); IPv6 ones come in brackets. */
function checkLiteral(url: URL, refused: (address: string) => string | undefined): void {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host) === 0) return;
  const why = refused(host);
  if (why !== undefined) throw new OutboundError("blocked_address", `${host} is a refused address (${why})`);
}

interface ExchangeOptions {
  agent: http.Agent;
  connectTimeoutMs: number;
  maxResponseBytes: number;
  signal: AbortSignal;
}

type Hop = Omit<OutboundResponse, "url" | "redirects">;

/** One request and its (capped) response. */
function exchange(url: URL, method: string, headers: Record<string, string>, body: string | Buffer | undefined, o: ExchangeOptions): Promise<Hop> {
  return new Promise<Hop>((resolve, reject) => {
    if (o.signal.aborted) {
      reject(o.signal.reason);
      return;
    }
    const send = url.protocol === "https:" ? https.request : http.request;
    const outgoing = { ...headers };
    if (body !== undefined) outgoing["content-length"] = String(Buffer.byteLength(body));
    const req = send(url, {
      method,
      headers: outgoing,
      agent: o.agent,
      signal: o.signal,
    });
    req.once("socket", (socket) => {
      // A reused keep-alive socket is already connected.
      if (!socket.connecting) return;
      const timer = setTimeout(
        () => req.destroy(new OutboundError("connect_timeout", `no connection to ${url.host} within ${o.connectTimeoutMs} ms`)),
        o.connectTimeoutMs,
      );
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
    req.once("error", reject);
    req.once("response", (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      const finish = () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks, kept), truncated });
      res.on("data", (chunk: Buffer) => {
        if (truncated) return;
        const room = o.maxResponseBytes - kept;
        if (chunk.length > room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          kept += Math.max(room, 0);
          truncated = true;
          // Discard the rest: the connection is not worth keeping for it.
          res.destroy();
          finish();
          return;
        }
        chunks.push(chunk);
        kept += chunk.length;
      });
      res.once("end", finish);
      res.once("error", (err) => (truncated ? undefined : reject(err)));
      res.once("aborted", () => (truncated ? undefined : reject(new OutboundError("network", "the response was cut off"))));
    });
    req.end(body);
  });
}

function asOutboundError(err: unknown, signal: AbortSignal): OutboundError {
  if (err instanceof OutboundError) return err;
  if (signal.aborted) {
    const reason: unknown = signal.reason;
    if (reason instanceof OutboundError) return reason;
    return new OutboundError("aborted", "the request was aborted", { cause: reason });
  }
  const e = err as NodeJS.ErrnoException;
  // The lookup's own errors arrive as they were raised; anything else is the network's.
  if (e?.cause instanceof OutboundError) return e.cause;
  // Node's own text names the address connected to ("connect ECONNREFUSED
  // 10.0.0.7:80"): it stays in `cause` for the logs, the message is the class.
  return new OutboundError("network", NETWORK_MESSAGES[networkClass(e?.code)], { cause: err });
}

/**
 * What went wrong with an outbound request, as users may see it
 * (docs/decisions.md#failure-classes): a fixed vocabulary that never carries
 * addresses or raw error text. The webhook delivery log shows it as `error`.
 */
export type FailureClass =
  | "timeout"
  | "connection_refused"
  | "connection_reset"
  | "dns_failure"
  | "private_address_refused"
  | "tls_error"
  | "too_many_redirects"
  | "invalid_url"
  | "response_too_large"
  | "network_error"
  | "aborted";

type NetworkClass = "connection_refused" | "connection_reset" | "tls_error" | "dns_failure" | "network_error";

const NETWORK_MESSAGES: Record<NetworkClass, string> = {
  connection_refused: "the connection was refused",
  connection_reset: "the connection was closed before a complete answer",
  tls_error: "the TLS handshake failed (certificate or protocol)",
  dns_failure: "the host name could not be resolved",
  network_error: "the request failed on the network",
};

function networkClass(code: string | undefined): NetworkClass {
  if (code === undefined) return "network_error";
  if (code === "ECONNREFUSED") return "connection_refused";
  if (code === "ECONNRESET" || code === "EPIPE" || code === "ECONNABORTED" || code === "HPE_INVALID_CONSTANT") return "connection_reset";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "dns_failure";
  if (/^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|ERR_OSSL|EPROTO$)/.test(code)) return "tls_error";
  return "network_error";
}

/** The failure class of anything request() threw. */
export function failureClass(err: unknown): FailureClass {
  if (!(err instanceof OutboundError)) return "network_error";
  switch (err.code) {
    case "timeout":
    case "connect_timeout":
      return "timeout";
    case "dns_failed":
      return "dns_failure";
    case "blocked_address":
      return "private_address_refused";
    case "too_many_redirects":
      return "too_many_redirects";
    case "invalid_url":
    case "invalid_request":
      return "invalid_url";
    case "response_too_large":
      return "response_too_large";
    case "aborted":
      return "aborted";
    case "network":
      return networkClass((err.cause as NodeJS.ErrnoException | undefined)?.code);
  }
}
