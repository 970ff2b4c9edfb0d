/**
 * A revoked or narrowed key's open calls end (issue 26, F5;
 * docs/decisions.md#revocation): watch streams over Server-Sent Events and
 * gRPC, and long-polls, end within seconds of `DELETE /v1/keys/me` or of
 * narrowing the key's scopes, on the replica where it happened and on
 * another one; and even a change nobody announced (made in the database
 * directly) ends them within the key cache's lifetime.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, untilParked, type TestServer } from "../support/server.js";

const clock = new AdjustableClock();
let a: TestServer;
let b: TestServer;
let owner: string;
let ch: string;
beforeAll(async () => {
  a = await startTestServer({}, { clock });
  b = await startTestServer({ DATABASE_URL: a.databaseUrl }, { clock });
  owner = await mintKey(a.url, "revocation-owner");
  ch = await createChannel(a.url, owner, { mode: "broadcast" });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

/** Opens an SSE watch and resolves with the error event that ends it (or undefined when it ends otherwise), and how long after `since` that came. */
async function sseUntilEnd(base: string, key: string): Promise<{ opened: Promise<void>; ended: Promise<{ error: Record<string, unknown> | undefined; at: number }> }> {
  const res = await fetch(`${base}/v1/channels/${ch}/messages:stream`, { headers: { "X-API-Key": key }, signal: AbortSignal.timeout(20_000) });
  expect(res.status).toBe(200);
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const ended = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let error: Record<string, unknown> | undefined;
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.includes("event: open")) open();
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (block.includes("event: error") && data) error = JSON.parse(data) as Record<string, unknown>;
      }
    }
    return { error, at: performance.now() };
  })();
  return { opened, ended };
}

/** A key of its own for one test, with the channel readable. */
const freshKey = (label: string) => mintKey(a.url, `${label}-${Math.random().toString(36).slice(2, 8)}`);

describe("an open watch stream over Server-Sent Events", () => {
  it.each([
    ["the same replica", () => a],
    ["another replica", () => b],
  ])("on %s ends with event: error unauthorized within seconds of DELETE /v1/keys/me", async (_where, server) => {
    const key = await freshKey("sse-revoked");
    const watch = await sseUntilEnd(server().url, key);
    await watch.opened;
    const revokedAt = performance.now();
    expect((await rest(a.url, "DELETE", "/v1/keys/me", { key })).status).toBe(200);
    const { error, at } = await watch.ended;
    expect(error).toMatchObject({ error: "unauthorized" });
    expect(at - revokedAt).toBeLessThan(5_000);
  });

  it("ends with event: error insufficient_scope when the key gives up messages:read", async () => {
    const key = await freshKey("sse-narrowed");
    const watch = await sseUntilEnd(b.url, key);
    await watch.opened;
    expect((await rest(a.url, "PUT", "/v1/keys/me/scopes", { key, body: { scopes: ["messages:write"] } })).status).toBe(200);
    expect((await watch.ended).error).toMatchObject({ error: "insufficient_scope" });
  });

  it("keeps a stream whose key narrows to scopes it still needs", async () => {
    const key = await freshKey("sse-kept");
    const watch = await sseUntilEnd(b.url, key);
    await watch.opened;
    expect((await rest(a.url, "PUT", "/v1/keys/me/scopes", { key, body: { scopes: ["messages:read", "channels:read"] } })).status).toBe(200);
    const outcome = await Promise.race([watch.ended.then(() => "ended"), new Promise((r) => setTimeout(() => r("open"), 1_500))]);
    expect(outcome).toBe("open");
  });
});

describe("an open gRPC WatchMessages stream", () => {
  const watchUntilEnd = (server: TestServer, key: string) => {
    const messages = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    return (async () => {
      try {
        for await (const _ of messages.watchMessages({ identifier: ch }, { headers: { "x-api-key": key }, timeoutMs: 20_000 })) void _;
        return undefined;
      } catch (err) {
        return ConnectError.from(err);
      }
    })();
  };

  it("ends with UNAUTHENTICATED on another replica when the key is revoked", async () => {
    const key = await freshKey("grpc-revoked");
    const ended = watchUntilEnd(b, key);
    await untilParked(b, 1);
    await rest(a.url, "DELETE", "/v1/keys/me", { key });
    const err = await ended;
    expect(err?.code).toBe(Code.Unauthenticated);
    expect(err?.findDetails(ErrorDetailSchema)[0]?.error).toBe("unauthorized");
  });

  it("ends with PERMISSION_DENIED when the key is narrowed below messages:read", async () => {
    const key = await freshKey("grpc-narrowed");
    const ended = watchUntilEnd(b, key);
    await untilParked(b, 1);
    await rest(a.url, "PUT", "/v1/keys/me/scopes", { key, body: { scopes: ["channels:read"] } });
    const err = await ended;
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.findDetails(ErrorDetailSchema)[0]?.error).toBe("insufficient_scope");
  });
});

describe("a waiting long-poll", () => {
  it("is answered 401 unauthorized on another replica when its key is revoked, not with an empty page at the end of its wait", async () => {
    const key = await freshKey("poll-revoked");
    const started = performance.now();
    const waiting = rest(b.url, "GET", `/v1/channels/${ch}/messages?wait=20`, { key });
    await untilParked(b, 1);
    await rest(a.url, "DELETE", "/v1/keys/me", { key });
    const res = await waiting;
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: "unauthorized" });
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe("a change nobody announced", () => {
  let sql: pg.Client;
  beforeAll(async () => {
    const { default: pgModule } = await import("pg");
    sql = new pgModule.Client({ connectionString: a.databaseUrl });
    await sql.connect();
  });
  afterAll(async () => sql.end());

  it("still ends the stream once the key cache's lifetime has passed", async () => {
    const key = await freshKey("sse-unannounced");
    const watch = await sseUntilEnd(b.url, key);
    await watch.opened;
    await sql.query("UPDATE api_keys SET revoked_at = now() WHERE key_id = $1", [key.split(".")[0]]);
    // The cached lookup is trusted for 5 s of the service's clock; the stream's own re-check, every 5 s, then reads the database.
    clock.advanceSeconds(6);
    try {
      expect((await watch.ended).error).toMatchObject({ error: "unauthorized" });
    } finally {
      clock.reset();
    }
  }, 20_000);
});
