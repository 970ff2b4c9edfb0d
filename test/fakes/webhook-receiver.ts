/**
 * A real HTTP server on 127.0.0.1 standing in for a webhook receiver: it
 * records every request, and can be told to fail the next N requests, to
 * answer slowly, or to be down (connections refused) and come back on the
 * same port.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body as received. */
  body: string;
  /** performance.now() when the body had arrived. */
  receivedAt: number;
  /** What the receiver answered. */
  status: number;
}

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private server: http.Server | undefined;
  private port = 0;
  private failures: number[] = [];
  private delayMs = 0;
  private defaultStatus = 200;
  private waiters: Array<() => void> = [];

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await receiver.up();
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** The next n requests are answered with `status` (default 500). */
  failNext(n: number, status = 500): void {
    for (let i = 0; i < n; i++) this.failures.push(status);
  }

  /** Every later request is answered with `status` until changed. */
  answer(status: number): void {
    this.defaultStatus = status;
  }

  /** Answers after ms (0: at once). */
  slow(ms: number): void {
    this.delayMs = ms;
  }

  /** Listens again (on the same port after down()). */
  async up(): Promise<void> {
    const server = http.createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and drops open connections: connections are refused until up(). */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  /** Resolves once `count` requests have been recorded. */
  async waitFor(count: number, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
    const deadline = performance.now() + timeoutMs;
    while (this.requests.length < count) {
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`receiver got ${this.requests.length} of ${count} requests within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        // Real time: a bound on requests arriving over real HTTP.
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.requests.slice(0, count);
  }

  close(): Promise<void> {
    return this.down();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = this.failures.shift() ?? this.defaultStatus;
      this.requests.push({
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        receivedAt: performance.now(),
        status,
      });
      for (const wake of this.waiters.splice(0)) wake();
      const respond = () => res.writeHead(status, { "Content-Type": "text/plain" }).end(status < 300 ? "ok" : "nope");
      // Real time: a slow receiver for the dispatcher's real socket timeout.
      if (this.delayMs > 0) setTimeout(respond, this.delayMs);
      else respond();
    });
  }
}

/** What a receiver does with X-Service-Signature: recompute and compare in constant time. */
export function verifySignature(secret: string, rawBody: string, header: string | string[] | undefined): boolean {
  if (typeof header !== "string" || !header.startsWith("sha256=")) return false;
  const expected = Buffer.from(createHmac("sha256", secret).update(rawBody, "utf8").digest("hex"));
  const given = Buffer.from(header.slice("sha256=".length));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * What a receiver does with the Standard Webhooks headers: refuse a
 * timestamp outside the tolerance (a replay), then recompute
 * `v1,base64(HMAC-SHA256(secret, "{id}.{timestamp}.{body}"))` and compare in
 * constant time. The key is the secret's UTF-8 bytes.
 */
export function verifyStandardSignature(
  secret: string,
  rawBody: string,
  headers: http.IncomingHttpHeaders,
  nowSeconds: number,
  toleranceSeconds = 300,
): "ok" | "stale" | "bad_signature" {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const signatures = headers["webhook-signature"];
  if (typeof id !== "string" || typeof timestamp !== "string" || typeof signatures !== "string") return "bad_signature";
  if (Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return "stale";
  const expected = Buffer.from(createHmac("sha256", secret).update(`${id}.${timestamp}.${rawBody}`, "utf8").digest("base64"));
  for (const candidate of signatures.split(" ")) {
    const [version, value] = candidate.split(",", 2);
    const given = Buffer.from(value ?? "");
    if (version === "v1" && given.length === expected.length && timingSafeEqual(given, expected)) return "ok";
  }
  return "bad_signature";
}
