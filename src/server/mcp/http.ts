/**
 * Streamable HTTP at /mcp on the service's port (MCP 2025-06-18): POST for
 * requests, GET for the server's own stream, DELETE to end a session. Every
 * request carries the API key (X-API-Key or Authorization: Bearer); a session
 * is bound to the key that opened it and acts with exactly its rights (the
 * tools call the REST API with it). As the specification asks, a request
 * whose Origin is not an allowed one is refused (DNS rebinding).
 *
 * Every request is admitted before anything else happens (issue 26, F1):
 * its key authenticated and its request budget charged, from the headers,
 * before the body is read or a session exists, so a string that is not a
 * key gets 401 and nothing else, and each key's requests count against its
 * own budget. Sessions are bounded per key (by key id) and per process, end
 * after an idle while, and end when their key is revoked (announced on the
 * wake bus, and re-checked every few seconds in case an announcement was
 * lost). A request whose client goes away cancels the tool calls it carried,
 * so a waiting receive_task leases nothing to nobody (F7).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, isJSONRPCRequest, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { AuthenticatedCaller } from "../../model/caller.js";
import { ApiError } from "../../model/errors.js";
import type { Clock, Timer } from "../../model/time.js";
import { requestBaseUrl } from "../base-url.js";
import type { BodyBudget } from "../http/body-budget.js";
import { continueBody } from "../http/body-deadline.js";
import type { NodeRequest, NodeResponse } from "../http/node-http.js";
import { apiKeyOf, headersOf } from "../http/request-key.js";
import { keyRefusal, type KeyChangeFeed, type KeyChecks } from "../rpc/caller-watch.js";
import { readBody, refuse, sendJson } from "../rest/transcoder.js";
import type { BodyAccount } from "../http/body-budget.js";
import { AgentbusApi } from "./api.js";
import { createMcpServer, type AgentbusMcp } from "./server.js";
import { MCP_SERVICES } from "./services.js";

export const MCP_PATH = "/mcp";

/** The body was charged to the key's share when the request was admitted (its declared length): reading it charges nothing more. */
const UNCHARGED: BodyAccount = { charge: () => undefined, release: () => undefined };

export interface McpHttpOptions {
  /** Where this process's own API answers (its listener). */
  selfUrl: () => string;
  corsOrigins: readonly string[];
  /** Whether X-Forwarded-Proto/Host say where clients reach the service (the links tools answer with). */
  trustProxy?: boolean;
  maxSessions?: number;
  maxSessionsPerKey?: number;
  /** A session unused this long is closed. */
  idleMs?: number;
  /** Largest JSON-RPC body accepted. */
  maxBodyBytes: number;
  /** Authenticates a presented key and charges its request budget (401, 429 otherwise): the call pipeline's. */
  admit: (key: string, headers: Headers) => Promise<AuthenticatedCaller>;
  /** Headers the tools' calls to the REST API carry (the mark that their MCP request was charged already). */
  internalCallHeaders?: Record<string, string>;
  /** Whether a session's key still stands (revoked: its sessions end). */
  keys: KeyChecks;
  /** Where key changes are announced, by topic; none: only the periodic re-check notices them. */
  keyChanges?: KeyChangeFeed;
  keyTopic?: (keyId: string) => string;
  /** How often open sessions' keys are re-checked without an announcement. */
  keyRecheckMs?: number;
  /** Request bodies held at once, per key and in all (shared with the RPCs). */
  budget: BodyBudget;
  clock: Clock;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  mcp: AgentbusMcp;
  keyId: string;
  lastSeen: number;
  /** Requests still open (a GET event stream waits for notifications): a session with one is not idle. */
  open: number;
}

/** The sessions of one key, and its subscription to the key's changes. */
interface KeySessions {
  ids: Set<string>;
  unsubscribe: () => void;
}

/** The SDK types its listener for HTTP/1; the @hono/node-server adapter under it reads HTTP/2 requests the same way. */
const asNodeRequest = (req: NodeRequest) => req as IncomingMessage;


export class McpHttpEndpoint {
  private readonly sessions = new Map<string, Session>();
  private readonly byKey = new Map<string, KeySessions>();
  private sweeper: Timer | undefined;
  private readonly maxSessions: number;
  private readonly maxSessionsPerKey: number;
  private readonly idleMs: number;
  private readonly recheckMs: number;
  /** The JSON-RPC requests of the HTTP request being handled (see handle()). */
  private readonly inRequest = new AsyncLocalStorage<Set<RequestId>>();
  private closed = false;

  constructor(private readonly options: McpHttpOptions) {
    this.maxSessions = options.maxSessions ?? 1000;
    this.maxSessionsPerKey = options.maxSessionsPerKey ?? 32;
    this.idleMs = options.idleMs ?? 30 * 60_000;
    this.recheckMs = options.keyRecheckMs ?? 5_000;
    this.sweep();
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  async handle(req: NodeRequest, res: NodeResponse, requestId: string): Promise<void> {
    const origin = req.headers.origin;
    if (typeof origin === "string" && !this.options.corsOrigins.includes("*") && !this.options.corsOrigins.includes(origin)) {
      refuse(req, res, new ApiError("origin_not_allowed", `Requests from ${origin} are not allowed`), requestId);
      return;
    }
    const key = apiKeyOf(req);
    if (key === undefined) {
      refuse(req, res, new ApiError("unauthorized", "/mcp needs an API key: X-API-Key: <key> or Authorization: Bearer <key>"), requestId);
      return;
    }
    let caller: AuthenticatedCaller;
    const account = this.options.budget;
    try {
      caller = await this.options.admit(key, headersOf(req));
    } catch (err) {
      refuse(req, res, err instanceof ApiError ? err : new ApiError("unauthorized"), requestId);
      return;
    }
    // The body the SDK will read, held to the limit and charged to the key's share up front.
    const declared = Number(req.headers["content-length"] ?? NaN);
    const charge = req.method === "POST" ? Math.min(Number.isFinite(declared) ? declared : this.options.maxBodyBytes, this.options.maxBodyBytes) : 0;
    const budget = account.open(caller.keyId);
    try {
      budget.charge(charge);
    } catch (err) {
      budget.release();
      refuse(req, res, err as ApiError, requestId);
      return;
    }
    res.once("close", () => budget.release());
    continueBody(req, res);

    const sessionId = req.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const session = this.sessions.get(sessionId);
      // Another key's session is as unknown as a closed one.
      if (session === undefined || session.keyId !== caller.keyId) {
        refuse(req, res, new ApiError("mcp_session_not_found"), requestId);
        return;
      }
      session.lastSeen = this.options.clock.monotonicMs();
      session.open++;
      res.once("close", () => {
        session.open--;
        session.lastSeen = this.options.clock.monotonicMs();
      });
      await this.serve(session.transport, req, res);
      return;
    }
    if (req.method !== "POST") {
      refuse(req, res, new ApiError("mcp_session_not_found", "Send Mcp-Session-Id: a session starts with a POST of initialize"), requestId);
      return;
    }
    // The body decides: an initialize starts a session; any other request is answered on its own, with no session
    // (stateless, as MCP's 2026 revision will have every request: docs/decisions.md#mcp).
    let parsed: unknown;
    try {
      parsed = JSON.parse((await readBody(req, this.options.maxBodyBytes, UNCHARGED)).toString("utf8"));
    } catch (err) {
      if (err instanceof ApiError) refuse(req, res, err, requestId);
      else if (err instanceof SyntaxError) sendJson(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error: the body is not JSON" } });
      else res.destroy();
      return;
    }
    const publicUrl = requestBaseUrl(req, this.options.trustProxy ?? false);
    if (!(Array.isArray(parsed) ? parsed.some((m) => isInitializeRequest(m)) : isInitializeRequest(parsed))) {
      await this.serveStateless(req, res, key, publicUrl, parsed);
      return;
    }
    const ofKey = this.byKey.get(caller.keyId)?.ids.size ?? 0;
    if (this.sessions.size >= this.maxSessions || ofKey >= this.maxSessionsPerKey) {
      const limit = ofKey >= this.maxSessionsPerKey ? `${this.maxSessionsPerKey} per key` : `${this.maxSessions} per process`;
      refuse(req, res, new ApiError("too_many_mcp_sessions", `Too many MCP sessions are open (${limit})`, { headers: { "Retry-After": "60" } }), requestId);
      return;
    }
    // Links in tool answers point where this client reached the service, not at the process's own listener.
    const mcp = createMcpServer(new AgentbusApi(MCP_SERVICES, this.options.selfUrl, key, this.options.internalCallHeaders), { publicUrl: () => publicUrl });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      maxRequestBodySize: this.options.maxBodyBytes,
      onsessioninitialized: (id) => this.remember(id, { transport, mcp, keyId: caller.keyId, lastSeen: this.options.clock.monotonicMs(), open: 0 }),
      onsessionclosed: (id) => this.forget(id),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) this.forget(transport.sessionId);
      mcp.stop();
    };
    await mcp.server.connect(transport);
    this.trackRequests(transport);
    await this.serve(transport, req, res, parsed);
    // Not an initialize: the transport refused it and no session began.
    if (transport.sessionId === undefined || !this.sessions.has(transport.sessionId)) await mcp.server.close();
  }

  /**
   * Runs one HTTP request through the session's transport. The JSON-RPC
   * requests it carries are noted (trackRequests) so that, should the client
   * go away before the answer is out, they are cancelled as if the client
   * had sent notifications/cancelled: their tool calls stop, and a waiting
   * receive leases nothing.
   */
  /**
   * One request without a session: a server and a stateless transport for it alone, closed with the answer.
   * Tools, resources reads and listings work; tasks and follows need a session (they outlive the request).
   */
  private async serveStateless(req: NodeRequest, res: NodeResponse, key: string, publicUrl: string, parsed: unknown): Promise<void> {
    const mcp = createMcpServer(new AgentbusApi(MCP_SERVICES, this.options.selfUrl, key, this.options.internalCallHeaders), { publicUrl: () => publicUrl, sessionless: true });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true, maxRequestBodySize: this.options.maxBodyBytes });
    res.once("close", () => {
      mcp.stop();
      void transport.close().catch(() => undefined);
      void mcp.server.close().catch(() => undefined);
    });
    await mcp.server.connect(transport);
    this.trackRequests(transport);
    await this.serve(transport, req, res, parsed);
  }

  private async serve(transport: StreamableHTTPServerTransport, req: NodeRequest, res: NodeResponse, parsedBody?: unknown): Promise<void> {
    const carried = new Set<RequestId>();
    res.once("close", () => {
      if (res.writableFinished) return;
      for (const id of carried) transport.onmessage?.({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "the client went away" } });
    });
    await this.inRequest.run(carried, () => transport.handleRequest(asNodeRequest(req), res as ServerResponse, parsedBody));
  }

  /** Notes each JSON-RPC request the transport hands on, in the HTTP request that carried it. */
  private trackRequests(transport: StreamableHTTPServerTransport): void {
    const deliver = transport.onmessage;
    transport.onmessage = (message: JSONRPCMessage, extra) => {
      if (isJSONRPCRequest(message)) this.inRequest.getStore()?.add(message.id);
      deliver?.(message, extra);
    };
  }

  private remember(id: string, session: Session): void {
    this.sessions.set(id, session);
    let ofKey = this.byKey.get(session.keyId);
    if (ofKey === undefined) {
      const keyId = session.keyId;
      const topic = this.options.keyTopic?.(keyId);
      const unsubscribe = topic === undefined ? undefined : this.options.keyChanges?.subscribe(topic, () => void this.recheck(keyId, true));
      ofKey = { ids: new Set(), unsubscribe: unsubscribe ?? (() => {}) };
      this.byKey.set(keyId, ofKey);
    }
    ofKey.ids.add(id);
  }

  private forget(id: string): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    this.sessions.delete(id);
    const ofKey = this.byKey.get(session.keyId);
    ofKey?.ids.delete(id);
    if (ofKey !== undefined && ofKey.ids.size === 0) {
      ofKey.unsubscribe();
      this.byKey.delete(session.keyId);
    }
    session.mcp.stop();
  }

  private end(id: string): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    this.forget(id);
    // Closing the transport ends its open event streams: the client sees the session gone.
    void session.transport.close().catch(() => undefined);
    void session.mcp.server.close().catch(() => undefined);
  }

  /** Ends every session of the key once it no longer stands (revoked). */
  private async recheck(keyId: string, fresh: boolean): Promise<void> {
    try {
      const refusal = await keyRefusal(this.options.keys, { keyId, agentLabel: "", ownerId: "" }, "any_key", fresh);
      if (refusal === undefined) return;
    } catch {
      // The database did not answer: the next re-check decides.
      return;
    }
    for (const id of [...(this.byKey.get(keyId)?.ids ?? [])]) this.end(id);
  }

  /** Every few seconds: idle sessions end, and every session key is re-checked (through the key cache). */
  private sweep(): void {
    if (this.closed) return;
    this.sweeper = this.options.clock.setTimer(
      Math.min(this.recheckMs, this.idleMs),
      () => {
        const before = this.options.clock.monotonicMs() - this.idleMs;
        for (const [id, session] of this.sessions) if (session.open === 0 && session.lastSeen < before) this.end(id);
        void Promise.all([...this.byKey.keys()].map((keyId) => this.recheck(keyId, false))).finally(() => this.sweep());
      },
      { unref: true },
    );
  }

  /** Ends every session (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    this.sweeper?.cancel();
    const all = [...this.sessions.values()];
    for (const id of [...this.sessions.keys()]) this.forget(id);
    await Promise.all(all.map(async (s) => (s.mcp.stop(), s.mcp.server.close())));
  }
}
