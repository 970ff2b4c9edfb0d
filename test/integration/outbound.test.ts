/**
 * The guarded outbound client (docs/decisions.md#outbound-addresses) against real local servers:
 * the address rule on literal and resolved addresses (the resolution used
 * for the check is the one connected to), redirects re-checked hop by hop,
 * the timeout and the response-size cap.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOutboundClient, failureClass, OutboundError, type OutboundClient, type Resolver } from "../../src/outbound/guarded-fetch.js";
import { rejectionOf } from "../support/errors.js";

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A local server whose handler a test sets; it records every request. */
class Local {
  readonly seen: Seen[] = [];
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void = (_req, res) => res.end("ok");
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      this.seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      this.handler(req, res, body);
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = "/"): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const failure = (promise: Promise<unknown>) => rejectionOf(OutboundError, promise);

/** Pretends 127.0.0.1 is the one public address there is, so local servers can play both sides. */
const onlyLoopbackOne = (address: string) => (address === "127.0.0.1" ? undefined : "refused by the test policy");

let a: Local;
let b: Local;
const clients: OutboundClient[] = [];
function client(options: Parameters<typeof createOutboundClient>[0]): OutboundClient {
  const c = createOutboundClient(options);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  a = await new Local().start();
  b = await new Local().start();
});
afterAll(async () => {
  for (const c of clients) c.close();
  await a?.close();
  await b?.close();
});

describe("the address rule", () => {
  it("refuses loopback targets by default, however they are written, before anything is sent", async () => {
    const strict = client({ allowPrivateTargets: false });
    const before = a.seen.length;
    for (const url of [
      a.url(),
      `http://localhost:${a.port}/`,
      `http://[::1]:${a.port}/`,
      `http://[::ffff:127.0.0.1]:${a.port}/`,
      `http://0x7f.0.0.1:${a.port}/`,
      `http://2130706433:${a.port}/`,
      `http://0.0.0.0:${a.port}/`,
    ]) {
      const err = await failure(strict.request(url));
      expect(err.code, url).toBe("blocked_address");
    }
    expect(a.seen.length).toBe(before);
  });

  it("allows them with allowPrivateTargets (AGENTBUS_ALLOW_PRIVATE_TARGETS=true)", async () => {
    const open = client({ allowPrivateTargets: true });
    const res = await open.request(`http://localhost:${a.port}/hello`);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe("ok");
  });

  it("checks the address the connection actually uses: the resolver's answer, filtered", async () => {
    const calls: string[] = [];
    const names: Record<string, string[]> = {
      "public.test": ["127.0.0.1"],
      "rebind.test": ["10.0.0.1"],
      "mixed.test": ["169.254.169.254", "127.0.0.1"],
    };
    const resolve: Resolver = async (hostname) => {
      calls.push(hostname);
      const found = names[hostname];
      if (!found) throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: 4 }));
    };
    const guarded = client({ allowPrivateTargets: false, resolve, refused: onlyLoopbackOne });

    const ok = await guarded.request(`http://public.test:${a.port}/x`);
    expect(ok.status).toBe(200);
    expect(a.seen.at(-1)!.headers.host).toBe(`public.test:${a.port}`);
    const rebind = await failure(guarded.request(`http://rebind.test:${a.port}/`));
    expect(rebind.code).toBe("blocked_address");
    expect(failureClass(rebind)).toBe("private_address_refused");
    // What the name resolves to never appears in the text (it reaches users: docs/decisions.md#failure-classes).
    expect(rebind.message).not.toContain("10.0.0.1");
    // Only the allowed address of a mixed answer is connected to.
    expect((await guarded.request(`http://mixed.test:${a.port}/`)).status).toBe(200);
    expect((await failure(guarded.request(`http://unknown.test:${a.port}/`))).code).toBe("dns_failed");
    // One resolution per new connection; nothing resolved a second time "to check".
    expect(calls.filter((c) => c === "rebind.test")).toHaveLength(1);
  });

  it("accepts only http and https URLs", async () => {
    const open = client({ allowPrivateTargets: true });
    for (const url of ["file:///etc/passwd", "ftp://127.0.0.1/", "gopher://127.0.0.1/", "not a url", "/relative"]) {
      expect((await failure(open.request(url))).code, url).toBe("invalid_url");
    }
  });
});

describe("redirects", () => {
  it("re-checks every hop: a redirect to a refused address is refused", async () => {
    a.handler = (_req, res) => res.writeHead(302, { Location: "http://169.254.169.254/latest/meta-data/" }).end();
    const guarded = client({ allowPrivateTargets: false, refused: onlyLoopbackOne });
    const err = await failure(guarded.request(a.url("/go")));
    expect(err.code).toBe("blocked_address");
    expect(err.message).toContain("169.254.169.254");
    a.handler = (_req, res) => res.writeHead(302, { Location: "file:///etc/passwd" }).end();
    expect((await failure(guarded.request(a.url("/go")))).code).toBe("invalid_url");
  });

  it("follows at most three", async () => {
    a.handler = (req, res) => {
      const n = Number(req.url!.slice(1));
      res.writeHead(302, { Location: `/${n + 1}` }).end();
    };
    const open = client({ allowPrivateTargets: true });
    const before = a.seen.length;
    expect((await failure(open.request(a.url("/0")))).code).toBe("too_many_redirects");
    expect(a.seen.length - before).toBe(4);
    a.handler = (req, res) => (req.url === "/3" ? res.end("arrived") : res.writeHead(301, { Location: `/${Number(req.url!.slice(1)) + 1}` }).end());
    const res = await open.request(a.url("/0"));
    expect(res.body.toString()).toBe("arrived");
    expect(res.redirects).toBe(3);
    expect(res.url).toBe(a.url("/3"));
  });

  it("keeps method and body on 307/308, never turns a POST into a GET, and drops credentials across origins", async () => {
    const open = client({ allowPrivateTargets: true });
    a.handler = (_req, res) => res.writeHead(307, { Location: b.url("/moved") }).end();
    b.handler = (_req, res) => res.end("b");
    const res = await open.request(a.url("/post"), {
      method: "POST",
      body: '{"x":1}',
      headers: { "Content-Type": "application/json", Authorization: "Bearer t0ken", "X-Other": "kept" },
    });
    expect(res.status).toBe(200);
    const atB = b.seen.at(-1)!;
    expect(atB).toMatchObject({ method: "POST", url: "/moved", body: '{"x":1}' });
    expect(atB.headers.authorization).toBeUndefined();
    expect(atB.headers["x-other"]).toBe("kept");

    // A 302 to a POST is the answer, not a hop.
    a.handler = (_req, res) => res.writeHead(302, { Location: b.url("/get-instead") }).end();
    const seenAtB = b.seen.length;
    const redirected = await open.request(a.url("/post"), { method: "POST", body: "x" });
    expect(redirected.status).toBe(302);
    expect(b.seen.length).toBe(seenAtB);

    // Same origin keeps the credentials.
    a.handler = (req, res) => (req.url === "/here" ? res.end("here") : res.writeHead(308, { Location: "/here" }).end());
    await open.request(a.url("/there"), { headers: { Authorization: "Bearer t0ken" } });
    expect(a.seen.at(-1)!.headers.authorization).toBe("Bearer t0ken");
  });
});

describe("limits", () => {
  it("gives up after the total timeout", async () => {
    // Real time: a real HTTP server that answers late, against a real socket timeout.
    a.handler = (_req, res) => setTimeout(() => res.end("late"), 2_000);
    const open = client({ allowPrivateTargets: true });
    const started = performance.now();
    const err = await failure(open.request(a.url("/slow"), { timeoutMs: 200 }));
    expect(err.code).toBe("timeout");
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("keeps at most maxResponseBytes of the body and discards the rest", async () => {
    const big = "x".repeat(200_000);
    a.handler = (_req, res) => res.end(big);
    const open = client({ allowPrivateTargets: true });
    const capped = await open.request(a.url("/big"), { maxResponseBytes: 1000 });
    expect(capped.status).toBe(200);
    expect(capped.body.length).toBe(1000);
    expect(capped.truncated).toBe(true);
    const nothing = await open.request(a.url("/big"), { maxResponseBytes: 0 });
    expect(nothing.body.length).toBe(0);
    expect(nothing.truncated).toBe(true);
    a.handler = (_req, res) => res.end("small");
    const whole = await open.request(a.url("/small"), { maxResponseBytes: 1000 });
    expect(whole.body.toString()).toBe("small");
    expect(whole.truncated).toBe(false);
  });

  it("reports a refused connection as a network error", async () => {
    const gone = await new Local().start();
    const url = gone.url();
    await gone.close();
    const err = await failure(client({ allowPrivateTargets: true }).request(url));
    expect(err.code).toBe("network");
    expect(failureClass(err)).toBe("connection_refused");
    // The address stays in the cause (for logs), out of the message users may see.
    expect(err.message).not.toContain("127.0.0.1");
    expect((err.cause as NodeJS.ErrnoException).code).toBe("ECONNREFUSED");
  });
});
