import { createHash } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const server = useTestServer();

describe("POST /v1/keys", () => {
  it("issues a key without authentication, answering 201 with the A4 shape", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "planner" } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["agent_label", "expires_at", "key", "key_id", "owner_id", "scopes", "scopes_restricted"]);
    expect(res.body).toMatchObject({ agent_label: "planner", owner_id: "planner", expires_at: null, scopes_restricted: false });
    expect(res.body.key).toMatch(new RegExp(`^${res.body.key_id}\\.`));
  });

  it("refuses a label already held by an active key with 409 label_in_use and a suggestion", async () => {
    await mintKey(server.url, "twin");
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "twin" } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "label_in_use" });
    // It says what to do: another label (a suffix), or the key already held, or revoking it.
    expect(res.body.suggestion).toMatch(/another agent_label.*suffix/);
    expect(res.body.suggestion).toContain("DELETE /v1/keys/me");
  });

  it.each([
    ["another case", (l: string) => l.toUpperCase()],
    ["surrounding spaces", (l: string) => `  ${l} `],
    ["full-width letters", (l: string) => [...l].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join("")],
  ])("refuses a look-alike of an active key's label (%s) with 409 label_in_use", async (_name, lookAlike) => {
    const label = `lookalike${Math.random().toString(36).slice(2, 8).replace(/[0-9]/g, "q")}`;
    await mintKey(server.url, label);
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: lookAlike(label) } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "label_in_use", suggestion: expect.stringContaining("case") });
  });

  it("stores and shows the label trimmed, as its owner_id too", async () => {
    const label = `trimmed-${Math.random().toString(36).slice(2, 8)}`;
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: ` ${label}\t` } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ agent_label: label, owner_id: label });
  });

  it.each([
    ["a right-to-left override", "evil\u202Eabc"],
    ["a zero-width space", "plan\u200Bner"],
    ["a zero-width joiner", "plan\u200Dner"],
    ["a control character", "plan\u0007ner"],
    ["a line separator", "plan\u2028ner"],
  ])("refuses a label with %s with 422 invalid_agent_label", async (_name, label) => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: label } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_agent_label", field: "agent_label" });
  });

  it("frees the label of a revoked key", async () => {
    const key = await mintKey(server.url, "phoenix");
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key })).status).toBe(200);
    expect((await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "phoenix" } })).status).toBe(201);
  });

  it("answers 422 missing_field for a blank or absent agent_label", async () => {
    for (const body of [{}, { agent_label: "  " }]) {
      const res = await rest(server.url, "POST", "/v1/keys", { body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: "missing_field" });
    }
  });

  it("answers 422 invalid_agent_label for a non-string agent_label", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: 42 } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_agent_label" });
  });

  it("answers 422 invalid_agent_label for a label over 128 characters", async () => {
    const res = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "x".repeat(129) } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_agent_label" });
  });

  it("stores only a SHA-256 hash of the secret", async () => {
    const res = await rest<{ key: string; key_id: string }>(server.url, "POST", "/v1/keys", { body: { agent_label: "vault" } });
    const secret = res.body.key.split(".")[1]!;
    const client = new pg.Client({ connectionString: server.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT * FROM api_keys WHERE key_id = $1", [res.body.key_id]);
      expect(JSON.stringify(rows[0])).not.toContain(secret);
      expect((rows[0].secret_hash as Buffer).equals(createHash("sha256").update(secret).digest())).toBe(true);
    } finally {
      await client.end();
    }
  });

  it("never writes the key into the logs", async () => {
    const key = await mintKey(server.url, "quiet");
    await rest(server.url, "GET", "/v1/keys/me", { key });
    const secret = key.split(".")[1]!;
    expect(server.rawLogs.length).toBeGreaterThan(0);
    expect(server.rawLogs.join("\n")).not.toContain(secret);
  });

  it("limits minting per source address when AGENTBUS_KEY_MINT_LIMIT is set", async () => {
    // Behind a trusted proxy even a loopback caller is someone else's request: the limit applies.
    const limited = await startTestServer({ AGENTBUS_KEY_MINT_LIMIT: "2", AGENTBUS_TRUST_PROXY: "true" });
    try {
      expect((await rest(limited.url, "POST", "/v1/keys", { body: { agent_label: "a1" } })).status).toBe(201);
      expect((await rest(limited.url, "POST", "/v1/keys", { body: { agent_label: "a2" } })).status).toBe(201);
      const third = await rest(limited.url, "POST", "/v1/keys", { body: { agent_label: "a3" } });
      expect(third.status).toBe(429);
      expect(third.body).toMatchObject({ error: "rate_limit_exceeded" });
      expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});

describe("the mint limit and the person on this machine", () => {
  const loopbackOnly = useTestServer({ AGENTBUS_KEY_MINT_LIMIT: "1" });

  it("does not limit a loopback caller of a service that listens on loopback only", async () => {
    for (let i = 0; i < 5; i++) expect((await rest(loopbackOnly.url, "POST", "/v1/keys", { body: { agent_label: `local-${i}` } })).status).toBe(201);
  });

  it("limits a request a proxy forwarded to it, though it arrives over loopback", async () => {
    const viaProxy = (i: number) => rest(loopbackOnly.url, "POST", "/v1/keys", { body: { agent_label: `proxied-${i}` }, headers: { "X-Forwarded-For": "203.0.113.9" } });
    expect((await viaProxy(0)).status).toBe(201);
    expect((await viaProxy(1)).status).toBe(429);
  });
});

describe("the mint limit counts only keys actually issued", () => {
  // One server at the default limit; each test mints from its own address
  // (X-Forwarded-For, trusted here) so the tests do not share a window.
  const limited = useTestServer({ AGENTBUS_KEY_MINT_LIMIT: "20", AGENTBUS_TRUST_PROXY: "true" });
  const mintFrom = (address: string, body: unknown) =>
    rest(limited.url, "POST", "/v1/keys", { body, headers: { "X-Forwarded-For": address } });

  it("does not count mints refused with 409 label_in_use", async () => {
    const address = "198.51.100.1";
    expect((await mintFrom(address, { agent_label: "taken-planner" })).status).toBe(201);
    for (let i = 0; i < 25; i++) {
      const res = await mintFrom(address, { agent_label: "taken-planner" });
      expect(res.status).toBe(409);
    }
    expect((await mintFrom(address, { agent_label: "taken-planner-2" })).status).toBe(201);
  });

  it("does not count mints refused with 422", async () => {
    const address = "198.51.100.2";
    for (let i = 0; i < 25; i++) expect((await mintFrom(address, { agent_label: "bad\u202Elabel" })).status).toBe(422);
    for (let i = 0; i < 25; i++) expect((await mintFrom(address, {})).status).toBe(422);
    expect((await mintFrom(address, { agent_label: "valid-after-422s" })).status).toBe(201);
  });

  it("still answers 429 after 20 issued keys", async () => {
    const address = "198.51.100.3";
    for (let i = 0; i < 20; i++) expect((await mintFrom(address, { agent_label: `issued-${i}` })).status).toBe(201);
    const refused = await mintFrom(address, { agent_label: "issued-20" });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: "rate_limit_exceeded" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("issues at most 20 keys to a concurrent burst mixing conflicting and valid mints", async () => {
    const address = "198.51.100.4";
    expect((await mintFrom(address, { agent_label: "burst-taken" })).status).toBe(201);
    const bodies = Array.from({ length: 60 }, (_, i) => ({ agent_label: i % 2 === 0 ? "burst-taken" : `burst-${i}` }));
    const results = await Promise.all(bodies.map((body) => mintFrom(address, body)));
    const issued = results.filter((r) => r.status === 201).length;
    expect(results.every((r) => [201, 409, 429].includes(r.status))).toBe(true);
    expect(issued).toBeLessThanOrEqual(19);
    // Slots given back by refused mints are usable: the window ends full.
    let late = 0;
    while ((await mintFrom(address, { agent_label: `burst-late-${late}` })).status === 201) late++;
    expect(1 + issued + late).toBe(20);
  });
});

describe("GET /v1/keys/me", () => {
  it("describes the calling key", async () => {
    const key = await mintKey(server.url, "self-aware");
    const res = await rest(server.url, "GET", "/v1/keys/me", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ key_id: key.split(".")[0], agent_label: "self-aware", owner_id: "self-aware", active: true });
    expect(res.body.created_at).toMatch(TIMESTAMP_6);
  });
});

describe("DELETE /v1/keys/me", () => {
  it("revokes the key at once", async () => {
    const key = await mintKey(server.url);
    const res = await rest(server.url, "DELETE", "/v1/keys/me", { key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ key_id: key.split(".")[0], revoked: true });
    const after = await rest(server.url, "GET", "/v1/keys/me", { key });
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ error: "unauthorized", message: "Inactive API key" });
  });
});

describe("401 unauthorized on protected routes", () => {
  const cases: Array<[string, (key: string) => string | undefined, string]> = [
    ["missing", () => undefined, "Missing X-API-Key header"],
    ["malformed", () => "not-a-key", "Malformed API key"],
    ["unknown", () => "ak_AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "Invalid API key"],
    ["wrong secret", (key) => `${key.split(".")[0]}.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB`, "Invalid API key"],
  ];
  for (const [name, keyFor, message] of cases) {
    it(`answers 401 with the error body when the key is ${name}`, async () => {
      const key = await mintKey(server.url);
      const res = await rest(server.url, "GET", "/v1/keys/me", { key: keyFor(key) });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: "unauthorized", message, documentation_url: "/docs/errors#unauthorized" });
      expect(res.body.suggestion).toEqual(expect.stringContaining("POST /v1/keys"));
      expect(res.body.request_id).toBe(res.headers.get("x-request-id"));
    });
  }

  it("checks the key before anything else on routes not implemented yet", async () => {
    const res = await rest(server.url, "POST", "/v1/channels", { body: { name: "x", mode: "broadcast" } });
    expect(res.status).toBe(401);
  });
});
