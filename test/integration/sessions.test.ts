/**
 * Shared sessions (issue 17, item 4; docs/decisions.md#sessions): create,
 * list, read, shallow-merge PATCH with compare-and-set (If-Match or
 * expected_version), delete; sharing with other keys; size and count limits;
 * expiry; and 20 concurrent compare-and-set increments that must succeed
 * exactly 20 times, in sequence.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionService } from "../../gen/agentbus/v1/session_service_pb.js";
import { expectError } from "../support/membership.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  // The limit would refuse the concurrency proof's retries; it is tested elsewhere.
  server = await startTestServer({ AGENTBUS_RATE_LIMIT: "0" });
});
afterAll(async () => {
  await server?.close();
});

interface SessionJson {
  id: string;
  name: string;
  state: Record<string, unknown>;
  version: number;
  owner_id: string;
  ttl_seconds: number;
  created_at: string;
  updated_at: string;
  expires_at: string;
}

const keyIdOf = (key: string) => key.split(".")[0] as string;

async function createSession(key: string, body: Record<string, unknown> = { name: "plan", state: { step: 1 } }): Promise<SessionJson> {
  const res = await rest<SessionJson>(server.url, "POST", "/v1/sessions", { key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

const patch = (key: string, id: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  rest<SessionJson & { error?: string }>(server.url, "PATCH", `/v1/sessions/${id}`, { key, body, headers });

describe("POST /v1/sessions", () => {
  it("creates a session at version 1 with its state, owner and expiry (201), and an ETag of its version", async () => {
    const key = await mintKey(server.url, "planner");
    const res = await rest<SessionJson>(server.url, "POST", "/v1/sessions", { key, body: { name: "hand-off", state: { plan: ["a", "b"] }, ttl_seconds: 600 } });
    expect(res.status).toBe(201);
    expect(res.headers.get("etag")).toBe('"1"');
    expect(res.body).toMatchObject({ name: "hand-off", state: { plan: ["a", "b"] }, version: 1, owner_id: "planner", ttl_seconds: 600 });
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.updated_at)).toBe(600_000);
  });

  it("refuses a state over 64 KiB with 422 state_too_large", async () => {
    const key = await mintKey(server.url);
    expectError(await rest(server.url, "POST", "/v1/sessions", { key, body: { name: "big", state: { blob: "x".repeat(70_000) } } }), 422, "state_too_large");
  });

  it("refuses a missing name (422 missing_field) and a ttl outside 300..2592000 (422 invalid_ttl_seconds)", async () => {
    const key = await mintKey(server.url);
    expectError(await rest(server.url, "POST", "/v1/sessions", { key, body: { state: {} } }), 422, "missing_field");
    expectError(await rest(server.url, "POST", "/v1/sessions", { key, body: { name: "x", ttl_seconds: 10 } }), 422, "invalid_ttl_seconds");
  });

  it("refuses a state that is not an object with a 4xx and the catalog's body", async () => {
    const key = await mintKey(server.url);
    const res = await rest<{ error: string }>(server.url, "POST", "/v1/sessions", { key, body: { name: "x", state: [1, 2] } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(res.body.error).toEqual(expect.any(String));
  });
});

describe("GET /v1/sessions and /v1/sessions/{id}", () => {
  it("lists the owner's sessions and those shared with the key, newest first, in pages", async () => {
    const alice = await mintKey(server.url);
    const bob = await mintKey(server.url);
    const own = [await createSession(alice), await createSession(alice), await createSession(alice)];
    const shared = await createSession(bob);
    expect((await rest(server.url, "POST", `/v1/sessions/${shared.id}/members`, { key: bob, body: { key_id: keyIdOf(alice) } })).status).toBe(201);
    const first = await rest<{ data: SessionJson[]; next_cursor: string }>(server.url, "GET", "/v1/sessions?limit=2", { key: alice });
    expect(first.body.data.map((s) => s.id)).toEqual([shared.id, own[2]!.id]);
    const second = await rest<{ data: SessionJson[]; next_cursor?: string }>(server.url, "GET", `/v1/sessions?limit=2&cursor=${first.body.next_cursor}`, { key: alice });
    expect(second.body.data.map((s) => s.id)).toEqual([own[1]!.id, own[0]!.id]);
  });

  it("answers 404 session_not_found for another owner's session, as for one that does not exist", async () => {
    const alice = await mintKey(server.url);
    const mallory = await mintKey(server.url);
    const session = await createSession(alice);
    expectError(await rest(server.url, "GET", `/v1/sessions/${session.id}`, { key: mallory }), 404, "session_not_found");
    expectError(await rest(server.url, "GET", "/v1/sessions/00000000-0000-4000-8000-000000000000", { key: mallory }), 404, "session_not_found");
    expectError(await rest(server.url, "GET", "/v1/sessions/not-a-uuid", { key: mallory }), 404, "session_not_found");
    expectError(await patch(mallory, session.id, { state: { hijacked: true } }), 404, "session_not_found");
    expectError(await rest(server.url, "DELETE", `/v1/sessions/${session.id}`, { key: mallory }), 404, "session_not_found");
  });
});

describe("PATCH /v1/sessions/{id}", () => {
  it("merges the given top-level keys into the state and adds one to the version", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key, { name: "merge", state: { a: 1, nested: { x: 1 } } });
    const res = await patch(key, session.id, { state: { b: 2, nested: { y: 2 }, a: null } });
    expect(res.status).toBe(200);
    expect(res.body.state).toEqual({ a: null, b: 2, nested: { y: 2 } });
    expect(res.body.version).toBe(2);
    expect(res.headers.get("etag")).toBe('"2"');
  });

  it("applies a change naming the current version (If-Match or expected_version), and refuses a stale one with 409 version_conflict", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key);
    expect((await patch(key, session.id, { state: { step: 2 } }, { "If-Match": '"1"' })).status).toBe(200);
    const stale = expectError(await patch(key, session.id, { state: { step: 99 } }, { "If-Match": '"1"' }), 409, "version_conflict");
    expect(stale).toMatchObject({ current_version: 2 });
    expectError(await patch(key, session.id, { state: { step: 99 }, expected_version: 1 }), 409, "version_conflict");
    expect((await patch(key, session.id, { state: { step: 3 }, expected_version: 2 })).body).toMatchObject({ version: 3, state: { step: 3 } });
    const now = await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key });
    expect(now.body).toMatchObject({ version: 3, state: { step: 3 } });
  });

  it("refuses an If-Match that names no version, and one that disagrees with expected_version (422)", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key);
    for (const malformed of ['"abc"', '"1", "2"', "W/*", '"0"']) {
      expectError(await patch(key, session.id, { state: {} }, { "If-Match": malformed }), 422, "invalid_field");
    }
    expectError(await patch(key, session.id, { state: {}, expected_version: 2 }, { "If-Match": '"1"' }), 422, "invalid_field");
    expect((await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key })).body.version).toBe(1);
  });

  it("applies a change with If-Match: * at whatever version the session is (RFC 9110: it matches any)", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key);
    expect((await patch(key, session.id, { state: { step: 2 } })).body.version).toBe(2);
    const res = await patch(key, session.id, { state: { step: 3 } }, { "If-Match": "*" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ version: 3, state: { step: 3 } });
    // With expected_version as well, * agrees with it and the version still decides.
    expectError(await patch(key, session.id, { state: { step: 99 }, expected_version: 2 }, { "If-Match": "*" }), 409, "version_conflict");
  });

  it("refuses a change that would make the state too large, and keeps the state", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key, { name: "grow", state: { a: "x".repeat(40_000) } });
    expectError(await patch(key, session.id, { state: { b: "y".repeat(40_000) } }), 422, "state_too_large");
    expect((await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key })).body.version).toBe(1);
  });

  it("refuses unknown fields with 422 invalid_fields", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key);
    expectError(await patch(key, session.id, { stat: { a: 1 } }), 422, "invalid_fields");
  });

  it("takes 20 concurrent compare-and-set increments exactly 20 times, in sequence, the others 409", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key, { name: "counter", state: { count: 0 } });
    let conflicts = 0;
    const successes: Array<{ version: number; count: number }> = [];
    const increment = async () => {
      for (;;) {
        const read = await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key });
        const count = read.body.state.count as number;
        const res = await patch(key, session.id, { state: { count: count + 1 } }, { "If-Match": `"${read.body.version}"` });
        if (res.status === 200) {
          successes.push({ version: res.body.version, count: res.body.state.count as number });
          return;
        }
        expect(res.body.error).toBe("version_conflict");
        conflicts++;
      }
    };
    await Promise.all(Array.from({ length: 20 }, increment));
    expect(successes).toHaveLength(20);
    // Each success moved the version by one and the count with it: no lost update.
    expect(successes.map((s) => s.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
    expect(successes.every((s) => s.count === s.version - 1)).toBe(true);
    const final = await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key });
    expect(final.body).toMatchObject({ version: 21, state: { count: 20 } });
    expect(conflicts).toBeGreaterThan(0);
  });
});

describe("sharing", () => {
  it("lets a member read and change the state, but not delete the session or share it further (403 forbidden)", async () => {
    const alice = await mintKey(server.url);
    const bob = await mintKey(server.url);
    const carol = await mintKey(server.url);
    const session = await createSession(alice);
    const added = await rest(server.url, "POST", `/v1/sessions/${session.id}/members`, { key: alice, body: { key_id: keyIdOf(bob) } });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ session_id: session.id, key_id: keyIdOf(bob) });
    expect((await patch(bob, session.id, { state: { by: "bob" } })).status).toBe(200);
    expectError(await rest(server.url, "DELETE", `/v1/sessions/${session.id}`, { key: bob }), 403, "forbidden");
    expectError(await rest(server.url, "POST", `/v1/sessions/${session.id}/members`, { key: bob, body: { key_id: keyIdOf(carol) } }), 403, "forbidden");
    const members = await rest<{ data: Array<{ key_id: string }> }>(server.url, "GET", `/v1/sessions/${session.id}/members`, { key: bob });
    expect(members.body.data.map((m) => m.key_id)).toEqual([keyIdOf(bob)]);
  });

  it("refuses a member's change of ttl_seconds (403 forbidden, with a suggestion) and applies nothing of that request", async () => {
    const alice = await mintKey(server.url);
    const bob = await mintKey(server.url);
    const session = await createSession(alice, { name: "long", state: { step: 1 }, ttl_seconds: 86_400 });
    await rest(server.url, "POST", `/v1/sessions/${session.id}/members`, { key: alice, body: { key_id: keyIdOf(bob) } });
    // The shortest lifetime: the member would have the session gone in five minutes.
    const refused = expectError(await patch(bob, session.id, { state: { step: 2 }, ttl_seconds: 300 }), 403, "forbidden");
    expect(refused).toMatchObject({ field: "ttl_seconds" });
    const after = await rest<SessionJson>(server.url, "GET", `/v1/sessions/${session.id}`, { key: alice });
    expect(after.body).toMatchObject({ version: 1, state: { step: 1 }, ttl_seconds: 86_400, expires_at: session.expires_at });
    // The state alone the member may still change, and the owner the lifetime.
    expect((await patch(bob, session.id, { state: { step: 2 } })).status).toBe(200);
    expect((await patch(alice, session.id, { state: {}, ttl_seconds: 300 })).body).toMatchObject({ ttl_seconds: 300 });
  });

  it("ends a member's access when the owner removes it (204), and refuses an unknown key (422 invalid_key_id)", async () => {
    const alice = await mintKey(server.url);
    const bob = await mintKey(server.url);
    const session = await createSession(alice);
    await rest(server.url, "POST", `/v1/sessions/${session.id}/members`, { key: alice, body: { key_id: keyIdOf(bob) } });
    expect((await rest(server.url, "DELETE", `/v1/sessions/${session.id}/members/${keyIdOf(bob)}`, { key: alice })).status).toBe(204);
    expectError(await rest(server.url, "GET", `/v1/sessions/${session.id}`, { key: bob }), 404, "session_not_found");
    expectError(await rest(server.url, "POST", `/v1/sessions/${session.id}/members`, { key: alice, body: { key_id: "ak_nobody" } }), 422, "invalid_key_id");
  });
});

describe("ownership", () => {
  it("belongs to the key, not its label: a key minted later with a freed label gets none of the old key's sessions", async () => {
    const label = `planner-${Math.random().toString(36).slice(2, 8)}`;
    const first = await mintKey(server.url, label);
    const session = await createSession(first);
    expect(session.owner_id).toBe(label);
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key: first })).status).toBe(200);
    const second = await mintKey(server.url, label);
    expectError(await rest(server.url, "GET", `/v1/sessions/${session.id}`, { key: second }), 404, "session_not_found");
    expect((await rest<{ data: SessionJson[] }>(server.url, "GET", "/v1/sessions", { key: second })).body.data).toEqual([]);
  });

  it("refuses a cursor that is not one it gave (422 invalid_cursor), not a 500", async () => {
    const key = await mintKey(server.url);
    expectError(await rest(server.url, "GET", `/v1/sessions?cursor=1.${"-".repeat(36)}`, { key }), 422, "invalid_cursor");
  });
});

describe("DELETE /v1/sessions/{id}", () => {
  it("deletes the session (204); it is gone for owner and members", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key);
    expect((await rest(server.url, "DELETE", `/v1/sessions/${session.id}`, { key })).status).toBe(204);
    expectError(await rest(server.url, "GET", `/v1/sessions/${session.id}`, { key }), 404, "session_not_found");
  });
});

describe("expiry", () => {
  it("answers 404 once a session outlived its ttl, and the purge deletes it", async () => {
    const key = await mintKey(server.url);
    const session = await createSession(key, { name: "short", state: {}, ttl_seconds: 300 });
    await server.app.pool.query("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1", [session.id]);
    expectError(await rest(server.url, "GET", `/v1/sessions/${session.id}`, { key }), 404, "session_not_found");
    const { purge } = await import("../../src/store/purge.js");
    const { Db } = await import("../../src/store/db.js");
    const counts = await purge(new Db(server.app.pool), Date.now() * 1000);
    expect(counts.deletedSessions).toBeGreaterThanOrEqual(1);
    const { rows } = await server.app.pool.query("SELECT 1 FROM sessions WHERE id = $1", [session.id]);
    expect(rows).toEqual([]);
  });
});

describe("over gRPC", () => {
  it("creates and compare-and-sets with expected_version", async () => {
    const key = await mintKey(server.url);
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: server.url }));
    const headers = { "x-api-key": key };
    const created = await client.createSession({ name: "grpc", state: { n: 1 } }, { headers });
    const updated = await client.updateSession({ id: created.id, state: { n: 2 }, expectedVersion: 1 }, { headers });
    expect(updated.version).toBe(2);
    expect(updated.state).toEqual({ n: 2 });
    await expect(client.updateSession({ id: created.id, state: { n: 3 }, expectedVersion: 1 }, { headers })).rejects.toMatchObject({ code: 10 });
  });

  it("takes if-match metadata: a version compare-and-sets, * matches any version", async () => {
    const key = await mintKey(server.url);
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: server.url }));
    const created = await client.createSession({ name: "grpc-if-match", state: { n: 1 } }, { headers: { "x-api-key": key } });
    await expect(client.updateSession({ id: created.id, state: { n: 2 } }, { headers: { "x-api-key": key, "if-match": '"7"' } })).rejects.toMatchObject({ code: 10 });
    const updated = await client.updateSession({ id: created.id, state: { n: 2 } }, { headers: { "x-api-key": key, "if-match": "*" } });
    expect(updated.version).toBe(2);
    // Code 3: InvalidArgument, as for any malformed If-Match.
    await expect(client.updateSession({ id: created.id, state: {} }, { headers: { "x-api-key": key, "if-match": "**" } })).rejects.toMatchObject({ code: 3 });
  });
});
