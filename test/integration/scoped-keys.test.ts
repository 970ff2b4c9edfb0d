/**
 * Scoped keys (issue 17, item 3; docs/decisions.md#scopes): the operator
 * mints keys with scopes, a key narrows its own scopes but never widens
 * them, and the call pipeline refuses a call whose scope the key does not
 * hold, over REST and gRPC alike (MCP calls REST: mcp.test.ts). The scope of
 * every RPC is in the proto; the authorization matrix checks each one.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { KEY_SCOPES } from "../../src/model/scopes.js";
import { expectError } from "../support/membership.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

const TOKEN = "scopes-operator-token";
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN });
});
afterAll(async () => {
  await server?.close();
});

interface IssuedKeyJson {
  key: string;
  key_id: string;
  scopes: string[];
  scopes_restricted: boolean;
}

async function mintScoped(scopes: string[]): Promise<IssuedKeyJson> {
  const res = await rest<IssuedKeyJson>(server.url, "POST", "/v1/admin/keys", { body: { agent_label: unique("scoped"), scopes }, headers: { "X-Admin-Token": TOKEN } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

const narrow = (key: string, scopes: unknown) => rest<Record<string, unknown>>(server.url, "PUT", "/v1/keys/me/scopes", { key, body: { scopes } });

async function openChannel(key: string): Promise<string> {
  const res = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: unique("scoped"), mode: "broadcast" } });
  expect(res.status).toBe(201);
  return res.body.id;
}

describe("minting scoped keys", () => {
  it("issues a key with the scopes asked for, in catalogue order, marked restricted", async () => {
    const issued = await mintScoped(["messages:claim", "messages:read"]);
    expect(issued.scopes).toEqual(["messages:read", "messages:claim"]);
    expect(issued.scopes_restricted).toBe(true);
  });

  it("gives a key minted without scopes every scope, unrestricted", async () => {
    const res = await rest<IssuedKeyJson>(server.url, "POST", "/v1/keys", { body: { agent_label: unique("plain") } });
    expect(res.body.scopes).toEqual([...KEY_SCOPES]);
    expect(res.body.scopes_restricted).toBe(false);
  });

  it("refuses an unknown scope with 422 invalid_scopes listing the valid ones", async () => {
    const res = await rest(server.url, "POST", "/v1/admin/keys", { body: { agent_label: unique("bad"), scopes: ["messages:read", "root"] }, headers: { "X-Admin-Token": TOKEN } });
    const body = expectError(res, 422, "invalid_scopes");
    expect(body.valid_scopes).toEqual([...KEY_SCOPES]);
  });
});

describe("enforcement", () => {
  it("lets a key call what its scopes allow", async () => {
    const owner = await mintKey(server.url);
    const channel = await openChannel(owner);
    const reader = await mintScoped(["messages:read"]);
    const res = await rest(server.url, "GET", `/v1/channels/${channel}/messages`, { key: reader.key });
    expect(res.status).toBe(200);
  });

  it("refuses a call outside the key's scopes with 403 insufficient_scope, naming the scope needed and those held", async () => {
    const owner = await mintKey(server.url);
    const channel = await openChannel(owner);
    const reader = await mintScoped(["messages:read"]);
    const res = await rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key: reader.key, body: { content: "not allowed" } });
    const body = expectError(res, 403, "insufficient_scope");
    expect(body).toMatchObject({ required_scope: "messages:write", granted_scopes: ["messages:read"] });
    const listed = await rest<{ data: unknown[] }>(server.url, "GET", `/v1/channels/${channel}/messages`, { key: owner });
    expect(listed.body.data).toEqual([]);
  });

  it("refuses over gRPC with PermissionDenied and the same error detail", async () => {
    const reader = await mintScoped(["messages:read"]);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const err = await client.createMessage({ identifier: "anything", content: "x" }, { headers: { "x-api-key": reader.key } }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.findDetails(ErrorDetailSchema)[0]?.error).toBe("insufficient_scope");
  });

  it("refuses the async jobs and sessions to a key without their scopes", async () => {
    const reader = await mintScoped(["messages:read"]);
    expectError(await rest(server.url, "POST", "/v1/jobs/parse", { key: reader.key, body: { url: "https://example.com/job" } }), 403, "insufficient_scope");
    expectError(await rest(server.url, "POST", "/v1/sessions", { key: reader.key, body: { name: "plan", state: {} } }), 403, "insufficient_scope");
    expectError(await rest(server.url, "GET", "/v1/security/audit", { key: reader.key }), 403, "insufficient_scope");
  });

  it("lets any key read, narrow and revoke itself, whatever its scopes", async () => {
    const jobsOnly = await mintScoped(["jobs:submit"]);
    const me = await rest<{ scopes: string[]; scopes_restricted: boolean }>(server.url, "GET", "/v1/keys/me", { key: jobsOnly.key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ scopes: ["jobs:submit"], scopes_restricted: true });
    expect((await narrow(jobsOnly.key, ["jobs:submit"])).status).toBe(200);
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key: jobsOnly.key })).status).toBe(200);
  });
});

describe("PUT /v1/keys/me/scopes", () => {
  it("narrows the key's scopes, and the next call is judged by the new set", async () => {
    const owner = await mintKey(server.url);
    const channel = await openChannel(owner);
    const res = await narrow(owner, ["messages:read", "channels:read"]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ scopes: ["channels:read", "messages:read"], scopes_restricted: true });
    expect((await rest(server.url, "GET", `/v1/channels/${channel}/messages`, { key: owner })).status).toBe(200);
    expectError(await rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "x" } }), 403, "insufficient_scope");
  });

  it("refuses to widen with 403 scope_widening and changes nothing", async () => {
    const reader = await mintScoped(["messages:read"]);
    const body = expectError(await narrow(reader.key, ["messages:read", "messages:write"]), 403, "scope_widening");
    expect(body).toMatchObject({ granted_scopes: ["messages:read"] });
    const me = await rest<{ scopes: string[] }>(server.url, "GET", "/v1/keys/me", { key: reader.key });
    expect(me.body.scopes).toEqual(["messages:read"]);
  });

  it("refuses an unknown scope (422 invalid_scopes) and an empty list (422 missing_field)", async () => {
    const key = await mintKey(server.url);
    expectError(await narrow(key, ["messages:read", "everything"]), 422, "invalid_scopes");
    expectError(await narrow(key, []), 422, "missing_field");
  });

  it("lets only one of two concurrent narrowings to different sets win: neither gives back what the other gave up", async () => {
    for (let round = 0; round < 5; round++) {
      const key = await mintKey(server.url);
      const [a, b] = await Promise.all([narrow(key, ["messages:read", "messages:write"]), narrow(key, ["messages:read", "messages:claim"])]);
      expect([a.status, b.status].sort()).toEqual([200, 403]);
      const loser = a.status === 403 ? a : b;
      expect(loser.body.error).toBe("scope_widening");
      const me = await rest<{ scopes: string[] }>(server.url, "GET", "/v1/keys/me", { key });
      expect(me.body.scopes).toEqual((a.status === 200 ? a : b).body.scopes);
    }
  });

  it("narrows over gRPC too", async () => {
    const key = await mintKey(server.url);
    const client = createClient(KeyService, createGrpcTransport({ baseUrl: server.url }));
    const info = await client.setCurrentKeyScopes({ scopes: ["sessions:read"] }, { headers: { "x-api-key": key } });
    expect(info.scopes).toEqual(["sessions:read"]);
    expect(info.scopesRestricted).toBe(true);
  });
});
