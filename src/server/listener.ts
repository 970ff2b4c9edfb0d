/**
 * One port for every protocol. gRPC needs HTTP/2 without TLS (h2c) while curl
 * and browsers speak HTTP/1.1, and Node's http2 server cannot serve plain
 * HTTP/1.1 on a cleartext socket. So a net.Server reads the first bytes of
 * each connection: the HTTP/2 client preface goes to an http2 server, anything
 * else to an http server. Both share one request handler.
 *
 * Node only tracks connections of servers that called listen() themselves, so
 * this module tracks the handed-over sockets and sessions to drain them on
 * shutdown.
 */
import http from "node:http";
import http2 from "node:http2";
import { randomUUID } from "node:crypto";
import net, { type AddressInfo, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { ApiError, type ErrorCode } from "../model/errors.js";
import { toRestError } from "./rpc/errors.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface ListenOptions {
  host: string;
  port: number;
  handler: RequestHandler;
  /** Idle HTTP/1.1 keep-alive connections are closed after this long. */
  keepAliveTimeoutMs?: number;
  /** A connection that sends nothing for this long is dropped (slow clients). */
  idleTimeoutMs?: number;
  /**
   * An HTTP/1.1 request must have sent all its headers within this long
   * (Node's default, 60 s), however slowly it trickles bytes in: the idle
   * timeout alone restarts with every byte.
   */
  headersTimeoutMs?: number;
  /** How often those deadlines are checked (Node's default, 30 s). */
  deadlineCheckIntervalMs?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 connection (default 100). */
  http2MaxStreams?: number;
}

export interface Listener {
  readonly address: AddressInfo;
  readonly url: string;
  /** Stops accepting, lets in-flight requests finish for up to graceMs, then cuts what is left. */
  close(graceMs: number): Promise<void>;
}

/** The two ways a first start commonly fails to listen, said with what to do; anything else as it is. */
function listenError(err: Error, options: ListenOptions): Error {
  const where = `${options.host}:${options.port}`;
  switch ((err as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return Object.assign(
        new Error(
          `Port ${options.port} on ${options.host} is already in use (another agentbus still running, or another program). ` +
            `Stop it, or start on another port: PORT=${options.port === 8080 ? 8081 : 8080} npm start (PORT=0 picks a free one).`,
          { cause: err },
        ),
        { code: "EADDRINUSE" },
      );
    case "EACCES":
      return Object.assign(new Error(`Not allowed to listen on ${where}: ports below 1024 need privileges; use PORT=8080.`, { cause: err }), { code: "EACCES" });
    case "EADDRNOTAVAIL":
      return Object.assign(new Error(`HOST=${options.host} is not an address of this machine; use 127.0.0.1, or 0.0.0.0 for every interface.`, { cause: err }), {
        code: "EADDRNOTAVAIL",
      });
    default:
      return err;
  }
}

export async function listen(options: ListenOptions): Promise<Listener> {
  const idleTimeoutMs = options.idleTimeoutMs ?? 120_000;
  const h1 = http.createServer(
    {
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000,
      headersTimeout: options.headersTimeoutMs ?? 60_000,
      connectionsCheckingInterval: options.deadlineCheckIntervalMs ?? 30_000,
    },
    options.handler,
  );
  // Applied per connection by the http server's own connection listener.
  h1.timeout = idleTimeoutMs;
  h1.on("clientError", answerClientError);
  // Node checks headersTimeout and requestTimeout from a timer it starts when
  // the server emits 'listening'. h1 never listens (the sniffing server hands
  // it sockets), so without this a client trickling header bytes would hold
  // its connection for ever (slowloris). h1.close() stops the timer.
  h1.emit("listening");
  // Node's defaults let one connection open 2^32-1 streams, each with its
  // own buffered request: one client held 1,000 streams and 158 MB. The
  // stream cap bounds that (the body deadline frees stalled ones); the
  // header list stays near the HTTP/1.1 limit (16 KiB) plus room for gRPC
  // metadata, and nghttp2's own buffers per session stay at 10 MB.
  const h2 = http2.createServer(
    {
      settings: { maxConcurrentStreams: options.http2MaxStreams ?? 100, maxHeaderListSize: 64 * 1024 },
      maxSessionMemory: 10,
    },
    options.handler,
  );

  const h1Sockets = new Map<Socket, { busy: number }>();
  const h2Sessions = new Set<http2.ServerHttp2Session>();
  let closing = false;

  // A request with Expect: 100-continue comes here instead of 'request', and
  // Node no longer says "100 Continue" by itself: the handler does once it
  // has admitted the request (continueBody), so a refused client is told
  // before it sends its body at all.
  h1.on("checkContinue", (req: http.IncomingMessage, res: http.ServerResponse) => {
    track(req, res);
    options.handler(req, res);
  });
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => track(req, res));
  const track = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const state = h1Sockets.get(req.socket);
    if (!state) return;
    state.busy++;
    res.on("close", () => {
      state.busy--;
      // Once draining, a connection is closed as soon as its last response is done.
      if (closing && state.busy === 0) req.socket.destroySoon();
    });
    if (closing) res.setHeader("Connection", "close");
  };

  h2.on("session", (session) => {
    h2Sessions.add(session);
    session.setTimeout(idleTimeoutMs, () => session.close());
    session.on("close", () => h2Sessions.delete(session));
    if (closing) session.close();
  });
  h2.on("sessionError", () => {});

  const server = net.createServer((socket) => {
    let head = Buffer.alloc(0);
    const onReadable = () => {
      let chunk: Buffer | null;
      while ((chunk = socket.read() as Buffer | null) !== null) head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, PREFACE.length);
      const looksH2 = n > 0 && head.subarray(0, n).equals(PREFACE.subarray(0, n));
      // Wait for more bytes while the preface may still arrive split across packets.
      if (head.length === 0 || (looksH2 && head.length < PREFACE.length)) return;
      socket.setTimeout(0);
      socket.removeListener("readable", onReadable);
      // read()+unshift() rather than pause/resume: http2 takes over the native
      // handle and a resumed JS stream would read the same bytes twice.
      socket.unshift(head);
      if (looksH2) {
        h2.emit("connection", socket);
      } else {
        h1Sockets.set(socket, { busy: 0 });
        socket.on("close", () => h1Sockets.delete(socket));
        // Handed over a tick later, once the stream has left the paused mode
        // the sniffing read it in (removing the last 'readable' listener
        // takes effect then). Handed over at once, the http server's 'data'
        // listener scheduled a resume that ran after the parser had paused
        // the socket for an unread body: reading restarted, and a request
        // body was read whole into memory however long the handler left it
        // unread (4 MB per connection with a 20 ms handler;
        // test/integration/keyless-upload-memory.test.ts).
        process.nextTick(() => {
          if (!socket.destroyed) h1.emit("connection", socket);
        });
      }
    };
    // As Node's own servers do for the sockets they accept (http's noDelay):
    // with Nagle's algorithm on, an answer written in pieces (an MCP event
    // stream, SSE, gRPC's trailers) waited for the client's delayed ACK, 40 ms
    // a time (an MCP tool call: 44 ms before, 8 ms after).
    socket.setNoDelay(true);
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("error", () => socket.destroy());
    socket.on("readable", onReadable);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(listenError(err, options)));
    // Node's default backlog (511) drops connection attempts when more agents
    // than that connect at once (a fleet of long-polls reconnecting after a
    // deploy): they then wait out SYN retries of 1 s and more. The kernel caps
    // it at net.core.somaxconn.
    server.listen({ port: options.port, host: options.host, backlog: 4096 }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostForUrl = address.family === "IPv6" ? `[${address.address}]` : address.address;

  return {
    address,
    url: `http://${hostForUrl}:${address.port}`,
    async close(graceMs: number) {
      if (closing) return;
      closing = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      h1.close();
      for (const [socket, state] of h1Sockets) if (state.busy === 0) socket.destroy();
      // GOAWAY: the client opens no new streams; open ones may finish.
      for (const session of h2Sessions) session.close();
      const drained = async () => {
        while (h1Sockets.size > 0 || h2Sessions.size > 0) await new Promise((r) => setTimeout(r, 20));
      };
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([drained(), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
      for (const socket of h1Sockets.keys()) socket.destroy();
      for (const session of h2Sessions) session.destroy();
      await stopped;
    },
  };
}

const CLIENT_ERRORS: Record<string, { status: number; reason: string; code: ErrorCode }> = {
  HPE_HEADER_OVERFLOW: { status: 431, reason: "Request Header Fields Too Large", code: "headers_too_large" },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, reason: "Request Timeout", code: "request_timeout" },
};

/**
 * A request Node's HTTP/1.1 parser rejects before our handler sees it
 * (headers over 16 KiB, malformed request line, timeout). Node's default
 * answer has no body; clients matching on the error code get the usual one.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // Gone, or a response is already on its way: nothing can be said any more.
  if (err.code === "ECONNRESET" || !socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const known = CLIENT_ERRORS[err.code ?? ""] ?? { status: 400, reason: "Bad Request", code: "bad_request" as const };
  const requestId = randomUUID();
  const body = Buffer.from(JSON.stringify(toRestError(new ApiError(known.code), requestId).body), "utf8");
  socket.write(
    `HTTP/1.1 ${known.status} ${known.reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nX-Request-Id: ${requestId}\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n`,
  );
  socket.end(body);
}
