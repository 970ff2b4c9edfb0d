/**
 * The Idempotency-Key mechanism (docs/decisions.md#idempotency) of the call pipeline on a real
 * PostgreSQL, with stand-in handlers whose timing the tests control: what a
 * duplicate does while the first request is still running, after it failed,
 * after it timed out, and that record and effects commit together.
 * The same behaviours through the real server and real handlers, over REST
 * and gRPC, are in idempotency.test.ts.
 */
import { create, type DescMethod, type JsonObject, type Message } from "@bufbuild/protobuf";
import { createContextValues, createHandlerContext } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService, CreateChannelRequestSchema, DeleteChannelRequestSchema, GetChannelRequestSchema } from "../../gen/agentbus/v1/channel_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { ApiError } from "../../src/model/errors.js";
import { createKeys } from "../../src/app.js";
import { FixedWindowLimiter } from "../../src/domain/rate-limit.js";
import { systemClock } from "../../src/model/time.js";
import { callerOf, httpStatusKey } from "../../src/protocol/context.js";
import { CallPipeline } from "../../src/server/rpc/pipeline.js";
import { serviceEntry } from "../../src/protocol/service-entry.js";
import { Db } from "../../src/store/db.js";
import { PgIdempotencyStore } from "../../src/store/idempotency.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { untilWaitingForLock } from "../support/locks.js";

const LOCK_TIMEOUT_MS = 400;

let database: TestDatabase;
let db: Db;
let pipeline: CallPipeline;
let key: string;
let otherKey: string;

/** Lets a test hold the stand-in handler for a channel name until it says so. */
const gates = new Map<string, Promise<void>>();
/** Tells a test that the handler for a channel name has reached its gate (its row lock is taken). */
const arrivals = new Map<string, () => void>();
let handlerLockTimeout: string | undefined;

const method = (service: typeof ChannelService, name: string): DescMethod => {
  const found = service.methods.find((m) => m.name === name);
  if (!found) throw new Error(name);
  return found;
};
const createChannel = method(ChannelService, "CreateChannel");
const deleteChannel = method(ChannelService, "DeleteChannel");
const getChannel = method(ChannelService, "GetChannel");

beforeAll(async () => {
  database = await createTestDatabase({ max: 20 });
  db = new Db(database.pool);
  await db.query("CREATE TABLE effects (id uuid PRIMARY KEY, key_id text NOT NULL, name text NOT NULL)");
  const { keys } = createKeys(db, systemClock, 5_000);
  key = (await keys.issue(`idem-${randomUUID()}`)).key;
  otherKey = (await keys.issue(`idem-${randomUUID()}`)).key;
  pipeline = new CallPipeline(
    [
      serviceEntry(ChannelService, {
        // Writes one row, then may wait for the test, then fails on request.
        async createChannel(request, ctx) {
          const id = randomUUID();
          await db.query("INSERT INTO effects (id, key_id, name) VALUES ($1, $2, $3)", [id, callerOf(ctx).keyId, request.name]);
          handlerLockTimeout = (await db.query<{ lock_timeout: string }>("SHOW lock_timeout")).rows[0]?.lock_timeout;
          arrivals.get(request.name ?? "")?.();
          await gates.get(request.name ?? "");
          if (request.name === "fail") throw new ApiError("invalid_channel_name");
          if (request.name === "accepted") ctx.values.set(httpStatusKey, 202);
          return { id, name: request.name ?? "", mode: request.mode, metadataSchema: request.metadataSchema ?? {} };
        },
        async deleteChannel() {
          await db.query("INSERT INTO effects (id, key_id, name) VALUES ($1, 'delete', 'delete')", [randomUUID()]);
          return {};
        },
        async getChannel(request) {
          await db.query("INSERT INTO effects (id, key_id, name) VALUES ($1, 'read', $2)", [randomUUID(), request.identifier]);
          return { id: request.identifier };
        },
      }),
      serviceEntry(KeyService, {}),
    ],
    {
      idempotencyStore: new PgIdempotencyStore(db),
      keys,
      adminToken: undefined,
      rateLimiter: new FixedWindowLimiter(0, 60_000, systemClock),
      reportInternal: (err) => {
        throw err;
      },
      idempotency: { lockTimeoutMs: LOCK_TIMEOUT_MS },
    },
  );
});

afterAll(async () => {
  await database?.drop();
});

beforeEach(() => {
  gates.clear();
  arrivals.clear();
});

interface Outcome {
  response?: Message & Record<string, unknown>;
  error?: ApiError;
  status: number | undefined;
  headers: Headers;
}

async function call(m: DescMethod, request: Message, headers: Record<string, string>): Promise<Outcome> {
  const ctx = createHandlerContext({
    service: m.parent,
    method: m,
    protocolName: "test",
    requestMethod: "POST",
    url: "http://test/",
    requestHeader: headers,
    contextValues: createContextValues(),
  });
  try {
    const response = (await pipeline.callUnary(m, request, ctx)) as Message & Record<string, unknown>;
    return { response, status: ctx.values.get(httpStatusKey), headers: ctx.responseHeader };
  } catch (err) {
    return { error: err as ApiError, status: (err as ApiError).status, headers: ctx.responseHeader };
  }
}

const channelRequest = (name: string, extra: { metadataSchema?: JsonObject } = {}) =>
  create(CreateChannelRequestSchema, { name, mode: ChannelMode.BROADCAST, ...extra });

const keyed = (idempotencyKey: string, apiKey = key) => ({ "x-api-key": apiKey, "idempotency-key": idempotencyKey });

async function effectsNamed(name: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM effects WHERE name = $1", [name]);
  return rows[0]?.n ?? 0;
}

/** Holds the handler for `name` at its gate; `entered` settles once a call has reached it. */
function holdHandler(name: string): { release: () => void; entered: Promise<void> } {
  let release!: () => void;
  gates.set(name, new Promise<void>((resolve) => (release = resolve)));
  const entered = new Promise<void>((resolve) => arrivals.set(name, resolve));
  return { release, entered };
}


describe("Idempotency-Key in the call pipeline", () => {
  it("replays the stored response without running the handler again", async () => {
    const name = `replay-${randomUUID()}`;
    const first = await call(createChannel, channelRequest(name), keyed(name));
    const again = await call(createChannel, channelRequest(name), keyed(name));
    expect(first.error).toBeUndefined();
    expect(again.response).toEqual(first.response);
    expect(again.status).toBe(201);
    expect(again.headers.get("x-idempotent-replay")).toBe("true");
    expect(first.headers.get("x-idempotent-replay")).toBeNull();
    expect(await effectsNamed(name)).toBe(1);
  });

  it("replays the status the handler chose, not the method default", async () => {
    const k = `status-${randomUUID()}`;
    await call(createChannel, channelRequest("accepted"), keyed(k));
    const again = await call(createChannel, channelRequest("accepted"), keyed(k));
    expect(again.status).toBe(202);
  });

  it("stores a 204 response with an empty body", async () => {
    const k = `delete-${randomUUID()}`;
    const request = create(DeleteChannelRequestSchema, { identifier: "c1" });
    const before = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM effects WHERE key_id = 'delete'")).rows[0]?.n;
    await call(deleteChannel, request, keyed(k));
    const again = await call(deleteChannel, request, keyed(k));
    expect(again.status).toBe(204);
    expect(again.headers.get("x-idempotent-replay")).toBe("true");
    const after = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM effects WHERE key_id = 'delete'")).rows[0]?.n;
    expect(after).toBe((before ?? 0) + 1);
  });

  it("echoes Idempotency-Key on the first response and on the replay", async () => {
    const k = `echo-${randomUUID()}`;
    const first = await call(createChannel, channelRequest(k), keyed(k));
    const again = await call(createChannel, channelRequest(k), keyed(k));
    expect(first.headers.get("idempotency-key")).toBe(k);
    expect(again.headers.get("idempotency-key")).toBe(k);
  });

  it("makes a duplicate that arrives while the first runs wait, then replay its result", async () => {
    const name = `concurrent-${randomUUID()}`;
    const { release, entered } = holdHandler(name);
    const first = call(createChannel, channelRequest(name), keyed(name));
    await entered;
    const duplicate = call(createChannel, channelRequest(name), keyed(name));
    await untilWaitingForLock(database.pool);
    release();
    const [a, b] = await Promise.all([first, duplicate]);
    expect(a.error).toBeUndefined();
    expect(b.error).toBeUndefined();
    expect(b.response).toEqual(a.response);
    expect(b.headers.get("x-idempotent-replay")).toBe("true");
    expect(await effectsNamed(name)).toBe(1);
  });

  it("answers 409 idempotency_in_progress to a duplicate that waits longer than the lock timeout", async () => {
    const name = `slow-${randomUUID()}`;
    const { release, entered } = holdHandler(name);
    const first = call(createChannel, channelRequest(name), keyed(name));
    await entered;
    const started = Date.now();
    const duplicate = await call(createChannel, channelRequest(name), keyed(name));
    const waited = Date.now() - started;
    release();
    expect(duplicate.error?.code).toBe("idempotency_in_progress");
    expect(duplicate.error?.headers["Retry-After"]).toBe("1");
    expect(waited).toBeGreaterThanOrEqual(LOCK_TIMEOUT_MS - 50);
    expect((await first).error).toBeUndefined();
    expect(await effectsNamed(name)).toBe(1);
  });

  it("lets a waiting duplicate run the handler itself when the first request fails", async () => {
    const k = `retry-after-failure-${randomUUID()}`;
    const { release, entered } = holdHandler("fail");
    const failing = call(createChannel, channelRequest("fail"), keyed(k));
    await entered;
    const corrected = call(createChannel, channelRequest("fail-then-ok"), keyed(k));
    await untilWaitingForLock(database.pool);
    release();
    expect((await failing).error?.code).toBe("invalid_channel_name");
    const ok = await corrected;
    expect(ok.error).toBeUndefined();
    expect(ok.headers.get("x-idempotent-replay")).toBeNull();
  });

  it("does not store a failed request, and rolls back the handler's writes with it", async () => {
    const k = `failed-${randomUUID()}`;
    const failed = await call(createChannel, channelRequest("fail"), keyed(k));
    expect(failed.error?.code).toBe("invalid_channel_name");
    const { rows } = await db.query("SELECT 1 FROM idempotency_records WHERE idempotency_key = $1", [k]);
    expect(rows).toHaveLength(0);
    expect(await effectsNamed("fail")).toBe(0);
    const name = `corrected-${randomUUID()}`;
    const retried = await call(createChannel, channelRequest(name), keyed(k));
    expect(retried.error).toBeUndefined();
    expect(retried.headers.get("x-idempotent-replay")).toBeNull();
    expect(await effectsNamed(name)).toBe(1);
  });

  it("refuses the same key with another request body with 422 idempotency_key_reused", async () => {
    const k = `reused-${randomUUID()}`;
    await call(createChannel, channelRequest(`${k}-a`), keyed(k));
    const other = await call(createChannel, channelRequest(`${k}-b`), keyed(k));
    expect(other.error?.code).toBe("idempotency_key_reused");
    expect(other.error?.status).toBe(422);
    expect(await effectsNamed(`${k}-b`)).toBe(0);
  });

  it("refuses the same key on another method with 422 idempotency_key_reused", async () => {
    const k = `other-method-${randomUUID()}`;
    await call(createChannel, channelRequest(k), keyed(k));
    const other = await call(deleteChannel, create(DeleteChannelRequestSchema, { identifier: "c1" }), keyed(k));
    expect(other.error?.code).toBe("idempotency_key_reused");
  });

  it("treats equal requests whose metadata lists keys in another order as the same request", async () => {
    const k = `order-${randomUUID()}`;
    const first = await call(createChannel, channelRequest(k, { metadataSchema: { a: 1, b: { c: 2, d: 3 } } }), keyed(k));
    const again = await call(createChannel, channelRequest(k, { metadataSchema: { b: { d: 3, c: 2 }, a: 1 } }), keyed(k));
    expect(again.error).toBeUndefined();
    expect(again.response).toEqual(first.response);
    expect(await effectsNamed(k)).toBe(1);
  });

  it("scopes keys to the caller's API key", async () => {
    const k = `scope-${randomUUID()}`;
    const mine = await call(createChannel, channelRequest(k), keyed(k));
    const theirs = await call(createChannel, channelRequest(k), keyed(k, otherKey));
    expect(theirs.error).toBeUndefined();
    expect(theirs.headers.get("x-idempotent-replay")).toBeNull();
    expect(theirs.response?.id).not.toBe(mine.response?.id);
    expect(await effectsNamed(k)).toBe(2);
  });

  it("treats an expired record as absent and overwrites it", async () => {
    const k = `expired-${randomUUID()}`;
    await call(createChannel, channelRequest(`${k}-a`), keyed(k));
    await db.query("UPDATE idempotency_records SET expires_at = clock_timestamp() - interval '1 second' WHERE idempotency_key = $1", [k]);
    const fresh = await call(createChannel, channelRequest(`${k}-b`), keyed(k));
    expect(fresh.error).toBeUndefined();
    expect(fresh.headers.get("x-idempotent-replay")).toBeNull();
    const again = await call(createChannel, channelRequest(`${k}-b`), keyed(k));
    expect(again.response).toEqual(fresh.response);
    const { rows } = await db.query<{ live: boolean }>(
      "SELECT expires_at > clock_timestamp() + interval '23 hours' AS live FROM idempotency_records WHERE idempotency_key = $1",
      [k],
    );
    expect(rows).toEqual([{ live: true }]);
  });

  it("keeps the record 24 hours", async () => {
    const k = `window-${randomUUID()}`;
    await call(createChannel, channelRequest(k), keyed(k));
    const { rows } = await db.query<{ seconds: number }>(
      "SELECT extract(epoch FROM expires_at - created_at)::int AS seconds FROM idempotency_records WHERE idempotency_key = $1",
      [k],
    );
    expect(rows).toEqual([{ seconds: 86_400 }]);
  });

  it("runs the handler without the claim's lock timeout", async () => {
    const k = `lock-timeout-${randomUUID()}`;
    await call(createChannel, channelRequest(k), keyed(k));
    expect(handlerLockTimeout).toBe("0");
  });

  it.each([
    ["empty", ""],
    ["longer than 255 characters", "k".repeat(256)],
    ["not ASCII", "clé"],
    ["a control character", "a\tb"],
  ])("answers 422 invalid_idempotency_key to a key that is %s", async (_what, k) => {
    const name = `invalid-${randomUUID()}`;
    const result = await call(createChannel, channelRequest(name), keyed(k));
    expect(result.error?.code).toBe("invalid_idempotency_key");
    expect(await effectsNamed(name)).toBe(0);
  });

  it("accepts a key of exactly 255 printable characters", async () => {
    const k = `${randomUUID()}${"~".repeat(255 - 36)}`;
    const result = await call(createChannel, channelRequest(k.slice(0, 40)), keyed(k));
    expect(result.error).toBeUndefined();
  });

  it("ignores the header on reads", async () => {
    const k = `read-${randomUUID()}`;
    const request = create(GetChannelRequestSchema, { identifier: k });
    await call(getChannel, request, keyed(k));
    const again = await call(getChannel, request, keyed(k));
    expect(again.headers.get("x-idempotent-replay")).toBeNull();
    expect(again.headers.get("idempotency-key")).toBeNull();
    expect(await effectsNamed(k)).toBe(2);
    const invalid = await call(getChannel, request, keyed(""));
    expect(invalid.error).toBeUndefined();
  });

  it("runs every request without a key", async () => {
    const name = `keyless-${randomUUID()}`;
    await call(createChannel, channelRequest(name), { "x-api-key": key });
    await call(createChannel, channelRequest(name), { "x-api-key": key });
    expect(await effectsNamed(name)).toBe(2);
  });

  it("checks the API key before the Idempotency-Key", async () => {
    const result = await call(createChannel, channelRequest("unauthenticated"), { "idempotency-key": "" });
    expect(result.error?.code).toBe("unauthorized");
  });
});
