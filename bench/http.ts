/**
 * HTTP/1.1 keep-alive clients for the benchmark. Client and server share the
 * machine's cores, so every microsecond the client spends per request is taken
 * from the service; `npx tsx bench/client-cost.ts` measures the CPU each
 * implementation costs per request, and BENCH_CLIENT picks one:
 *
 *   raw   — a minimal HTTP/1.1 client on net.Socket: one request at a time per
 *           connection (pipelining 1), Content-Length or chunked responses.
 *           The default: by far the least CPU per request (2-core machine,
 *           several runs: 23–31 µs for a small GET and 78–153 µs for a page
 *           of 50 messages, against 48–89 / 171–450 µs for node:http and
 *           211–390 / 435–816 µs for fetch).
 *   http  — node:http with a keep-alive Agent (maxSockets = connections).
 *   fetch — the undici bundled in Node as global fetch (keep-alive, pipelining
 *           1). The undici package itself (Pool, Agent) is not a dependency.
 *
 * All three return the status and the body as a string; the caller parses it.
 */
import http from "node:http";
import net from "node:net";

export interface HttpResponse {
  status: number;
  body: string;
}

export interface HttpClient {
  readonly name: string;
  request(method: string, path: string, body?: string, headers?: Record<string, string>): Promise<HttpResponse>;
  close(): Promise<void>;
}

export type ClientKind = "raw" | "http" | "fetch";

export function createClient(kind: ClientKind, baseUrl: string, connections: number): HttpClient {
  switch (kind) {
    case "raw":
      return new RawClient(baseUrl, connections);
    case "http":
      return new NodeHttpClient(baseUrl, connections);
    case "fetch":
      return new FetchClient(baseUrl);
  }
}

export function parseClientKind(value: string | undefined): ClientKind {
  const v = (value ?? "raw").trim() || "raw";
  if (v === "raw" || v === "http" || v === "fetch") return v;
  throw new Error(`BENCH_CLIENT must be raw, http or fetch (got ${JSON.stringify(value)})`);
}

class NodeHttpClient implements HttpClient {
  readonly name = "http";
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, connections: number) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port || 80);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections, scheduling: "lifo" });
  }

  request(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      const h: Record<string, string | number> = { ...headers };
      if (body !== undefined) {
        h["content-type"] = "application/json";
        h["content-length"] = Buffer.byteLength(body);
      }
      const req = http.request({ host: this.host, port: this.port, method, path, headers: h, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

class FetchClient implements HttpClient {
  readonly name = "fetch";
  constructor(private readonly baseUrl: string) {}

  async request(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpResponse> {
    const h: Record<string, string> = { ...headers };
    if (body !== undefined) h["content-type"] = "application/json";
    const res = await fetch(this.baseUrl + path, { method, headers: h, body });
    return { status: res.status, body: await res.text() };
  }

  async close(): Promise<void> {}
}

interface Pending {
  resolve(res: HttpResponse): void;
  reject(err: Error): void;
}

const CRLFCRLF = Buffer.from("\r\n\r\n");

/**
 * One keep-alive connection carrying one request at a time. Parses just what
 * a Node http server sends: a status line, headers, then a Content-Length or
 * chunked body. Any protocol surprise fails the request and drops the socket.
 */
class RawConnection {
  private socket: net.Socket | undefined;
  private connecting: Promise<net.Socket> | undefined;
  private buffer: Buffer = Buffer.alloc(0);
  private pending: Pending | undefined;
  // response state
  private status = 0;
  private bodyLength = -1; // -1: headers not parsed yet
  private chunked = false;
  private closeAfter = false;
  private chunks: Buffer[] = [];
  private lastUsed = 0;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly hostHeader: string,
  ) {}

  private connect(): Promise<net.Socket> {
    if (this.socket) return Promise.resolve(this.socket);
    this.connecting ??= new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect({ host: this.host, port: this.port, noDelay: true });
      socket.once("connect", () => {
        socket.off("error", reject);
        this.socket = socket;
        this.connecting = undefined;
        socket.on("data", (d: Buffer) => this.onData(d));
        // Only the current socket may fail the connection's request.
        socket.on("error", (err) => {
          if (this.socket === socket) this.fail(err);
        });
        socket.on("close", () => {
          if (this.socket === socket) this.fail(new Error("connection closed by the server"));
        });
        resolve(socket);
      });
      socket.once("error", (err) => {
        this.connecting = undefined;
        reject(err);
      });
    });
    return this.connecting;
  }

  async request(method: string, path: string, body: string | undefined, headers: Record<string, string>): Promise<HttpResponse> {
    // The service closes connections idle for 5 s (keepAliveTimeout); do not
    // race that close with a request: reconnect after 4 s of silence.
    if (this.socket && performance.now() - this.lastUsed > 4_000) this.close();
    const socket = await this.connect();
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\n`;
    for (const name in headers) head += `${name}: ${headers[name]}\r\n`;
    if (body !== undefined) {
      head += `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    } else {
      head += "\r\n";
    }
    return new Promise<HttpResponse>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.bodyLength = -1;
      socket.write(head);
    });
  }

  private fail(err: Error): void {
    const socket = this.socket;
    this.socket = undefined;
    this.buffer = Buffer.alloc(0);
    this.chunks = [];
    this.bodyLength = -1;
    socket?.destroy();
    const p = this.pending;
    this.pending = undefined;
    p?.reject(err);
  }

  private onData(data: Buffer): void {
    this.buffer = this.buffer.length === 0 ? data : Buffer.concat([this.buffer, data]);
    try {
      this.parse();
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private parse(): void {
    if (!this.pending) {
      if (this.buffer.length > 0) throw new Error("unexpected data from the server");
      return;
    }
    if (this.bodyLength === -1) {
      const end = this.buffer.indexOf(CRLFCRLF);
      if (end === -1) return;
      const head = this.buffer.toString("latin1", 0, end);
      this.buffer = this.buffer.subarray(end + 4);
      const lines = head.split("\r\n");
      const statusLine = lines[0] ?? "";
      this.status = Number(statusLine.slice(9, 12));
      if (!statusLine.startsWith("HTTP/1.1 ") || !(this.status >= 100)) throw new Error(`bad status line ${statusLine}`);
      this.chunked = false;
      this.closeAfter = false;
      let length = 0;
      for (let i = 1; i < lines.length; i++) {
        const line = lines[i] as string;
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === "content-length") length = Number(value);
        else if (name === "transfer-encoding") this.chunked = value.toLowerCase().includes("chunked");
        else if (name === "connection") this.closeAfter = value.toLowerCase() === "close";
      }
      this.bodyLength = this.chunked ? 0 : length;
      this.chunks = [];
    }
    if (this.chunked) {
      for (;;) {
        const lineEnd = this.buffer.indexOf("\r\n");
        if (lineEnd === -1) return;
        const size = parseInt(this.buffer.toString("latin1", 0, lineEnd), 16);
        if (Number.isNaN(size)) throw new Error("bad chunk size");
        if (size === 0) {
          // "0\r\n", optional trailer lines, then an empty line.
          const rest = lineEnd + 2;
          if (this.buffer.length < rest + 2) return;
          let end: number;
          if (this.buffer[rest] === 13 && this.buffer[rest + 1] === 10) end = rest + 2;
          else {
            const trailers = this.buffer.indexOf(CRLFCRLF, rest);
            if (trailers === -1) return;
            end = trailers + 4;
          }
          this.buffer = this.buffer.subarray(end);
          this.finish(Buffer.concat(this.chunks));
          return;
        }
        if (this.buffer.length < lineEnd + 2 + size + 2) return;
        this.chunks.push(this.buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
        this.buffer = this.buffer.subarray(lineEnd + 2 + size + 2);
      }
    }
    if (this.buffer.length < this.bodyLength) return;
    const body = this.buffer.subarray(0, this.bodyLength);
    this.buffer = this.buffer.subarray(this.bodyLength);
    this.finish(body);
  }

  private finish(body: Buffer): void {
    const p = this.pending;
    this.pending = undefined;
    this.bodyLength = -1;
    const status = this.status;
    if (this.closeAfter) {
      const socket = this.socket;
      this.socket = undefined;
      socket?.destroy();
    }
    this.lastUsed = performance.now();
    p?.resolve({ status, body: body.toString("utf8") });
  }

  close(): void {
    const socket = this.socket;
    this.socket = undefined;
    socket?.destroy();
  }
}

/** A pool of RawConnections; a request takes an idle one or waits for one. */
class RawClient implements HttpClient {
  readonly name = "raw";
  private readonly idle: RawConnection[] = [];
  private readonly all: RawConnection[] = [];
  private readonly waiting: Array<(c: RawConnection) => void> = [];

  constructor(baseUrl: string, private readonly connections: number) {
    const url = new URL(baseUrl);
    this.hostHeader = url.host;
    this.host = url.hostname;
    this.port = Number(url.port || 80);
  }

  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;

  private acquire(): Promise<RawConnection> | RawConnection {
    const c = this.idle.pop();
    if (c) return c;
    if (this.all.length < this.connections) {
      const fresh = new RawConnection(this.host, this.port, this.hostHeader);
      this.all.push(fresh);
      return fresh;
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(c: RawConnection): void {
    const next = this.waiting.shift();
    if (next) next(c);
    else this.idle.push(c);
  }

  async request(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpResponse> {
    const c = await this.acquire();
    try {
      return await c.request(method, path, body, headers);
    } finally {
      this.release(c);
    }
  }

  async close(): Promise<void> {
    for (const c of this.all) c.close();
  }
}
