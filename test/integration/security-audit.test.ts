/**
 * The security audit (issue 17, item 6; docs/decisions.md#security-audit):
 * keys issued (public, admin), scopes changed, keys revoked, channels paused
 * and resumed, the minting switch, members added and removed (channels and
 * sessions) each leave one event, written in the transaction of the change.
 * An owner reads its own events at GET /v1/security/audit; the operator
 * reads every event at GET /v1/admin/audit. Events outlive nothing: the
 * purge deletes them after AGENTBUS_AUDIT_RETENTION_DAYS.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecurityService } from "../../gen/agentbus/v1/security_service_pb.js";
import { Db } from "../../src/store/db.js";
import { purge } from "../../src/store/purge.js";
import { expectError } from "../support/membership.js";
import { rest, startTestServer, type TestServer } from "../support/server.js";

const TOKEN = "audit-operator-token";
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN, AGENTBUS_TRUST_PROXY: "true" });
});
afterAll(async () => {
  await server?.close();
});

interface AuditEventJson {
  id: string;
  occurred_at: string;
  kind: string;
  owner_key_id: string;
  owner_id: string;
  actor_key_id: string;
  subject: string;
  details: Record<string, unknown>;
}

interface Agent {
  key: string;
  keyId: string;
  label: string;
}

async function agent(prefix = "agent"): Promise<Agent> {
  const label = unique(prefix);
  const res = await rest<{ key: string; key_id: string }>(server.url, "POST", "/v1/keys", { body: { agent_label: label } });
  expect(res.status).toBe(201);
  return { key: res.body.key, keyId: res.body.key_id, label };
}

const admin = (method: string, path: string, body?: unknown) => rest<Record<string, unknown>>(server.url, method, path, { body, headers: { "X-Admin-Token": TOKEN } });

async function ownAudit(key: string, query = ""): Promise<{ data: AuditEventJson[]; next_cursor?: string }> {
  const res = await rest<{ data: AuditEventJson[]; next_cursor?: string }>(server.url, "GET", `/v1/security/audit${query}`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function operatorAudit(query: string): Promise<AuditEventJson[]> {
  const res = await admin("GET", `/v1/admin/audit${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as AuditEventJson[];
}

async function channelOf(owner: Agent, access: "open" | "restricted" = "restricted"): Promise<string> {
  const res = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner.key, body: { name: unique("audited"), mode: "broadcast", access } });
  expect(res.status).toBe(201);
  return res.body.id;
}

describe("key events", () => {
  it("records a public mint as key.issued by the key itself", async () => {
    const a = await agent();
    const [event] = (await ownAudit(a.key)).data;
    expect(event).toMatchObject({ kind: "key.issued", owner_id: a.label, actor_key_id: a.keyId, subject: a.keyId, details: { via: "public", scopes: null } });
  });

  it("records an admin mint as key.issued by the operator, with its scopes", async () => {
    const label = unique("fleet");
    const res = await admin("POST", "/v1/admin/keys", { agent_label: label, scopes: ["channels:read", "messages:read"] });
    const [event] = (await ownAudit(res.body.key as string)).data;
    expect(event).toMatchObject({ kind: "key.issued", owner_id: label, actor_key_id: "", details: { via: "admin", scopes: ["channels:read", "messages:read"] } });
  });

  it("records narrowed scopes with the sets before and after", async () => {
    const a = await agent();
    expect((await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: a.key, body: { scopes: ["channels:read"] } })).status).toBe(200);
    const [event] = (await ownAudit(a.key)).data;
    expect(event).toMatchObject({ kind: "key.scopes_changed", actor_key_id: a.keyId, details: { before: null, after: ["channels:read"] } });
  });

  it("records nothing for a refused change: a taken label, a widening", async () => {
    const a = await agent();
    await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: a.key, body: { scopes: ["channels:read"] } });
    const before = (await ownAudit(a.key)).data.length;
    expect((await rest(server.url, "POST", "/v1/keys", { body: { agent_label: a.label } })).status).toBe(409);
    expect((await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: a.key, body: { scopes: ["channels:read", "channels:write"] } })).status).toBe(403);
    expect((await ownAudit(a.key)).data).toHaveLength(before);
  });

  it("records a revocation, which the operator sees for the owner", async () => {
    const a = await agent();
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key: a.key })).status).toBe(200);
    const events = await operatorAudit(`?owner_id=${encodeURIComponent(a.label)}`);
    expect(events.map((e) => e.kind)).toEqual(["key.revoked", "key.issued"]);
  });

  it("writes the event in the change's transaction: when the event cannot be written, the key stays active", async () => {
    const a = await agent();
    // A constraint only this key's revocation event breaks: the INSERT fails inside the revocation's transaction.
    await server.app.pool.query(`ALTER TABLE security_audit ADD CONSTRAINT audit_fault CHECK (subject <> '${a.keyId}' OR kind <> 'key.revoked') NOT VALID`);
    try {
      expect((await rest(server.url, "DELETE", "/v1/keys/me", { key: a.key })).status).toBe(500);
    } finally {
      await server.app.pool.query("ALTER TABLE security_audit DROP CONSTRAINT audit_fault");
    }
    const me = await rest<{ active: boolean }>(server.url, "GET", "/v1/keys/me", { key: a.key });
    expect(me.body.active).toBe(true);
    expect((await ownAudit(a.key)).data.map((e) => e.kind)).toEqual(["key.issued"]);
  });
});

describe("channel events", () => {
  it("records the operator's pause and resume in the channel owner's audit", async () => {
    const owner = await agent();
    const channel = await channelOf(owner);
    expect((await admin("POST", `/v1/admin/channels/${channel}/pause`, {})).status).toBe(200);
    expect((await admin("POST", `/v1/admin/channels/${channel}/resume`, {})).status).toBe(200);
    const events = (await ownAudit(owner.key)).data.filter((e) => e.subject === channel);
    expect(events.map((e) => [e.kind, e.actor_key_id])).toEqual([
      ["channel.resumed", ""],
      ["channel.paused", ""],
    ]);
  });

  it("records members added by the owner, through an invitation and through an approved request, and removed", async () => {
    const owner = await agent();
    const [direct, invited, requester] = [await agent(), await agent(), await agent()];
    const channel = await channelOf(owner);
    expect((await rest(server.url, "POST", `/v1/channels/${channel}/members`, { key: owner.key, body: { key_id: direct.keyId } })).status).toBe(201);
    const invitation = await rest<{ id: string }>(server.url, "POST", `/v1/channels/${channel}/invitations`, { key: owner.key, body: {} });
    expect((await rest(server.url, "GET", `/v1/channel-invitations/${invitation.body.id}`, { key: invited.key })).status).toBe(200);
    const request = await rest<{ request_id: string }>(server.url, "POST", `/v1/channels/${channel}/access-requests`, { key: requester.key, body: { reason: "please" } });
    expect((await rest(server.url, "POST", `/v1/channels/${channel}/access-requests/${request.body.request_id}/approve`, { key: owner.key, body: {} })).status).toBe(200);
    expect((await rest(server.url, "DELETE", `/v1/channels/${channel}/members/${direct.keyId}`, { key: owner.key })).status).toBe(200);
    const events = (await ownAudit(owner.key)).data.filter((e) => e.subject === channel);
    // Never an invitation's id: it is the link's secret.
    expect(JSON.stringify(events)).not.toContain(invitation.body.id);
    expect(events.map((e) => [e.kind, e.details.member_key_id, e.details.via])).toEqual([
      ["channel.member_removed", direct.keyId, "owner"],
      ["channel.member_added", requester.keyId, "access_request"],
      ["channel.member_added", invited.keyId, "invitation"],
      ["channel.member_added", direct.keyId, "owner"],
    ]);
  });
});

describe("session and service events", () => {
  it("records a session's members added and removed", async () => {
    const owner = await agent();
    const other = await agent();
    const session = await rest<{ id: string }>(server.url, "POST", "/v1/sessions", { key: owner.key, body: { name: "shared", state: {} } });
    await rest(server.url, "POST", `/v1/sessions/${session.body.id}/members`, { key: owner.key, body: { key_id: other.keyId } });
    await rest(server.url, "DELETE", `/v1/sessions/${session.body.id}/members/${other.keyId}`, { key: owner.key });
    const events = (await ownAudit(owner.key)).data.filter((e) => e.subject === session.body.id);
    expect(events.map((e) => e.kind)).toEqual(["session.member_removed", "session.member_added"]);
  });

  it("shows the minting switch to the operator only", async () => {
    const a = await agent();
    expect((await admin("POST", "/v1/admin/minting", { enabled: true })).status).toBe(200);
    // Other tests write events at the same time: the newest switch, not the newest event.
    const latest = (await operatorAudit("?limit=100")).find((e) => e.kind === "minting.switched");
    expect(latest).toMatchObject({ kind: "minting.switched", owner_id: "", actor_key_id: "", details: { enabled: true } });
    expect((await ownAudit(a.key)).data.some((e) => e.kind === "minting.switched")).toBe(false);
  });
});

describe("reading the audit", () => {
  it("shows a key minted later with a freed label none of the old key's events", async () => {
    const first = await agent("reused");
    await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: first.key, body: { scopes: ["channels:read"] } });
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key: first.key })).status).toBe(200);
    const again = await rest<{ key: string; key_id: string }>(server.url, "POST", "/v1/keys", { body: { agent_label: first.label } });
    const events = (await ownAudit(again.body.key)).data;
    expect(events.map((e) => [e.kind, e.subject])).toEqual([["key.issued", again.body.key_id]]);
  });

  it("shows an owner only its own events", async () => {
    const a = await agent();
    const b = await agent();
    const seen = (await ownAudit(b.key)).data;
    expect(seen.every((e) => e.owner_id === b.label && e.owner_key_id === b.keyId)).toBe(true);
    expect(seen.some((e) => e.subject === a.keyId)).toBe(false);
  });

  it("pages newest first with next_cursor, and refuses a cursor it did not give (422 invalid_cursor)", async () => {
    const a = await agent();
    for (const scopes of [["channels:read", "messages:read"], ["channels:read"]]) {
      await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: a.key, body: { scopes } });
    }
    const first = await ownAudit(a.key, "?limit=2");
    expect(first.data.map((e) => e.kind)).toEqual(["key.scopes_changed", "key.scopes_changed"]);
    const second = await ownAudit(a.key, `?limit=2&cursor=${first.next_cursor}`);
    expect(second.data.map((e) => e.kind)).toEqual(["key.issued"]);
    expect(second.next_cursor ?? null).toBeNull();
    expectError(await rest(server.url, "GET", "/v1/security/audit?cursor=yesterday", { key: a.key }), 422, "invalid_cursor");
  });

  it("answers over gRPC", async () => {
    const a = await agent();
    const client = createClient(SecurityService, createGrpcTransport({ baseUrl: server.url }));
    const page = await client.listSecurityAudit({}, { headers: { "x-api-key": a.key } });
    expect(page.data.map((e) => e.kind)).toEqual(["key.issued"]);
  });

  it("needs the admin token for every owner's events", async () => {
    const a = await agent();
    expect((await rest(server.url, "GET", "/v1/admin/audit", { key: a.key })).status).toBe(401);
  });
});

describe("retention", () => {
  it("deletes events older than the retention period and keeps the rest", async () => {
    const a = await agent();
    await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: a.key, body: { scopes: ["channels:read"] } });
    await server.app.pool.query("UPDATE security_audit SET occurred_at = now() - interval '3 days' WHERE subject = $1 AND kind = 'key.issued'", [a.keyId]);
    const counts = await purge(new Db(server.app.pool), Date.now() * 1000, { auditRetentionDays: 2 });
    expect(counts.deletedAuditEvents).toBeGreaterThanOrEqual(1);
    expect((await ownAudit(a.key)).data.map((e) => e.kind)).toEqual(["key.scopes_changed"]);
  });
});
