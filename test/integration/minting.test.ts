/**
 * Operator key control (issue 17, items 1 and 2): POST /v1/admin/keys issues
 * keys whatever the switch says, POST /v1/admin/minting opens and closes
 * POST /v1/keys, the switch lives in the database (every replica, every
 * restart) and /health reports it; its default comes from configuration.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { expectError } from "../support/membership.js";
import { rest, startTestServer, type TestServer } from "../support/server.js";

const TOKEN = "operator-secret-token";
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN });
});
afterAll(async () => {
  await server?.close();
});

const admin = (base: string, method: string, path: string, body?: unknown) => rest<Record<string, unknown>>(base, method, path, { body, headers: { "X-Admin-Token": TOKEN } });
const mintPublic = (base: string) => rest<Record<string, unknown>>(base, "POST", "/v1/keys", { body: { agent_label: unique("public") } });
const setMinting = (base: string, enabled: boolean) => admin(base, "POST", "/v1/admin/minting", { enabled });

describe("POST /v1/admin/keys", () => {
  it("issues a key with the body POST /v1/keys answers (201), and the key works", async () => {
    const label = unique("fleet");
    const res = await admin(server.url, "POST", "/v1/admin/keys", { agent_label: label });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(Object.keys((await mintPublic(server.url)).body).sort());
    expect(res.body).toMatchObject({ agent_label: label, owner_id: label, key_id: expect.stringMatching(/^ak_/) });
    const me = await rest<{ agent_label: string }>(server.url, "GET", "/v1/keys/me", { key: res.body.key as string });
    expect(me.body.agent_label).toBe(label);
  });

  it("needs the admin token", async () => {
    expectError(await rest(server.url, "POST", "/v1/admin/keys", { body: { agent_label: unique("x") } }), 401, "admin_unauthorized");
    expectError(await rest(server.url, "POST", "/v1/admin/keys", { body: { agent_label: unique("x") }, headers: { "X-Admin-Token": "wrong" } }), 401, "admin_unauthorized");
  });

  it("refuses a bad label as POST /v1/keys does", async () => {
    expectError(await admin(server.url, "POST", "/v1/admin/keys", { agent_label: "   " }), 422, "missing_field");
  });
});

describe("the public-minting switch", () => {
  it("closes POST /v1/keys (403 minting_closed with a suggestion) while admin minting goes on, and opens it again", async () => {
    expect((await setMinting(server.url, false)).body).toEqual({ public_minting_enabled: false });
    try {
      const refused = expectError(await mintPublic(server.url), 403, "minting_closed");
      expect(refused.suggestion).toMatch(/admin\/keys/);
      expect((await admin(server.url, "POST", "/v1/admin/keys", { agent_label: unique("fleet") })).status).toBe(201);
      expect((await admin(server.url, "GET", "/v1/admin/minting")).body).toEqual({ public_minting_enabled: false });
      expect((await rest<{ public_minting_enabled: boolean }>(server.url, "GET", "/health")).body.public_minting_enabled).toBe(false);
    } finally {
      expect((await setMinting(server.url, true)).body).toEqual({ public_minting_enabled: true });
    }
    expect((await mintPublic(server.url)).status).toBe(201);
    expect((await rest<{ public_minting_enabled: boolean }>(server.url, "GET", "/health")).body.public_minting_enabled).toBe(true);
  });

  it("holds for every replica and after a restart: it lives in the database", async () => {
    const first = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN });
    try {
      const replica = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN, DATABASE_URL: first.databaseUrl });
      try {
        await setMinting(first.url, false);
        expectError(await mintPublic(replica.url), 403, "minting_closed");
      } finally {
        await replica.close();
      }
      const restarted = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN, DATABASE_URL: first.databaseUrl });
      try {
        expectError(await mintPublic(restarted.url), 403, "minting_closed");
      } finally {
        await restarted.close();
      }
    } finally {
      await first.close();
    }
  });

  it("starts closed when AGENTBUS_PUBLIC_MINTING=false, until the operator opens it", async () => {
    const closed = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN, AGENTBUS_PUBLIC_MINTING: "false" });
    try {
      expectError(await mintPublic(closed.url), 403, "minting_closed");
      expect((await rest<{ public_minting_enabled: boolean }>(closed.url, "GET", "/health")).body.public_minting_enabled).toBe(false);
      await setMinting(closed.url, true);
      expect((await mintPublic(closed.url)).status).toBe(201);
    } finally {
      await closed.close();
    }
  });

  it("needs 'enabled' (422 missing_field)", async () => {
    expectError(await admin(server.url, "POST", "/v1/admin/minting", {}), 422, "missing_field");
  });

  it("works over gRPC, and a closed service refuses CreateKey there with PermissionDenied minting_closed", async () => {
    const transport = createGrpcTransport({ baseUrl: server.url });
    const client = createClient(AdminService, transport);
    const headers = { "x-admin-token": TOKEN };
    expect((await client.setPublicMinting({ enabled: false }, { headers })).publicMintingEnabled).toBe(false);
    try {
      const { KeyService } = await import("../../gen/agentbus/v1/key_service_pb.js");
      const err = await createClient(KeyService, transport)
        .createKey({ agentLabel: unique("grpc") })
        .catch((e: unknown) => e);
      expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
      expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("minting_closed");
      expect((await client.createKey({ agentLabel: unique("grpc-fleet") }, { headers })).keyId).toMatch(/^ak_/);
    } finally {
      await client.setPublicMinting({ enabled: true }, { headers });
    }
  });
});
