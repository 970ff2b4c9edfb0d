/**
 * What a person or an agent finds by looking around: GET /, the guides at the
 * address they used (/llms.txt, /openapi.json), and polling a job at the
 * /v1 path they guess.
 */
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
let proxied: TestServer;
beforeAll(async () => {
  [server, proxied] = await Promise.all([startTestServer(), startTestServer({ AGENTBUS_TRUST_PROXY: "true" })]);
});
afterAll(async () => {
  await Promise.all([server?.close(), proxied?.close()]);
});

/** A GET with headers fetch() will not let us set (Host). */
function get(base: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(new URL(path, base), { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

const port = (t: TestServer) => new URL(t.url).port;

describe("GET /", () => {
  it("answers JSON naming the service and version, with links to the guides and /health", async () => {
    const res = await get(server.url, "/", { Host: "bus.example:8080" });
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(JSON.parse(res.body)).toEqual({
      service: "agentbus",
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      description: expect.any(String),
      links: {
        llms_txt: "http://bus.example:8080/llms.txt",
        openapi: "http://bus.example:8080/openapi.json",
        error_docs: "http://bus.example:8080/docs/errors",
        health: "http://bus.example:8080/health",
      },
      sandbox: { channel: "sandbox", messages: "http://bus.example:8080/v1/channels/sandbox/messages" },
    });
  });

  it("answers a browser with the web console's page, under a CSP that allows no inline code and no framing", async () => {
    const res = await get(server.url, "/", { Accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" });
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers.vary).toContain("Accept");
    expect(res.body).toContain('<script type="module" src="/console/app.js"></script>');
    // No inline script: every <script> loads a file of this origin.
    expect(res.body.match(/<script(?![^>]*\ssrc="\/console\/)[^>]*>/g)).toBeNull();
    const csp = String(res.headers["content-security-policy"]);
    for (const rule of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) expect(csp).toContain(rule);
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(res.headers["x-frame-options"]).toBe("DENY");
  });

  it("serves the console's script and stylesheet with validators, and 304 when unchanged", async () => {
    for (const [path, type] of [
      ["/console/app.js", "text/javascript; charset=utf-8"],
      ["/console/app.css", "text/css; charset=utf-8"],
    ] as const) {
      const res = await get(server.url, path, {});
      expect(res.status, path).toBe(200);
      expect(res.headers["content-type"]).toBe(type);
      const etag = String(res.headers.etag);
      expect((await get(server.url, path, { "If-None-Match": etag })).status).toBe(304);
    }
  });

  it("answers JSON to a client that prefers JSON or sends no Accept", async () => {
    for (const accept of ["application/json", "*/*", "text/html;q=0.5, application/json"]) {
      const res = await get(server.url, "/", { Accept: accept });
      expect(res.headers["content-type"], accept).toBe("application/json; charset=utf-8");
    }
  });

  it("still answers 404 not_found for other unknown paths", async () => {
    const res = await rest(server.url, "GET", "/nowhere");
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "not_found" });
  });
});

describe("/llms.txt and /openapi.json use the address the request came to", () => {
  it("writes the Host of the request into /llms.txt instead of a fixed address", async () => {
    const res = await get(server.url, "/llms.txt", { Host: "bus.example:9999" });
    expect(res.body).toContain("B=http://bus.example:9999\n");
    expect(res.body).toContain("(http://bus.example:9999/openapi.json)");
    expect(res.body).not.toContain("127.0.0.1:8080");
  });

  it("writes the Host of the request into /openapi.json servers", async () => {
    const res = await get(server.url, "/openapi.json", { Host: "bus.example:9999" });
    expect(JSON.parse(res.body).servers).toEqual([{ url: "http://bus.example:9999" }]);
  });

  it("serves each address its own document (cached per address)", async () => {
    const [a, b, a2] = [
      await get(server.url, "/llms.txt", { Host: "one.example" }),
      await get(server.url, "/llms.txt", { Host: "two.example" }),
      await get(server.url, "/llms.txt", { Host: "one.example" }),
    ];
    expect(a.body).toContain("B=http://one.example\n");
    expect(b.body).toContain("B=http://two.example\n");
    expect(a2.body).toBe(a.body);
  });

  it.each([
    ["markup", "<script>alert(1)</script>"],
    ["a path", "evil.example/phish"],
    ["userinfo", "user@evil.example"],
    ["a space", "evil.example x"],
    ["a bad port", "evil.example:99999"],
    ["a quote", "evil.example\"onload"],
  ])("never writes a Host with %s into a document; the listening address stands in", async (_name, host) => {
    for (const path of ["/llms.txt", "/openapi.json", "/"]) {
      const res = await get(server.url, path, { Host: host });
      expect(res.status, path).toBe(200);
      expect(res.body, path).not.toContain("evil");
      expect(res.body, path).not.toContain("<script>");
      expect(res.body, path).toContain(`http://127.0.0.1:${port(server)}`);
    }
  });

  it("ignores X-Forwarded-Proto and X-Forwarded-Host without AGENTBUS_TRUST_PROXY", async () => {
    const res = await get(server.url, "/llms.txt", { Host: "direct.example", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "public.example" });
    expect(res.body).toContain("B=http://direct.example\n");
  });

  it("uses X-Forwarded-Proto and X-Forwarded-Host (first hop) with AGENTBUS_TRUST_PROXY", async () => {
    const res = await get(proxied.url, "/openapi.json", {
      Host: "internal:8080",
      "X-Forwarded-Proto": "https, http",
      "X-Forwarded-Host": "public.example, internal:8080",
    });
    expect(JSON.parse(res.body).servers).toEqual([{ url: "https://public.example" }]);
  });

  it("falls back to Host when a trusted X-Forwarded-Host is not a host", async () => {
    const res = await get(proxied.url, "/llms.txt", { Host: "internal.example:8080", "X-Forwarded-Host": "<b>x</b>", "X-Forwarded-Proto": "javascript" });
    expect(res.body).toContain("B=http://internal.example:8080\n");
  });
});

describe("GET /v1/jobs/{job_id}", () => {
  it("answers exactly like GET /jobs/{job_id}", async () => {
    const key = await mintKey(server.url);
    const submitted = await rest<{ job_id: number }>(server.url, "POST", "/v1/pdf/generate", { key, body: { content: "<p>hi</p>", format: "html" } });
    expect(submitted.status).toBe(202);
    const legacy = await rest(server.url, "GET", `/jobs/${submitted.body.job_id}`, { key });
    const aliased = await rest(server.url, "GET", `/v1/jobs/${submitted.body.job_id}`, { key });
    expect(legacy.status).toBe(200);
    expect(aliased.status).toBe(200);
    expect(aliased.body).toEqual(legacy.body);
  });

  it("answers 404 job_not_found for another key's job on both paths", async () => {
    const owner = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    const submitted = await rest<{ job_id: number }>(server.url, "POST", "/v1/pdf/generate", { key: owner, body: { content: "<p>x</p>" } });
    for (const path of [`/jobs/${submitted.body.job_id}`, `/v1/jobs/${submitted.body.job_id}`]) {
      const res = await rest(server.url, "GET", path, { key: stranger });
      expect(res.status, path).toBe(404);
      expect(res.body, path).toMatchObject({ error: "job_not_found" });
    }
  });

  it("is listed in /llms.txt and /openapi.json", async () => {
    const text = await (await fetch(`${server.url}/llms.txt`)).text();
    expect(text).toContain("`GET /v1/jobs/{job_id}`");
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, { get?: unknown }> };
    expect(doc.paths["/v1/jobs/{job_id}"]?.get).toBeDefined();
  });
});
