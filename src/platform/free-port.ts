/**
 * A TCP port on 127.0.0.1 that nothing listens on right now: for a child
 * server (embedded PostgreSQL, Redis, a benchmarked service) that must be
 * told its port up front. Between closing the probe and the child binding
 * the port, another process could take it; only our own processes race here.
 */
import net from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0 }, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
