/** What every HTTP caller sees regardless of route: errors, headers, CORS, health, metrics, docs. */
import { describe, expect, it } from "vitest";
import { errorCatalog } from "../../src/model/errors.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const server = useTestServer({ AGENTBUS_MAX_BODY_BYTES: "2048" });

describe("routing errors", () => {
  it("answers an unknown path with 404 not_found", async () => {
    const res = await rest(server.url, "GET", "/v1/nowhere");
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "not_found" });
  });

  it("answers a known path with the wrong method with 405 method_not_allowed and Allow", async () => {
    const res = await rest(server.url, "PUT", "/v1/keys");
    expect(res.status).toBe(405);
    expect(res.body).toMatchObject({ error: "method_not_allowed" });
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("answers malformed JSON with 400 invalid_json", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { rawBody: "{not json", headers: { "Content-Type": "application/json" } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: "invalid_json" });
  });

  it("answers a JSON body that is not an object with 422 invalid_json_shape", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: ["agent_label"] });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_json_shape" });
    expect(res.body.suggestion).toEqual(expect.any(String));
  });

  it("answers an oversized body with 413 payload_too_large", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "x".repeat(4096) } });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: "payload_too_large" });
  });

  it("answers an oversized body sent without Content-Length (chunked) with 413", async () => {
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode("x".repeat(1024)));
        controller.close();
      },
    });
    const res = await fetch(`${server.url}/v1/keys`, { method: "POST", body: chunks, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
  });

  it("never answers 5xx to garbage on a known route", async () => {
    for (const rawBody of ["", "null", "0", "\"s\"", "[]", "{\"agent_label\":{}}", "{\"agent_label\":[1]}", "\u0000"]) {
      const res = await rest(server.url, "POST", "/v1/keys", { rawBody });
      expect(res.status, rawBody).toBeLessThan(500);
    }
  });
});

describe("headers on every response", () => {
  it("sets X-Request-Id, echoing a well-formed incoming one", async () => {
    const fresh = await rest(server.url, "GET", "/health");
    expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await rest(server.url, "GET", "/v1/nowhere", { headers: { "X-Request-Id": "trace-123" } });
    expect(echoed.headers.get("x-request-id")).toBe("trace-123");
    expect(echoed.body.request_id).toBe("trace-123");
  });

  it("sets the baseline security headers", async () => {
    const res = await rest(server.url, "GET", "/health");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
  });

  it("answers a CORS preflight with 204 and the Connect and API headers allowed", async () => {
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "OPTIONS",
      headers: { Origin: "https://app.example", "Access-Control-Request-Method": "POST" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const allowed = res.headers.get("access-control-allow-headers")?.toLowerCase() ?? "";
    for (const h of ["x-api-key", "idempotency-key", "connect-protocol-version", "x-grpc-web"]) expect(allowed).toContain(h);
    expect(res.headers.get("access-control-allow-methods")).toContain("PATCH");
  });

  it("echoes only configured origins when AGENTBUS_CORS_ORIGINS is a list", async () => {
    const strict = await startTestServer({ AGENTBUS_CORS_ORIGINS: "https://good.example" });
    try {
      const good = await fetch(`${strict.url}/health`, { headers: { Origin: "https://good.example" } });
      expect(good.headers.get("access-control-allow-origin")).toBe("https://good.example");
      const bad = await fetch(`${strict.url}/health`, { headers: { Origin: "https://evil.example" } });
      expect(bad.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await strict.close();
    }
  });
});

describe("operational routes", () => {
  it("reports health with a database check", async () => {
    const res = await rest(server.url, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", database: "ok" });
  });

  it("exposes Prometheus metrics labelled by route template, not by concrete path", async () => {
    const key = await mintKey(server.url);
    await rest(server.url, "GET", "/v1/keys/me", { key });
    await rest(server.url, "GET", "/v1/channels/some-concrete-id", { key });
    const res = await fetch(`${server.url}/metrics`);
    const text = await res.text();
    expect(res.headers.get("content-type")).toContain("text/plain");
    expect(text).toContain('agentbus_http_requests_total{route="/v1/keys/me",method="GET",protocol="rest",status="200"}');
    expect(text).toContain('route="/v1/channels/{identifier}"');
    expect(text).not.toContain("some-concrete-id");
    expect(text).toContain("agentbus_db_pool_total_connections");
  });

  it("renders /docs/errors from the catalog with an anchor per code", async () => {
    const res = await fetch(`${server.url}/docs/errors`);
    const html = await res.text();
    expect(res.status).toBe(200);
    for (const code of Object.keys(errorCatalog)) expect(html).toContain(`id="${code}"`);
  });

  it("logs one structured line per request with id, route, status and duration", async () => {
    await rest(server.url, "GET", "/v1/keys/me", { headers: { "X-Request-Id": "log-probe" } });
    const line = server.logs.find((l) => l.request_id === "log-probe");
    expect(line).toMatchObject({ route: "/v1/keys/me", status: 401, method: "GET" });
    expect(line?.duration_ms).toEqual(expect.any(Number));
  });
});
