/**
 * A2A at /a2a/{channel_id} on the service's port (docs/decisions.md#a2a):
 * GET …/.well-known/agent-card.json serves a published channel's agent card
 * to anyone (its owner chose to publish it); POST speaks A2A's JSON-RPC
 * binding through the SDK's JsonRpcTransportHandler, with an API key. The
 * request is admitted (key, request budget) from its headers before its body
 * is read, as every RPC is; the body is held to a limit and charged to the
 * key's share of the body budget. A stream ends when the task is final or
 * the client leaves.
 */
import { AgentCard, A2A_VERSION_HEADER, Extensions, HTTP_EXTENSION_HEADER, SSE_HEADERS, formatSSEErrorEvent, formatSSEEvent } from "@a2a-js/sdk";
import { JsonRpcTransportHandler, defaultServerCallContextBuilder, validateVersion } from "@a2a-js/sdk/server";
import type { AuthenticatedCaller } from "../../model/caller.js";
import { ApiError } from "../../model/errors.js";
import { isUuid } from "../../model/ids.js";
import type { RequestLimiter } from "../../ports/rate-limit.js";
import type { A2aPush } from "../../domain/a2a-push.js";
import { traceFrom, traceHeaders } from "../../model/trace.js";
import { requestBaseUrl } from "../base-url.js";
import type { BodyBudget } from "../http/body-budget.js";
import { continueBody } from "../http/body-deadline.js";
import type { NodeRequest, NodeResponse } from "../http/node-http.js";
import { apiKeyOf, headersOf } from "../http/request-key.js";
import { AgentbusApi } from "../mcp/api.js";
import { MCP_SERVICES } from "../mcp/services.js";
import { readBody, refuse, sendJson } from "../rest/transcoder.js";
import { ChannelAgent } from "./agent.js";
import { A2A_PREFIX, AGENT_CARD_SUFFIX, agentCard, type PublishedChannel } from "./card.js";

export { A2A_PREFIX };

export interface A2aHttpOptions {
  /** Where this process's own API answers (its listener). */
  selfUrl: () => string;
  trustProxy?: boolean;
  /** Largest JSON-RPC body accepted. */
  maxBodyBytes: number;
  /** Authenticates a presented key and charges its request budget (401, 429 otherwise): the call pipeline's. */
  admit: (key: string, headers: Headers) => Promise<AuthenticatedCaller>;
  /** Headers the agent's calls to the REST API carry (the mark that their request was charged already). */
  internalCallHeaders?: Record<string, string>;
  budget: BodyBudget;
  /** The channel with this id when it is a claimable channel published as an agent. */
  published: (channelId: string) => Promise<PublishedChannel | undefined>;
  /** Card reads per client address (they need no key, and each reads the database). */
  cardLimiter: RequestLimiter;
  /** The callers' push-notification configs. */
  push: A2aPush;
}

/** Agent card reads one client address may make per minute: clients cache a card (Cache-Control), so a few suffice. */
export const AGENT_CARD_READS_PER_MINUTE = 120;

/** A stream quiet this long gets a comment line, so proxies do not close it as idle (as the REST streams do). */
const KEEP_ALIVE_MS = 15_000;

const header = (req: NodeRequest, name: string): string | undefined => {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(", ") : value;
};

const agentNotFound = (id: string) => new ApiError("agent_not_found", `No A2A agent at /a2a/${id}`);

// The HTTP/1 and HTTP/2 responses both take a string; their overloads do not unify.
const writeText = (res: NodeResponse, text: string) => (res as { write(chunk: string): boolean }).write(text);

export class A2aHttpEndpoint {
  constructor(private readonly options: A2aHttpOptions) {}

  /** Whether `path` is one of ours. */
  static owns(path: string): boolean {
    return path.startsWith(A2A_PREFIX);
  }

  async handle(req: NodeRequest, res: NodeResponse, requestId: string, path: string, clientAddress: string): Promise<void> {
    const rest = path.slice(A2A_PREFIX.length);
    const card = rest.endsWith(AGENT_CARD_SUFFIX);
    const id = card ? rest.slice(0, -AGENT_CARD_SUFFIX.length) : rest;
    if (!isUuid(id)) {
      refuse(req, res, agentNotFound(id.slice(0, 64)), requestId);
      return;
    }
    if (card) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        refuse(req, res, new ApiError("method_not_allowed", "The agent card is read with GET"), requestId, { Allow: "GET, HEAD" });
        return;
      }
      const allowed = await this.options.cardLimiter.hit(clientAddress);
      if (!allowed.allowed) {
        const retry = String(allowed.retryAfterSeconds);
        refuse(req, res, new ApiError("rate_limit_exceeded", "Too many agent card reads from this address", { details: { retry_after: allowed.retryAfterSeconds }, headers: { "Retry-After": retry } }), requestId);
        return;
      }
      const channel = await this.options.published(id);
      if (channel === undefined) {
        refuse(req, res, agentNotFound(id), requestId);
        return;
      }
      sendJson(res, 200, AgentCard.toJSON(agentCard(channel, requestBaseUrl(req, this.options.trustProxy ?? false))), { "Cache-Control": "public, max-age=60" });
      return;
    }
    if (req.method !== "POST") {
      refuse(req, res, new ApiError("method_not_allowed", "A2A's JSON-RPC binding is called with POST"), requestId, { Allow: "POST" });
      return;
    }
    await this.rpc(req, res, requestId, id);
  }

  private async rpc(req: NodeRequest, res: NodeResponse, requestId: string, id: string): Promise<void> {
    const key = apiKeyOf(req);
    if (key === undefined) {
      refuse(req, res, new ApiError("unauthorized", "A2A calls need an API key: X-API-Key: <key> or Authorization: Bearer <key>"), requestId);
      return;
    }
    let caller: AuthenticatedCaller;
    try {
      caller = await this.options.admit(key, headersOf(req));
    } catch (err) {
      refuse(req, res, err instanceof ApiError ? err : new ApiError("unauthorized"), requestId);
      return;
    }
    const channel = await this.options.published(id);
    if (channel === undefined) {
      refuse(req, res, agentNotFound(id), requestId);
      return;
    }
    const account = this.options.budget.open(caller.keyId);
    res.once("close", () => account.release());
    let body: string;
    try {
      continueBody(req, res);
      body = (await readBody(req, this.options.maxBodyBytes, account)).toString("utf8");
    } catch (err) {
      if (err instanceof ApiError) refuse(req, res, err, requestId);
      else res.destroy();
      return;
    }
    account.release();

    const left = new AbortController();
    res.once("close", () => left.abort());
    const publicUrl = requestBaseUrl(req, this.options.trustProxy ?? false);
    const card = agentCard(channel, publicUrl);
    const agent = new ChannelAgent({
      channelId: channel.id,
      card,
      // The A2A caller's trace context goes on with the message it sends (docs/decisions.md#trace-context).
      api: new AgentbusApi(MCP_SERVICES, this.options.selfUrl, key, {
        ...this.options.internalCallHeaders,
        ...traceHeaders(traceFrom(header(req, "traceparent"), header(req, "tracestate"))),
      }),
      caller,
      push: this.options.push,
      signal: left.signal,
    });
    const context = defaultServerCallContextBuilder({
      extensions: Extensions.parseServiceParameter(header(req, HTTP_EXTENSION_HEADER)),
      user: { isAuthenticated: true, userName: caller.keyId },
      headers: req.headers,
      requestedVersion: header(req, A2A_VERSION_HEADER),
    });
    try {
      validateVersion(context.requestedVersion, card, "JSONRPC");
    } catch (err) {
      sendJson(res, 200, { jsonrpc: "2.0", id: requestIdOf(body), error: JsonRpcTransportHandler.mapToJSONRPCError(err) });
      return;
    }
    const answer = await new JsonRpcTransportHandler(agent).handle(body, context);
    if (!(Symbol.asyncIterator in answer)) {
      sendJson(res, 200, answer);
      return;
    }
    // A stream: an error before its first event is an ordinary JSON-RPC answer.
    const iterator = answer[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await iterator.next();
    } catch (err) {
      sendJson(res, 200, { jsonrpc: "2.0", id: requestIdOf(body), error: JsonRpcTransportHandler.mapToJSONRPCError(err) });
      return;
    }
    res.writeHead(200, SSE_HEADERS);
    const keepAlive = setInterval(() => writeText(res, ": keep-alive\n\n"), KEEP_ALIVE_MS);
    try {
      for (let next = first; !next.done; next = await iterator.next()) writeText(res, formatSSEEvent(next.value));
    } catch (err) {
      if (!left.signal.aborted) writeText(res, formatSSEErrorEvent({ jsonrpc: "2.0", id: requestIdOf(body), error: JsonRpcTransportHandler.mapToJSONRPCError(err) }));
    } finally {
      clearInterval(keepAlive);
      await iterator.return?.(undefined);
    }
    res.end();
  }
}

/** The JSON-RPC id of a request body, for answers made outside the SDK's handler. */
function requestIdOf(body: string): string | number | null {
  try {
    const parsed: unknown = JSON.parse(body);
    const id = parsed !== null && typeof parsed === "object" ? (parsed as { id?: unknown }).id : undefined;
    return typeof id === "string" || typeof id === "number" ? id : null;
  } catch {
    return null;
  }
}
