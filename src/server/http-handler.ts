/**
 * The request handler behind the one port: request ids, security and CORS
 * headers, logs and metrics for every request; then the operational routes,
 * the REST transcoder, and Connect (gRPC, gRPC-Web, Connect) in that order.
 */
import { cors as connectCors } from "@connectrpc/connect";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { randomUUID, timingSafeEqual } from "node:crypto";
import type pg from "pg";
import { ApiError } from "../model/errors.js";
import type { Clock } from "../model/time.js";
import type { Logger } from "../platform/logger.js";
import { SERVICE_VERSION } from "../platform/version.js";
import { bodyReceived, continueBody, releaseAfterResponse, watchBodyDeadline } from "./http/body-deadline.js";
import type { BodyBudget } from "./http/body-budget.js";
import { LogLimiter } from "../platform/log-limiter.js";
import { admitBeforeBody } from "./rpc/connect-admission.js";
import { renderErrorDocs } from "./error-docs.js";
import { PerBaseCache, requestBaseUrl } from "./base-url.js";
import { buildOpenApiDocument, type OpenApiDocument } from "./docs/openapi.js";
import { landing, LANDING_CSP, renderLandingHtml, wantsHtml } from "./docs/landing.js";
import { CONSOLE_CSP, loadConsoleAssets, type ConsoleAsset, type ConsoleAssets } from "./console.js";
import { renderLlmsTxt } from "./docs/llms.js";
import { checkHealth, sharedHealth, type ComponentReport, type HealthOptions } from "./health.js";
import type { Metrics } from "./metrics.js";
import { baseUrlKey, clientAddressKey, requestIdKey } from "../protocol/context.js";
import { normaliseDecoderErrors } from "./rpc/decoder-errors.js";
import { inspectRawRequests } from "./rpc/raw-request.js";
import type { CallPipeline } from "./rpc/pipeline.js";
import { RestRoutes } from "./rest/routes.js";
import { registerReflection } from "./reflection.js";
import { MCP_PATH, type McpHttpEndpoint } from "./mcp/http.js";
import { A2aHttpEndpoint } from "./a2a/http.js";
import { renderStatusHtml, sharedStatus, withOperatorDetails, type StatusSources } from "./status.js";
import { RestTranscoder, sendError, sendJson, type NodeRequest, type NodeResponse } from "./rest/transcoder.js";

export interface HttpHandlerOptions {
  pipeline: CallPipeline;
  pool: pg.Pool;
  metrics: Metrics;
  logger: Logger;
  corsOrigins: readonly string[];
  maxBodyBytes: number;
  /** What a request without a valid key may send (docs/operations.md#body-limits). */
  keylessMaxBodyBytes: number;
  /** Request bodies held at once, per key and in all; shared with /mcp. */
  budget: BodyBudget;
  /** The whole request body must have arrived within this long (408 request_timeout otherwise). */
  bodyTimeoutMs: number;
  trustProxy: boolean;
  /** The sandbox channel exists: the guide and the landing page point a newcomer at it. */
  sandbox?: boolean;
  shutdownSignal: AbortSignal;
  /** Times the keep-alive comments of event streams. */
  clock: Clock;
  /** What /health says about the database and the other components. */
  health?: Pick<HealthOptions, "database" | "components" | "publicMinting">;
  /** The MCP endpoint at /mcp (Streamable HTTP). */
  mcp?: McpHttpEndpoint;
  /** A2A at /a2a/{channel_id}: published channels' agent cards and JSON-RPC. */
  a2a?: A2aHttpEndpoint;
  /** What GET /status and /status.html report; without it they are not served. */
  status?: StatusSources & { operatorDetails?: () => Promise<Record<string, ComponentReport>> };
  /** The operator's token: /status with it names each component's hosts, paths and versions. */
  adminToken?: string;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** A year, as browsers' preload lists expect; no includeSubDomains: the service cannot speak for its operator's other hosts. */
const HSTS = "max-age=31536000";

/** The first X-Forwarded-Proto value (a proxy chain may list several) says https. */
function forwardedHttps(header: string | string[] | undefined): boolean {
  const value = Array.isArray(header) ? header[0] : header;
  return value?.split(",")[0]?.trim().toLowerCase() === "https";
}
const DOCS_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'";

const ALLOWED_HEADERS = [
  ...connectCors.allowedHeaders,
  "X-API-Key",
  "X-Admin-Token",
  "Idempotency-Key",
  "X-Request-Id",
  "Last-Event-ID",
  "Authorization",
  "Mcp-Session-Id",
  "Mcp-Protocol-Version",
  "If-Match",
].join(", ");
const EXPOSED_HEADERS = [
  ...connectCors.exposedHeaders,
  "X-Request-Id",
  "Retry-After",
  "X-Idempotent-Replay",
  "Idempotency-Key",
  "Mcp-Session-Id",
  "RateLimit-Limit",
  "RateLimit-Remaining",
  "RateLimit-Reset",
  "ETag",
].join(", ");
const ALLOWED_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"].join(", ");

interface ServedDocument {
  type: string;
  /** The document for a request that came to `base` (see base-url.ts). */
  body: (base: string) => Buffer;
}

// Documents are kept per base URL; a handful cover every name a deployment is
// reached by, and the bound keeps a client cycling Host headers from growing it.
const BASES_PER_DOCUMENT = 16;

function servedPerBase(type: string, render: (base: string) => string): ServedDocument {
  const cache = new PerBaseCache<Buffer>(BASES_PER_DOCUMENT);
  return { type, body: (base) => cache.get(base, () => Buffer.from(render(base), "utf8")) };
}

export function createHttpHandler(options: HttpHandlerOptions) {
  const { pipeline, metrics, logger } = options;
  const services = pipeline.services.map((s) => s.service);
  const guideOptions = { sandbox: options.sandbox ?? false };
  const routes = new RestRoutes(services);
  // Built on the first request (~45 ms for the OpenAPI document), then kept:
  // the descriptors do not change while the process runs, and most processes
  // are never asked. Only the base URL differs between requests.
  let openApi: OpenApiDocument | undefined;
  const apiDocs = new Map<string, ServedDocument>([
    [
      "/openapi.json",
      servedPerBase("application/json; charset=utf-8", (base) =>
        JSON.stringify({ ...(openApi ??= buildOpenApiDocument(services)), servers: [{ url: base }] }),
      ),
    ],
    ["/llms.txt", servedPerBase("text/plain; charset=utf-8", (base) => renderLlmsTxt(services, base, guideOptions))],
    // The reference's address for the same guide.
    ["/agent-guide", servedPerBase("text/markdown; charset=utf-8", (base) => renderLlmsTxt(services, base, guideOptions))],
  ]);
  // What anyone can cause at will and is no fault of ours: a debug line, summed up (F16).
  const quiet = new LogLimiter(logger, { intervalMs: 30_000, clock: options.clock });
  const clientGone = (route: string) => quiet.debug("a client went away before its request was read", { route });
  const limits = { defaultMaxBodyBytes: options.maxBodyBytes, keylessMaxBodyBytes: options.keylessMaxBodyBytes };
  const transcoder = new RestTranscoder({
    pipeline,
    ...limits,
    budget: options.budget,
    onClientGone: () => clientGone("rest"),
    shutdownSignal: options.shutdownSignal,
    clock: options.clock,
  });
  const currentStatus = options.status === undefined ? undefined : sharedStatus(options.status);
  const consoleAssets: ConsoleAssets | undefined = loadConsoleAssets();
  const currentHealth = sharedHealth(() => checkHealth(options.pool, options.health));
  const procedures = new Set<string>();
  for (const service of services) for (const m of service.methods) procedures.add(`/${service.typeName}/${m.name}`);

  const connect = connectNodeAdapter({
    routes: (router) => {
      pipeline.registerConnect(router);
      // What protobuf-es would drop unseen ("__proto__" keys) is looked for in the body as sent (raw-request.ts).
      inspectRawRequests(router.handlers, options.maxBodyBytes);
      // Requests Connect cannot decode never reach the pipeline: their answers get the catalog's shape here.
      normaliseDecoderErrors(router.handlers, pipeline.options.reportInternal);
      // Judged from the headers before Connect reads a body (connect-admission.ts); wrapped last, so it runs first.
      admitBeforeBody(router.handlers, { pipeline, budget: options.budget, ...limits });
      // gRPC server reflection: public, outside the pipeline (see reflection.ts).
      for (const path of registerReflection(router, services)) procedures.add(path);
    },
    // Unknown fields and enum names are errors, not silently dropped data.
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: options.maxBodyBytes,
    shutdownSignal: options.shutdownSignal,
    contextValues: (req) =>
      createContextValues()
        .set(requestIdKey, String(req.headers["x-request-id"] ?? ""))
        .set(clientAddressKey, clientAddress(req, options.trustProxy))
        .set(baseUrlKey, requestBaseUrl(req, options.trustProxy)),
  });

  const allowOrigin = (origin: string | undefined): string | undefined => {
    if (options.corsOrigins.includes("*")) return "*";
    return origin !== undefined && options.corsOrigins.includes(origin) ? origin : undefined;
  };

  return (req: NodeRequest, res: NodeResponse): void => {
    const started = performance.now();
    const incomingId = req.headers["x-request-id"];
    const requestId = typeof incomingId === "string" && REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    // Connect handlers read the id from the request headers.
    req.headers["x-request-id"] = requestId;
    const url = new URL(req.url ?? "/", "http://agentbus.invalid");
    let route = "unmatched";
    let protocol = "http";

    res.setHeader("X-Request-Id", requestId);
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("Referrer-Policy", "no-referrer");
    res.setHeader("Content-Security-Policy", API_CSP);
    // Only a proxy we trust can tell us the client came over HTTPS; over plain HTTP the header means nothing (RFC 6797 §8.1).
    if (options.trustProxy && forwardedHttps(req.headers["x-forwarded-proto"])) res.setHeader("Strict-Transport-Security", HSTS);
    const origin = allowOrigin(typeof req.headers.origin === "string" ? req.headers.origin : undefined);
    if (origin) {
      res.setHeader("Access-Control-Allow-Origin", origin);
      res.setHeader("Access-Control-Expose-Headers", EXPOSED_HEADERS);
      if (origin !== "*") res.setHeader("Vary", "Origin");
    }

    res.once("close", () => {
      const seconds = (performance.now() - started) / 1000;
      const status = res.statusCode;
      metrics.observeRequest(route, req.method ?? "", protocol, status, seconds);
      logger.info(
        { request_id: requestId, method: req.method, route, protocol, status, duration_ms: Math.round(seconds * 100000) / 100 },
        "request",
      );
    });

    // Set once the body deadline answered 408: the handler still reading
    // the body then fails on the closed stream, which is no error of ours.
    let timedOut = false;
    watchBodyDeadline(req, res, options.bodyTimeoutMs, () => {
      timedOut = true;
      const seconds = options.bodyTimeoutMs / 1000;
      const err = new ApiError("request_timeout", `The request body did not arrive completely within ${seconds} s`);
      sendError(res, err, requestId, req.httpVersionMajor === 1 ? { Connection: "close" } : {});
      releaseAfterResponse(req, res);
    });

    const fail = (err: unknown) => {
      if (timedOut) return;
      if (req.destroyed && isClientAbort(err)) {
        clientGone(route);
        return;
      }
      logger.error({ request_id: requestId, route, err }, "unhandled error while serving a request");
      if (!res.headersSent) sendError(res, new ApiError("internal_error"), requestId);
      else res.destroy();
    };

    try {
      if (req.method === "OPTIONS") {
        route = "preflight";
        res.writeHead(204, {
          "Access-Control-Allow-Methods": ALLOWED_METHODS,
          "Access-Control-Allow-Headers": ALLOWED_HEADERS,
          "Access-Control-Max-Age": "7200",
        });
        res.end();
        return;
      }

      const path = url.pathname;
      if (req.method === "GET" || req.method === "HEAD") {
        if (path === "/health") {
          route = "/health";
          currentHealth().then((report) => sendJson(res, report.status === "ok" ? 200 : 503, report), fail);
          return;
        }
        if (path === "/metrics") {
          route = "/metrics";
          metrics.render().then(({ contentType, body }) => {
            res.writeHead(200, { "Content-Type": contentType });
            res.end(body);
          }, fail);
          return;
        }
        const doc = apiDocs.get(path);
        if (doc !== undefined) {
          route = path;
          const body = doc.body(requestBaseUrl(req, options.trustProxy));
          res.writeHead(200, { "Content-Type": doc.type, "Content-Length": body.length });
          res.end(body);
          return;
        }
        const consoleFile = consoleAssets?.files.get(path);
        if (consoleFile !== undefined) {
          route = "/console";
          sendConsoleAsset(req, res, consoleFile);
          return;
        }
        if (path === "/") {
          route = "/";
          const page = landing(requestBaseUrl(req, options.trustProxy), SERVICE_VERSION, guideOptions.sandbox);
          res.setHeader("Vary", res.hasHeader("Vary") ? `${String(res.getHeader("Vary"))}, Accept` : "Accept");
          if (wantsHtml(req.headers.accept) && consoleAssets !== undefined) {
            res.setHeader("Content-Security-Policy", CONSOLE_CSP);
            sendConsoleAsset(req, res, consoleAssets.page);
          } else if (wantsHtml(req.headers.accept)) {
            res.setHeader("Content-Security-Policy", LANDING_CSP);
            res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
            res.end(renderLandingHtml(page));
          } else {
            sendJson(res, 200, page);
          }
          return;
        }
        if ((path === "/status" || path === "/status.html") && currentStatus !== undefined) {
          route = path;
          const html = path === "/status.html";
          currentStatus().then(async (report) => {
            if (!html) {
              // The operator (admin token) also reads each component's full text.
              const operator = options.status?.operatorDetails !== undefined && isAdminToken(req.headers["x-admin-token"], options.adminToken);
              sendJson(res, 200, operator ? await withOperatorDetails(report, options.status!.operatorDetails!) : report);
              return;
            }
            res.setHeader("Content-Security-Policy", DOCS_CSP);
            res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
            res.end(renderStatusHtml(report));
          }, fail);
          return;
        }
        if (path === "/docs/errors") {
          route = "/docs/errors";
          res.setHeader("Content-Security-Policy", DOCS_CSP);
          res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
          res.end(renderErrorDocs());
          return;
        }
      }

      if (path === MCP_PATH && options.mcp !== undefined) {
        route = MCP_PATH;
        protocol = "mcp";
        options.mcp.handle(req, res, requestId).catch(fail);
        return;
      }

      if (options.a2a !== undefined && A2aHttpEndpoint.owns(path)) {
        route = "/a2a/{channel_id}";
        protocol = "a2a";
        options.a2a.handle(req, res, requestId, path, clientAddress(req, options.trustProxy)).catch(fail);
        return;
      }

      const match = routes.match(req.method ?? "GET", path);
      if (match.kind === "route") {
        route = match.route.template.template;
        protocol = "rest";
        transcoder
          .handle(req, res, match.route, match.pathParams, {
            requestId,
            clientAddress: clientAddress(req, options.trustProxy),
            baseUrl: requestBaseUrl(req, options.trustProxy),
            url,
          })
          .catch(fail);
        return;
      }
      if (match.kind === "wrong_method") {
        route = "method_not_allowed";
        sendError(res, new ApiError("method_not_allowed", `${req.method} is not allowed here; use ${match.allowed.join(" or ")}`), requestId, {
          Allow: match.allowed.join(", "),
        });
        return;
      }
      if (procedures.has(path)) {
        route = path;
        protocol = rpcProtocol(req);
        // A call answered before its whole body arrived (refused from its
        // headers, or over a limit) has the rest cut off, as REST's are.
        cutOffUnreadBody(req, res);
        // Connect reads the body as soon as it runs (its admission sits inside), as Node would have let it.
        continueBody(req, res);
        connect(req, res);
        return;
      }
      sendError(res, new ApiError("not_found", `No route for ${req.method} ${path}`), requestId);
    } catch (err) {
      fail(err);
    }
  };
}

/** A console file, revalidated on every load (ETag) so a new build shows at once. */
function sendConsoleAsset(req: NodeRequest, res: NodeResponse, file: ConsoleAsset): void {
  if (req.headers["if-none-match"] === file.etag) {
    res.writeHead(304, { ETag: file.etag, "Cache-Control": "no-cache" });
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": file.type, "Content-Length": file.body.length, ETag: file.etag, "Cache-Control": "no-cache" });
  // Node drops the body of a HEAD response by itself.
  res.end(file.body);
}

/** Once the answer is complete, frees an unread body: Connection: close on HTTP/1.1, RST_STREAM on HTTP/2. */
function cutOffUnreadBody(req: NodeRequest, res: NodeResponse): void {
  const end = res.end.bind(res) as (...args: unknown[]) => unknown;
  (res as { end: (...args: unknown[]) => unknown }).end = (...args: unknown[]) => {
    const unread = !bodyReceived(req);
    if (unread && req.httpVersionMajor === 1 && !res.headersSent) res.setHeader("Connection", "close");
    const result = end(...args);
    // gRPC (not gRPC-Web) answers end with trailers carrying the status.
    if (unread) releaseAfterResponse(req, res, { trailers: /^application\/grpc(?!-web)/i.test(String(req.headers["content-type"] ?? "")) });
    return result;
  };
}

/** How Node reports a client that went away mid-request (reset, aborted, closed early). */
function isClientAbort(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === "ECONNRESET" || code === "ERR_STREAM_PREMATURE_CLOSE" || code === "ECONNABORTED" || message === "aborted";
}

/** Whether a request carries the operator's token (compared in constant time). */
function isAdminToken(presented: string | string[] | undefined, expected: string | undefined): boolean {
  if (expected === undefined || typeof presented !== "string") return false;
  const a = Buffer.from(presented), b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function rpcProtocol(req: NodeRequest): string {
  const type = String(req.headers["content-type"] ?? "");
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

function clientAddress(req: NodeRequest, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = req.headers["x-forwarded-for"];
    const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(",")[0]?.trim();
    if (first) return first;
  }
  return req.socket.remoteAddress ?? "unknown";
}
