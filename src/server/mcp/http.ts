/**
 * Streamable HTTP at /mcp on the service's port (MCP 2025-06-18): POST for
 * requests, GET for the server's own stream, DELETE to end a session. Every
 * request carries the API key (X-API-Key or Authorization: Bearer); a session
 * is bound to the key that opened it and acts with exactly its rights (the
 * tools call the REST API with it). As the specification asks, a request
 * whose Origin is not an allowed one is refused (DNS rebinding). Sessions are
 * bounded per process and per key, and end after an idle while.
 */
import { createHash, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ApiError } from "../../model/errors.js";
import { sendError, type NodeRequest, type NodeResponse } from "../rest/transcoder.js";
import { AgentbusApi } from "./api.js";
import { createMcpServer, type AgentbusMcp } from "./server.js";
import { MCP_SERVICES } from "./services.js";

export const MCP_PATH = "/mcp";

export interface McpHttpOptions {
  /** Where this process's own API answers (its listener). */
  selfUrl: () => string;
  corsOrigins: readonly string[];
  maxSessions?: number;
  maxSessionsPerKey?: number;
  /** A session unused this long is closed. */
  idleMs?: number;
  /** Largest JSON-RPC body accepted. */
  maxBodyBytes: number;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  mcp: AgentbusMcp;
  keyHash: string;
  lastSeen: number;
  /** Requests still open (a GET event stream waits for notifications): a session with one is not idle. */
  open: number;
}

/** The SDK types its listener for HTTP/1; the @hono/node-server adapter under it reads HTTP/2 requests the same way. */
const asNodeRequest = (req: NodeRequest) => req as IncomingMessage;

const hashKey = (key: string) => createHash("sha256").update(key).digest("hex");

function apiKeyOf(req: NodeRequest): string | undefined {
  const header = req.headers["x-api-key"];
  if (typeof header === "string" && header.trim() !== "") return header.trim();
  const auth = req.headers.authorization;
  const bearer = typeof auth === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return bearer?.[1];
}

export class McpHttpEndpoint {
  private readonly sessions = new Map<string, Session>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly maxSessions: number;
  private readonly maxSessionsPerKey: number;
  private readonly idleMs: number;

  constructor(private readonly options: McpHttpOptions) {
    this.maxSessions = options.maxSessions ?? 1000;
    this.maxSessionsPerKey = options.maxSessionsPerKey ?? 32;
    this.idleMs = options.idleMs ?? 30 * 60_000;
    this.sweeper = setInterval(() => this.closeIdle(), Math.min(60_000, this.idleMs)).unref();
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  async handle(req: NodeRequest, res: NodeResponse, requestId: string): Promise<void> {
    const origin = req.headers.origin;
    if (typeof origin === "string" && !this.options.corsOrigins.includes("*") && !this.options.corsOrigins.includes(origin)) {
      sendError(res, new ApiError("origin_not_allowed", `Requests from ${origin} are not allowed`), requestId);
      return;
    }
    const key = apiKeyOf(req);
    if (key === undefined) {
      sendError(res, new ApiError("unauthorized", "/mcp needs an API key: X-API-Key: <key> or Authorization: Bearer <key>"), requestId);
      return;
    }
    const keyHash = hashKey(key);
    const sessionId = req.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const session = this.sessions.get(sessionId);
      // Another key's session is as unknown as a closed one.
      if (session === undefined || session.keyHash !== keyHash) {
        sendError(res, new ApiError("mcp_session_not_found"), requestId);
        return;
      }
      session.lastSeen = Date.now();
      session.open++;
      res.once("close", () => {
        session.open--;
        session.lastSeen = Date.now();
      });
      await session.transport.handleRequest(asNodeRequest(req), res as ServerResponse);
      return;
    }
    if (req.method !== "POST") {
      sendError(res, new ApiError("mcp_session_not_found", "Send Mcp-Session-Id: a session starts with a POST of initialize"), requestId);
      return;
    }
    let ofKey = 0;
    for (const s of this.sessions.values()) if (s.keyHash === keyHash) ofKey++;
    if (this.sessions.size >= this.maxSessions || ofKey >= this.maxSessionsPerKey) {
      const limit = ofKey >= this.maxSessionsPerKey ? `${this.maxSessionsPerKey} per key` : `${this.maxSessions} per process`;
      sendError(res, new ApiError("too_many_mcp_sessions", `Too many MCP sessions are open (${limit})`, { headers: { "Retry-After": "60" } }), requestId);
      return;
    }
    const mcp = createMcpServer(new AgentbusApi(MCP_SERVICES, this.options.selfUrl, key));
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      maxRequestBodySize: this.options.maxBodyBytes,
      onsessioninitialized: (id) => {
        this.sessions.set(id, { transport, mcp, keyHash, lastSeen: Date.now(), open: 0 });
      },
      onsessionclosed: (id) => this.forget(id),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) this.forget(transport.sessionId);
      mcp.stop();
    };
    await mcp.server.connect(transport);
    await transport.handleRequest(asNodeRequest(req), res as ServerResponse);
    // Not an initialize: the transport refused it and no session began.
    if (transport.sessionId === undefined || !this.sessions.has(transport.sessionId)) await mcp.server.close();
  }

  private forget(id: string): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    this.sessions.delete(id);
    session.mcp.stop();
  }

  private closeIdle(): void {
    const before = Date.now() - this.idleMs;
    for (const [id, session] of this.sessions) {
      if (session.open === 0 && session.lastSeen < before) {
        this.forget(id);
        void session.mcp.server.close();
      }
    }
  }

  /** Ends every session (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map(async (s) => (s.mcp.stop(), s.mcp.server.close())));
  }
}
