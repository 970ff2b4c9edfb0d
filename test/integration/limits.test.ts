/**
 * Shared limits, the resource (issue 28, item 4; docs/decisions.md#shared-limits):
 * create, list, read, change (the update mask: REST body keys, null removes a
 * bound), delete (the id leaves channels' and messages' limit_ids), each bad
 * value answered 422 invalid_limit over REST and InvalidArgument over gRPC,
 * ownership by key (another key's limit is 404 limit_not_found), and the live
 * use (in_flight, used_in_window) computed from message and delivery rows the
 * test writes itself, at a time the test sets on the service's clock.
 */
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel } from "../support/fixtures.js";
import { expectError } from "../support/membership.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);

afterEach(() => clock.reset());

interface LimitJson {
  name: string;
  max_in_flight: number | null;
  rate: { count: number; per_seconds: number } | null;
  in_flight: number;
  used_in_window: number;
  created_at: string;
}

const keyIdOf = (key: string) => key.split(".")[0] as string;
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

const create = (key: string, body: Record<string, unknown>) => rest<LimitJson>(server.url, "POST", "/v1/limits", { key, body });
const get = (key: string, name: string) => rest<LimitJson>(server.url, "GET", `/v1/limits/${encodeURIComponent(name)}`, { key });
const patch = (key: string, name: string, body: Record<string, unknown>) =>
  rest<LimitJson>(server.url, "PATCH", `/v1/limits/${encodeURIComponent(name)}`, { key, body });
const remove = (key: string, name: string) => rest(server.url, "DELETE", `/v1/limits/${encodeURIComponent(name)}`, { key });

async function created(key: string, body: Record<string, unknown>): Promise<LimitJson> {
  const res = await create(key, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function limitId(key: string, name: string): Promise<string> {
  const { rows } = await sql.query<{ id: string }>("SELECT id FROM limits WHERE owner_key_id = $1 AND name = $2", [keyIdOf(key), name]);
  const id = rows[0]?.id;
  if (id === undefined) throw new Error(`no limit ${name}`);
  return id;
}

let grpcClient: Client<typeof LimitService> | undefined;
const grpc = () => (grpcClient ??= createClient(LimitService, createGrpcTransport({ baseUrl: server.url })));

/** The gRPC code and catalog error of a call that must fail. */
async function grpcRefusal(call: Promise<unknown>): Promise<{ code: Code; error: string | undefined }> {
  const err = ConnectError.from(await call.then(() => new Error("the call succeeded")).catch((e: unknown) => e));
  return { code: err.code, error: err.findDetails(ErrorDetailSchema)[0]?.error };
}

/** The service clock's now, as PostgreSQL text, `offsetSeconds` away. */
const at = (offsetSeconds: number) => new Date(clock.now() / 1000 + offsetSeconds * 1000).toISOString();

describe("POST /v1/limits", () => {
  it("creates a limit owned by the key (201) with its bounds, no use yet and created_at", async () => {
    const key = await mintKey(server.url);
    const res = await create(key, { name: "openai:gpt-4o", max_in_flight: 5, rate: { count: 100, per_seconds: 10 } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      name: "openai:gpt-4o",
      max_in_flight: 5,
      rate: { count: 100, per_seconds: 10 },
      in_flight: 0,
      used_in_window: 0,
      created_at: expect.any(String),
    });
    expect(Math.abs(Date.parse(res.body.created_at) - clock.now() / 1000)).toBeLessThan(60_000);
    const { rows } = await sql.query("SELECT owner_key_id, max_in_flight, rate_count, rate_per_seconds FROM limits WHERE name = 'openai:gpt-4o'");
    expect(rows).toEqual([{ owner_key_id: keyIdOf(key), max_in_flight: 5, rate_count: 100, rate_per_seconds: 10 }]);
  });

  it("shows an absent bound as null: a limit may have only max_in_flight or only a rate", async () => {
    const key = await mintKey(server.url);
    expect(await created(key, { name: "concurrency", max_in_flight: 1 })).toMatchObject({ max_in_flight: 1, rate: null });
    expect(await created(key, { name: "rpm", rate: { count: 1, per_seconds: 86_400 } })).toMatchObject({ max_in_flight: null, rate: { count: 1, per_seconds: 86_400 } });
  });

  it("refuses a limit without any bound with 422 invalid_limit", async () => {
    const key = await mintKey(server.url);
    expectError(await create(key, { name: "nothing" }), 422, "invalid_limit");
    expectError(await create(key, { name: "nulls", max_in_flight: null, rate: null }), 422, "invalid_limit");
  });

  it.each([
    ["max_in_flight 0", { max_in_flight: 0 }, "max_in_flight"],
    ["max_in_flight 100001", { max_in_flight: 100_001 }, "max_in_flight"],
    ["max_in_flight -1", { max_in_flight: -1 }, "max_in_flight"],
    ["rate.count 0", { rate: { count: 0, per_seconds: 10 } }, "rate.count"],
    ["rate.count 1000001", { rate: { count: 1_000_001, per_seconds: 10 } }, "rate.count"],
    ["rate.per_seconds 0", { rate: { count: 10, per_seconds: 0 } }, "rate.per_seconds"],
    ["rate.per_seconds 86401", { rate: { count: 10, per_seconds: 86_401 } }, "rate.per_seconds"],
    ["a rate without per_seconds", { rate: { count: 10 } }, "rate.per_seconds"],
  ])("refuses %s with 422 invalid_limit naming the field", async (_what, bounds, field) => {
    const key = await mintKey(server.url);
    const body = expectError(await create(key, { name: "bad", max_in_flight: 3, ...bounds }), 422, "invalid_limit");
    expect(body).toMatchObject({ field });
    expect((await rest<{ data: unknown[] }>(server.url, "GET", "/v1/limits", { key })).body.data).toEqual([]);
  });

  it.each([
    ["an empty name", ""],
    ["a name of 65 characters", "x".repeat(65)],
    ["a name with a space", "my limit"],
    ["a name with a slash", "a/b"],
    ["a name with a non-ASCII letter", "modèle"],
  ])("refuses %s with 422 invalid_limit", async (_what, name) => {
    const key = await mintKey(server.url);
    expect(expectError(await create(key, { name, max_in_flight: 1 }), 422, "invalid_limit")).toMatchObject({ field: "name" });
  });

  it("accepts a name of 64 letters, digits, '.', '_', '-' and ':'", async () => {
    const key = await mintKey(server.url);
    const name = `Aa0.b_c-d:${"z".repeat(54)}`;
    expect(name).toHaveLength(64);
    expect((await created(key, { name, max_in_flight: 1 })).name).toBe(name);
  });

  it("refuses each bad bound over gRPC with InvalidArgument and error invalid_limit", async () => {
    const headers = { "x-api-key": await mintKey(server.url) };
    const refused = { code: Code.InvalidArgument, error: "invalid_limit" };
    expect(await grpcRefusal(grpc().createLimit({ name: "none" }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", maxInFlight: 0 }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", maxInFlight: 100_001 }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", rate: { count: 0, perSeconds: 1 } }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", rate: { count: 1_000_001, perSeconds: 1 } }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", rate: { count: 1, perSeconds: 0 } }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "n", rate: { count: 1, perSeconds: 86_401 } }, { headers }))).toEqual(refused);
    expect(await grpcRefusal(grpc().createLimit({ name: "bad name", maxInFlight: 1 }, { headers }))).toEqual(refused);
  });

  it("creates and reads a limit over gRPC, the same resource as over REST", async () => {
    const key = await mintKey(server.url);
    const headers = { "x-api-key": key };
    const limit = await grpc().createLimit({ name: "grpc", maxInFlight: 7, rate: { count: 3, perSeconds: 60 } }, { headers });
    expect(limit).toMatchObject({ name: "grpc", maxInFlight: 7, rate: { count: 3, perSeconds: 60 }, inFlight: 0, usedInWindow: 0 });
    expect((await get(key, "grpc")).body).toMatchObject({ name: "grpc", max_in_flight: 7, rate: { count: 3, per_seconds: 60 } });
    expect((await grpc().getLimit({ name: "grpc" }, { headers })).maxInFlight).toBe(7);
  });

  it("refuses a second limit of the same name for one key with 409 limit_exists (ALREADY_EXISTS over gRPC)", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "quota", max_in_flight: 2 });
    expect(expectError(await create(key, { name: "quota", max_in_flight: 9 }), 409, "limit_exists")).toMatchObject({ name: "quota" });
    expect((await get(key, "quota")).body.max_in_flight).toBe(2);
    expect(await grpcRefusal(grpc().createLimit({ name: "quota", maxInFlight: 1 }, { headers: { "x-api-key": key } }))).toEqual({
      code: Code.AlreadyExists,
      error: "limit_exists",
    });
  });

  it("creates one of two concurrent limits of the same name and refuses the other with 409 limit_exists", async () => {
    const key = await mintKey(server.url);
    const answers = await Promise.all([create(key, { name: "race", max_in_flight: 1 }), create(key, { name: "race", max_in_flight: 2 })]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    expect(answers.find((a) => a.status === 409)?.body).toMatchObject({ error: "limit_exists" });
  });

  it("refuses a key's 1001st limit with 429 too_many_limits", async () => {
    const key = await mintKey(server.url);
    await sql.query(
      "INSERT INTO limits (owner_key_id, name, max_in_flight, created_at, updated_at) SELECT $1, 'l' || n, 1, now(), now() FROM generate_series(1, 1000) n",
      [keyIdOf(key)],
    );
    expect(expectError(await create(key, { name: "one-more", max_in_flight: 1 }), 429, "too_many_limits")).toMatchObject({ limit: 1000 });
    expect((await remove(key, "l1")).status).toBe(204);
    await created(key, { name: "one-more", max_in_flight: 1 });
  });

  it("lets two keys each have a limit of the same name", async () => {
    const [alice, bob] = [await mintKey(server.url), await mintKey(server.url)];
    await created(alice, { name: "shared-name", max_in_flight: 1 });
    await created(bob, { name: "shared-name", max_in_flight: 2 });
    expect((await get(alice, "shared-name")).body.max_in_flight).toBe(1);
    expect((await get(bob, "shared-name")).body.max_in_flight).toBe(2);
  });
});

describe("GET /v1/limits", () => {
  it("lists the key's own limits sorted by name, each with its live use", async () => {
    const key = await mintKey(server.url);
    const other = await mintKey(server.url);
    for (const name of ["zeta", "Alpha", "beta", "b:2", "b.1", "a-1"]) await created(key, { name, max_in_flight: 1 });
    await created(other, { name: "not-mine", max_in_flight: 1 });
    const res = await rest<{ data: LimitJson[] }>(server.url, "GET", "/v1/limits", { key });
    expect(res.status).toBe(200);
    expect(res.body.data.map((l) => l.name)).toEqual(["Alpha", "a-1", "b.1", "b:2", "beta", "zeta"]);
    expect(res.body.data[0]).toMatchObject({ in_flight: 0, used_in_window: 0, max_in_flight: 1, rate: null });
  });

  it("lists nothing for a key without limits", async () => {
    const key = await mintKey(server.url);
    expect((await rest(server.url, "GET", "/v1/limits", { key })).body).toEqual({ data: [] });
    expect((await grpc().listLimits({}, { headers: { "x-api-key": key } })).data).toEqual([]);
  });
});

describe("GET /v1/limits/{name}", () => {
  it("reads a limit whose name holds ':' and '.' at its plain path, unescaped", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "openai:gpt-4.1", max_in_flight: 2 });
    const res = await rest<LimitJson>(server.url, "GET", "/v1/limits/openai:gpt-4.1", { key });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ name: "openai:gpt-4.1", max_in_flight: 2 });
  });
});

describe("another key's limit", () => {
  it("answers 404 limit_not_found to GET, PATCH and DELETE, exactly as a missing one, and stays as it was", async () => {
    const owner = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    await created(owner, { name: "private", max_in_flight: 4 });
    const missing = expectError(await get(stranger, "no-such-limit"), 404, "limit_not_found");
    const foreign = expectError(await get(stranger, "private"), 404, "limit_not_found");
    expect(Object.keys(foreign).sort()).toEqual(Object.keys(missing).sort());
    expect(foreign.message).toBe(missing.message.replace("no-such-limit", "private"));
    expectError(await patch(stranger, "private", { max_in_flight: 9 }), 404, "limit_not_found");
    expectError(await remove(stranger, "private"), 404, "limit_not_found");
    expect((await get(owner, "private")).body.max_in_flight).toBe(4);
    const headers = { "x-api-key": stranger };
    const notFound = { code: Code.NotFound, error: "limit_not_found" };
    expect(await grpcRefusal(grpc().getLimit({ name: "private" }, { headers }))).toEqual(notFound);
    expect(await grpcRefusal(grpc().updateLimit({ name: "private", update: { maxInFlight: 1 } }, { headers }))).toEqual(notFound);
    expect(await grpcRefusal(grpc().deleteLimit({ name: "private" }, { headers }))).toEqual(notFound);
  });
});

describe("PATCH /v1/limits/{name}", () => {
  it("changes only the bounds present in the body", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "p", max_in_flight: 5, rate: { count: 100, per_seconds: 10 } });
    const res = await patch(key, "p", { max_in_flight: 8 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "p", max_in_flight: 8, rate: { count: 100, per_seconds: 10 } });
    expect((await patch(key, "p", { rate: { count: 50, per_seconds: 60 } })).body).toMatchObject({ max_in_flight: 8, rate: { count: 50, per_seconds: 60 } });
    expect((await patch(key, "p", {})).body).toMatchObject({ max_in_flight: 8, rate: { count: 50, per_seconds: 60 } });
    expect((await get(key, "p")).body).toMatchObject({ max_in_flight: 8, rate: { count: 50, per_seconds: 60 } });
  });

  it("removes a bound given as null", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "p", max_in_flight: 5, rate: { count: 100, per_seconds: 10 } });
    expect((await patch(key, "p", { rate: null })).body).toMatchObject({ max_in_flight: 5, rate: null });
    expect((await patch(key, "p", { rate: { count: 1, per_seconds: 1 }, max_in_flight: null })).body).toMatchObject({
      max_in_flight: null,
      rate: { count: 1, per_seconds: 1 },
    });
    const { rows } = await sql.query("SELECT max_in_flight, rate_count, rate_per_seconds FROM limits WHERE owner_key_id = $1", [keyIdOf(key)]);
    expect(rows).toEqual([{ max_in_flight: null, rate_count: 1, rate_per_seconds: 1 }]);
  });

  it("refuses removing the last bound with 422 invalid_limit and keeps the limit as it was", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "p", max_in_flight: 5 });
    expectError(await patch(key, "p", { max_in_flight: null }), 422, "invalid_limit");
    expectError(await patch(key, "p", { max_in_flight: null, rate: null }), 422, "invalid_limit");
    expect((await get(key, "p")).body).toMatchObject({ max_in_flight: 5, rate: null });
  });

  it("refuses an out-of-range bound with 422 invalid_limit", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "p", max_in_flight: 5 });
    expectError(await patch(key, "p", { max_in_flight: 100_001 }), 422, "invalid_limit");
    expectError(await patch(key, "p", { rate: { count: 5, per_seconds: 86_401 } }), 422, "invalid_limit");
    expect((await get(key, "p")).body).toMatchObject({ max_in_flight: 5, rate: null });
  });

  it("refuses an unknown field with 422 invalid_fields", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "p", max_in_flight: 5 });
    const body = expectError(await patch(key, "p", { max_in_flight: 6, name: "renamed" }), 422, "invalid_fields");
    expect(body).toMatchObject({ fields: ["name"] });
    expect((await get(key, "p")).body.max_in_flight).toBe(5);
  });

  it("over gRPC applies the bounds that are set without a mask, and exactly the masked ones with one", async () => {
    const key = await mintKey(server.url);
    const headers = { "x-api-key": key };
    await created(key, { name: "g", max_in_flight: 5, rate: { count: 10, per_seconds: 10 } });
    expect(await grpc().updateLimit({ name: "g", update: { maxInFlight: 6 } }, { headers })).toMatchObject({ maxInFlight: 6, rate: { count: 10, perSeconds: 10 } });
    const cleared = await grpc().updateLimit({ name: "g", update: { maxInFlight: 7 }, updateMask: { paths: ["max_in_flight", "rate"] } }, { headers });
    expect(cleared.maxInFlight).toBe(7);
    expect(cleared.rate).toBeUndefined();
    expect(await grpcRefusal(grpc().updateLimit({ name: "g", updateMask: { paths: ["max_in_flight"] } }, { headers }))).toEqual({
      code: Code.InvalidArgument,
      error: "invalid_limit",
    });
    expect(await grpcRefusal(grpc().updateLimit({ name: "g", update: { maxInFlight: 1 }, updateMask: { paths: ["name"] } }, { headers }))).toEqual({
      code: Code.InvalidArgument,
      error: "invalid_update_mask",
    });
    expect((await get(key, "g")).body).toMatchObject({ max_in_flight: 7, rate: null });
  });
});

describe("DELETE /v1/limits/{name}", () => {
  it("deletes the limit (204); then it answers 404 limit_not_found and its name is free again", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "gone", max_in_flight: 1 });
    const res = await remove(key, "gone");
    expect(res.status).toBe(204);
    expectError(await get(key, "gone"), 404, "limit_not_found");
    expectError(await remove(key, "gone"), 404, "limit_not_found");
    expect((await rest(server.url, "GET", "/v1/limits", { key })).body).toEqual({ data: [] });
    await created(key, { name: "gone", rate: { count: 1, per_seconds: 1 } });
  });

  it("removes the limit's id from channels' and messages' limit_ids, keeping the other limits, and its delivery rows", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "doomed", max_in_flight: 1 });
    await created(key, { name: "kept", rate: { count: 5, per_seconds: 60 } });
    const [doomed, kept] = [await limitId(key, "doomed"), await limitId(key, "kept")];
    const channels = [await createChannel(server.url, key), await createChannel(server.url, key)];
    await sql.query("UPDATE channels SET limit_ids = ARRAY[$2::uuid, $3::uuid] WHERE id = $1", [channels[0], doomed, kept]);
    await sql.query("UPDATE channels SET limit_ids = ARRAY[$2::uuid] WHERE id = $1", [channels[1], doomed]);
    const { rows: messages } = await sql.query<{ id: string }>(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at, limit_ids)
       VALUES ($1, $2, 'a', $3::timestamptz - interval '2 seconds', $3::timestamptz + interval '1 hour', ARRAY[$4::uuid, $5::uuid]),
              ($1, $2, 'b', $3::timestamptz - interval '1 second', $3::timestamptz + interval '1 hour', ARRAY[$4::uuid])
       RETURNING id`,
      [channels[0], keyIdOf(key), at(0), kept, doomed],
    );
    await sql.query("INSERT INTO limit_deliveries (limit_id, delivered_at) VALUES ($1, $2), ($3, $2)", [doomed, at(-1), kept]);

    expect((await remove(key, "doomed")).status).toBe(204);

    const { rows: channelRows } = await sql.query("SELECT id, limit_ids FROM channels WHERE id = ANY($1::uuid[]) ORDER BY id", [channels]);
    expect(Object.fromEntries(channelRows.map((r: { id: string; limit_ids: string[] }) => [r.id, r.limit_ids]))).toEqual({
      [channels[0] as string]: [kept],
      [channels[1] as string]: [],
    });
    const { rows: messageRows } = await sql.query("SELECT content, limit_ids FROM messages WHERE id = ANY($1::uuid[]) ORDER BY content", [messages.map((m) => m.id)]);
    expect(messageRows).toEqual([
      { content: "a", limit_ids: [kept] },
      { content: "b", limit_ids: [kept] },
    ]);
    const { rows: deliveries } = await sql.query("SELECT limit_id FROM limit_deliveries WHERE limit_id = ANY($1::uuid[])", [[doomed, kept]]);
    expect(deliveries).toEqual([{ limit_id: kept }]);
  });

  it("deletes over gRPC", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "g", max_in_flight: 1 });
    await grpc().deleteLimit({ name: "g" }, { headers: { "x-api-key": key } });
    expectError(await get(key, "g"), 404, "limit_not_found");
  });
});

describe("live use", () => {
  /** A message of `channel` written straight into the table, `ageSeconds` old by the service's clock. */
  async function message(channel: string, author: string, ageSeconds: number, columns: Record<string, unknown>): Promise<void> {
    const names = Object.keys(columns);
    await sql.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at${names.map((n) => `, ${n}`).join("")})
       VALUES ($1, $2, 'work', $3, $4${names.map((_n, i) => `, $${i + 5}`).join("")})`,
      [channel, keyIdOf(author), at(-ageSeconds), at(3600), ...Object.values(columns)],
    );
  }

  it("counts in_flight: messages holding the limit that are claimed, unfinished, live, and not past their lease", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "slots", max_in_flight: 10 });
    await created(key, { name: "other", max_in_flight: 10 });
    const [id, otherId] = [await limitId(key, "slots"), await limitId(key, "other")];
    const ch = await createChannel(server.url, key);
    const worker = keyIdOf(key);
    const held = [id];
    // Counted: leased with 60 s left; claimed without a lease; holding this limit and another.
    await message(ch, key, 10, { held_limit_ids: held, claimed_by_key_id: worker, lease_token: unique("lease"), lease_expires_at: at(60) });
    await message(ch, key, 9, { held_limit_ids: held, claimed_by_key_id: worker });
    await message(ch, key, 8, { held_limit_ids: [otherId, id], claimed_by_key_id: worker, lease_token: unique("lease"), lease_expires_at: at(600) });
    // Not counted: lease lapsed; acknowledged; expired; not claimed; holding another limit only; holding none.
    await message(ch, key, 7, { held_limit_ids: held, claimed_by_key_id: worker, lease_token: unique("lease"), lease_expires_at: at(-1) });
    await message(ch, key, 6, { held_limit_ids: held, claimed_by_key_id: worker, acknowledged_by: JSON.stringify([{ id: worker, name: "w", occurred_at: at(-1) }]) });
    await sql.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at, held_limit_ids, claimed_by_key_id)
       VALUES ($1, $2, 'expired', $3, $4, $5, $2)`,
      [ch, worker, at(-5), at(-1), held],
    );
    await message(ch, key, 4, { held_limit_ids: held });
    await message(ch, key, 3, { held_limit_ids: [otherId], claimed_by_key_id: worker });
    await message(ch, key, 2, { claimed_by_key_id: worker });

    expect((await get(key, "slots")).body.in_flight).toBe(3);
    expect((await get(key, "other")).body.in_flight).toBe(2);
    const list = (await rest<{ data: LimitJson[] }>(server.url, "GET", "/v1/limits", { key })).body.data;
    expect(list.map((l) => [l.name, l.in_flight])).toEqual([
      ["other", 2],
      ["slots", 3],
    ]);
    // 61 s later by the service's clock the first lease has lapsed; the one of 600 s has not.
    clock.advanceSeconds(61);
    expect((await get(key, "slots")).body.in_flight).toBe(2);
    expect((await grpc().getLimit({ name: "slots" }, { headers: { "x-api-key": key } })).inFlight).toBe(2);
  });

  it("counts used_in_window: the limit's deliveries within per_seconds of now, and 0 for a limit without a rate", async () => {
    const key = await mintKey(server.url);
    await created(key, { name: "rpm", rate: { count: 100, per_seconds: 60 } });
    await created(key, { name: "no-rate", max_in_flight: 3 });
    const [rpm, noRate] = [await limitId(key, "rpm"), await limitId(key, "no-rate")];
    // In the window: 5, 20 and 40 s ago; outside: 70 and 300 s ago.
    for (const age of [5, 20, 40, 70, 300]) {
      await sql.query("INSERT INTO limit_deliveries (limit_id, delivered_at) VALUES ($1, $2), ($3, $2)", [rpm, at(-age), noRate]);
    }
    expect((await get(key, "rpm")).body.used_in_window).toBe(3);
    expect((await get(key, "no-rate")).body.used_in_window).toBe(0);
    // 30 s later the delivery of 40 s ago (now 70) has left the window.
    clock.advanceSeconds(30);
    expect((await get(key, "rpm")).body.used_in_window).toBe(2);
    // A longer window counts more, at once.
    expect((await patch(key, "rpm", { rate: { count: 100, per_seconds: 120 } })).body.used_in_window).toBe(4);
    expect((await rest<{ data: LimitJson[] }>(server.url, "GET", "/v1/limits", { key })).body.data.map((l) => l.used_in_window)).toEqual([0, 4]);
  });
});
