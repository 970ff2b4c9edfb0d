/** A start that cannot listen says why and what to do, not just the errno. */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../../src/server/listener.js";

const handler = () => {};
let taken: net.Server;
let port: number;
beforeAll(async () => {
  taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  port = (taken.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
});

describe("listen errors", () => {
  it("names a port in use and how to pick another (PORT=…)", async () => {
    const started = listen({ host: "127.0.0.1", port, handler });
    await expect(started).rejects.toThrow(`Port ${port} on 127.0.0.1 is already in use`);
    await expect(started).rejects.toThrow(/PORT=8080 npm start/);
    await expect(started).rejects.toMatchObject({ code: "EADDRINUSE" });
  });

  it("names a HOST that is not an address of this machine", async () => {
    // 192.0.2.0/24 is TEST-NET-1: never assigned to a real interface.
    await expect(listen({ host: "192.0.2.1", port: 0, handler })).rejects.toThrow(/HOST=192\.0\.2\.1 is not an address of this machine/);
  });
});
