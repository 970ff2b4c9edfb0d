/**
 * The floor under the wake-latency figure: a bare node:http server that
 * speaks just enough of the API for bench/wake.ts (mint a key, create a
 * channel, long-poll, post) and, on each post, answers every held long-poll
 * with one pre-rendered page. No database, no routing, no rendering: what is
 * left is Node's HTTP server writing 1,000 responses to 1,000 connections on
 * this machine, which no service built on it can beat.
 *
 * Run as a child process by wakeLatency(); prints its port on stdout.
 */
import http from "node:http";

const held: http.ServerResponse[] = [];
const stamp = "2026-11-21T06:00:00.000000Z";
const page = Buffer.from(
  JSON.stringify({
    data: [{ id: "00000000-0000-4000-8000-000000000000", channel_id: "floor", content: "wake", created_at: stamp, expires_at: stamp, active: true }],
    next_cursor: stamp,
    limit: 50,
  }),
);

const EMPTY = Buffer.from(`{"data":[],"next_cursor":"${stamp}","limit":50}`);

function send(res: http.ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": body.length, "X-Request-Id": "floor" });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? "").split("?")[0];
  req.resume();
  req.on("end", () => {
    if (req.method === "POST" && path === "/v1/keys") return send(res, 201, Buffer.from('{"key":"floor"}'));
    if (req.method === "POST" && path === "/v1/channels") return send(res, 201, Buffer.from('{"id":"floor"}'));
    if (req.method === "POST") {
      send(res, 201, Buffer.from(`{"next_cursor":"${stamp}"}`));
      for (const waiter of held.splice(0)) send(waiter, 200, page);
      return;
    }
    // Like the service: a long-poll nobody wakes answers empty at its deadline.
    held.push(res);
    const deadline = setTimeout(() => {
      const at = held.indexOf(res);
      if (at >= 0) send(held.splice(at, 1)[0] as http.ServerResponse, 200, EMPTY);
    }, 20_000);
    res.once("close", () => clearTimeout(deadline));
  });
});
// The service's backlog (src/server/listener.ts): 1,000 waiters connect at once.
server.listen({ port: 0, host: "127.0.0.1", backlog: 4096 }, () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));
process.on("SIGTERM", () => process.exit(0));
