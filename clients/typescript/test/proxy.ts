/** A TCP proxy in front of the test server whose connections a test can cut, to simulate a dropped network. */
import net from "node:net";

export interface CuttableProxy {
  url: string;
  /** Destroys every open connection; with `refuse`, also drops new ones until reopen(). */
  cut(options?: { refuse?: boolean }): void;
  reopen(): void;
  /** Connections accepted and passed through so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startCuttableProxy(target: string): Promise<CuttableProxy> {
  const { hostname, port } = new URL(target);
  const open = new Set<net.Socket>();
  let refusing = false;
  let connections = 0;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    connections++;
    const upstream = net.connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        open.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    cut(options = {}) {
      refusing = options.refuse ?? false;
      for (const socket of open) socket.destroy();
    },
    reopen() {
      refusing = false;
    },
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
