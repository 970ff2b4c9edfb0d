/** The HTTP plumbing the fakes share: a server on a free loopback port, and the request body. */
import http from "node:http";
import type { AddressInfo } from "node:net";

export class LoopbackServer {
  private constructor(private readonly server: http.Server) {}

  static async listen(handler: http.RequestListener): Promise<LoopbackServer> {
    const server = http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return new LoopbackServer(server);
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Drops open keep-alive connections too, so closing does not wait for clients to hang up. */
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Calls `then` with the whole body once the request has arrived. */
export function onBody(req: http.IncomingMessage, then: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => then(Buffer.concat(chunks)));
}
