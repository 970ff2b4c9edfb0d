/** AdminService (docs/decisions.md#pause): operator pause and resume behind X-Admin-Token, over REST and gRPC. */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, listMessages, postMessage } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

const TOKEN = "operator-secret-token";

let server: TestServer;
let disabled: TestServer;
beforeAll(async () => {
  [server, disabled] = await Promise.all([startTestServer({ AGENTBUS_ADMIN_TOKEN: TOKEN }), startTestServer()]);
});
afterAll(async () => {
  await Promise.all([server?.close(), disabled?.close()]);
});

/** An admin call; token null sends no X-Admin-Token header. */
const admin = (base: string, action: "pause" | "resume", identifier: string, token: string | null = TOKEN) =>
  rest(base, "POST", `/v1/admin/channels/${encodeURIComponent(identifier)}/${action}`, {
    body: {},
    headers: token === null ? {} : { "X-Admin-Token": token },
  });

const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

describe("admin authorisation", () => {
  it("answers 403 admin_disabled when AGENTBUS_ADMIN_TOKEN is not set, whatever token is sent", async () => {
    const key = await mintKey(disabled.url);
    const ch = await createChannel(disabled.url, key);
    for (const token of [null, TOKEN]) {
      const res = await admin(disabled.url, "pause", ch, token);
      expect(res.status).toBe(403);
      expect(res.body.error).toBe("admin_disabled");
    }
  });

  it("answers 401 admin_unauthorized to a wrong or missing token", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    for (const token of [null, "", "wrong", `${TOKEN}x`]) {
      const res = await admin(server.url, "pause", ch, token);
      expect(res.status).toBe(401);
      expect(res.body.error).toBe("admin_unauthorized");
    }
    const channel = await rest(server.url, "GET", `/v1/channels/${ch}`, { key });
    expect(channel.body.paused).toBe(false);
  });

  it("does not accept an API key in place of the admin token", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const res = await rest(server.url, "POST", `/v1/admin/channels/${ch}/pause`, { key, body: {} });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("admin_unauthorized");
  });
});

describe("pause and resume over REST", () => {
  it("pauses any channel and answers 200 with the Channel exactly as GET renders it", async () => {
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { description: "ops" });
    const res = await admin(server.url, "pause", ch);
    expect(res.status).toBe(200);
    expect(res.body.paused).toBe(true);
    const got = await rest(server.url, "GET", `/v1/channels/${ch}`, { key: owner });
    expect(res.body).toEqual(got.body);
  });

  it("refuses writes to a paused channel with 503 channel_paused and Retry-After", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    expect((await admin(server.url, "pause", ch)).status).toBe(200);
    const res = await rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "blocked" } });
    expect(res.status).toBe(503);
    expect(res.body.error).toBe("channel_paused");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("keeps reads, claims and acks working while paused", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key, { mode: "claimable" });
    const message = await postMessage(server.url, key, ch, { content: "before the pause" });
    expect((await admin(server.url, "pause", ch)).status).toBe(200);
    expect((await listMessages(server.url, key, ch)).data.map((m) => m.id)).toEqual([message.id]);
    expect((await rest(server.url, "GET", `/v1/channels/${ch}`, { key })).status).toBe(200);
    const claim = await rest(server.url, "POST", `/v1/messages/${message.id}/claim`, { key });
    expect(claim.status).toBe(200);
    expect(claim.body.status).toBe("claimed");
    const ack = await rest(server.url, "POST", `/v1/messages/${message.id}/ack`, { key });
    expect(ack.status).toBe(200);
    expect(ack.body.status).toBe("acknowledged");
  });

  it("accepts writes again after resume", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    await admin(server.url, "pause", ch);
    const res = await admin(server.url, "resume", ch);
    expect(res.status).toBe(200);
    expect(res.body.paused).toBe(false);
    await postMessage(server.url, key, ch, { content: "flowing again" });
  });

  it("is idempotent: pausing a paused channel changes nothing, not even updated_at", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const first = await admin(server.url, "pause", ch);
    const second = await admin(server.url, "pause", ch);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    const resumed = await admin(server.url, "resume", ch);
    const again = await admin(server.url, "resume", ch);
    expect(again.body).toEqual(resumed.body);
    expect((resumed.body.updated_at as string) > (first.body.updated_at as string)).toBe(true);
  });

  it("finds the channel by alias", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const alias = `ops-${Math.random().toString(36).slice(2, 8)}`;
    expect((await rest(server.url, "POST", `/v1/channels/${ch}/aliases`, { key, body: { alias } })).status).toBe(201);
    const res = await admin(server.url, "pause", alias);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(ch);
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    for (const identifier of ["no-such-channel", "00000000-0000-4000-8000-000000000000"]) {
      const res = await admin(server.url, "resume", identifier);
      expect(res.status).toBe(404);
      expect(res.body.error).toBe("channel_not_found");
    }
  });
});

describe("pause and resume over gRPC", () => {
  it("pauses and resumes with x-admin-token metadata, with the same effect on writes", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const transport = createGrpcTransport({ baseUrl: server.url });
    const adminClient = createClient(AdminService, transport);
    const messages = createClient(MessageService, transport);
    const paused = await adminClient.pauseChannel({ identifier: ch }, { headers: { "x-admin-token": TOKEN } });
    expect(paused.paused).toBe(true);
    expect(paused.id).toBe(ch);
    const err = await messages.createMessage({ identifier: ch, content: "blocked" }, { headers: { "x-api-key": key } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.Unavailable);
    expect(errorCode(err)).toBe("channel_paused");
    const resumed = await adminClient.resumeChannel({ identifier: ch }, { headers: { "x-admin-token": TOKEN } });
    expect(resumed.paused).toBe(false);
    const created = await messages.createMessage({ identifier: ch, content: "ok" }, { headers: { "x-api-key": key } });
    expect(created.message?.content).toBe("ok");
  });

  it("reports a wrong token as Unauthenticated and a disabled instance as PermissionDenied", async () => {
    const wrong = await createClient(AdminService, createGrpcTransport({ baseUrl: server.url }))
      .pauseChannel({ identifier: "x" }, { headers: { "x-admin-token": "wrong" } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(wrong).code).toBe(Code.Unauthenticated);
    expect(errorCode(wrong)).toBe("admin_unauthorized");
    const off = await createClient(AdminService, createGrpcTransport({ baseUrl: disabled.url }))
      .pauseChannel({ identifier: "x" }, { headers: { "x-admin-token": TOKEN } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(off).code).toBe(Code.PermissionDenied);
    expect(errorCode(off)).toBe("admin_disabled");
  });

  it("answers NotFound for an unknown channel", async () => {
    const err = await createClient(AdminService, createGrpcTransport({ baseUrl: server.url }))
      .resumeChannel({ identifier: "no-such-channel" }, { headers: { "x-admin-token": TOKEN } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.NotFound);
    expect(errorCode(err)).toBe("channel_not_found");
  });
});
