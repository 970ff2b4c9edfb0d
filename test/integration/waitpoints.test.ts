/**
 * Waitpoints (docs/decisions.md#waitpoints): a key creates one and gets a
 * token that completes it with no key at all; a lease holder releases its
 * message to wait for one (state waiting); the message is open work again
 * when it is completed (carrying its data) or times out, without counting a
 * delivery. Timeouts are reached by moving the service clock, not by sleeping.
 */
import { createHash } from "node:crypto";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startApp } from "../../src/app.js";
import { createLogger } from "../../src/platform/logger.js";
import { purge } from "../../src/store/purge.js";
import { Db } from "../../src/store/db.js";
import { WRONG_WAITPOINT_TOKENS_PER_MINUTE } from "../../src/services/index.js";
import { AdjustableClock } from "../support/clock.js";
import { createTestDatabase } from "../support/database.js";
import { createChannel, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, testConfig, useSqlClient, useTestServer } from "../support/server.js";

interface WaitpointJson {
  id: string;
  state: string;
  token?: string;
  complete_url?: string;
  description?: string;
  expires_at: string;
  completed_at?: string;
  data?: Record<string, unknown>;
  waiting_messages: number;
  error?: string;
}
type WaitingMessage = MessageJson & { state: string; delivery_count: number; waitpoint?: { id: string; data?: Record<string, unknown>; timed_out: boolean } };

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
let owner: string;
let worker: string;
let stranger: string;
beforeAll(async () => {
  [owner, worker, stranger] = await Promise.all(["wp-owner", "wp-worker", "wp-stranger"].map((l) => mintKey(url(), l)));
});
afterEach(() => clock.reset());

const createWaitpoint = async (body: Record<string, unknown> = { timeout_seconds: 3600 }, key = worker, headers: Record<string, string> = {}) =>
  rest<WaitpointJson>(url(), "POST", "/v1/waitpoints", { key, body, headers });
const newWaitpoint = async (timeout = 3600) => {
  const res = await createWaitpoint({ timeout_seconds: timeout });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as WaitpointJson & { token: string };
};
const complete = (token: string, body: Record<string, unknown> = {}) => rest<WaitpointJson>(url(), "POST", `/v1/waitpoints/${token}:complete`, { body });
const getWaitpoint = (id: string, key = worker) => rest<WaitpointJson>(url(), "GET", `/v1/waitpoints/${id}`, { key });
const queue = () => createChannel(url(), owner);
const receive = async (ch: string, body: Record<string, unknown> = {}) => {
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body: { lease_seconds: 60, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as Array<ReceivedJson & { message: WaitingMessage }>;
};
const releaseUntil = (id: string, waitpoint: string, key = worker, extra: Record<string, unknown> = {}) =>
  rest<{ message: WaitingMessage; error?: string }>(url(), "POST", `/v1/messages/${id}/release`, { key, body: { until_waitpoint: waitpoint, ...extra } });
const getMessage = async (id: string) => {
  const res = await rest<WaitingMessage>(url(), "GET", `/v1/messages/${id}`, { key: owner });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};
/** A task received by the worker: posted, then leased. */
const heldTask = async () => {
  const ch = await queue();
  const m = await postMessage(url(), owner, ch, { content: "needs approval" });
  const [got] = await receive(ch);
  expect(got?.message.id).toBe(m.id);
  return { ch, id: m.id };
};

describe("creating a waitpoint", () => {
  it("answers 201 with its id, a token, the URL that completes it, state waiting and when it times out", async () => {
    const res = await createWaitpoint({ timeout_seconds: 600, description: "Spend $40 on the model?" });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ state: "waiting", description: "Spend $40 on the model?", waiting_messages: 0 });
    const created = (res.body as WaitpointJson & { created_at: string }).created_at;
    expect(Date.parse(res.body.expires_at) - Date.parse(created)).toBe(600_000);
    expect(res.body.token).toMatch(/^wpt_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(res.body.complete_url).toBe(`${url()}/v1/waitpoints/${res.body.token}:complete`);
  });

  it("stores only a hash of the token's secret", async () => {
    const w = await newWaitpoint();
    // wpt_ + 32 hex + _ : the secret is the rest (base64url, which may hold "_" itself).
    const secret = w.token.slice(37);
    const { rows } = await sql.query<{ token_hash: Buffer; row: string }>("SELECT token_hash, w::text AS row FROM waitpoints w WHERE id = $1", [w.id]);
    expect(rows[0]!.token_hash.equals(createHash("sha256").update(secret).digest())).toBe(true);
    expect(rows[0]!.row).not.toContain(secret);
  });

  it.each([
    [{ timeout_seconds: 0 }, "timeout_seconds"],
    [{ timeout_seconds: 2_592_001 }, "timeout_seconds"],
    [{ timeout_seconds: 60, description: "x".repeat(1001) }, "description"],
    [{ timeout_seconds: 60, idempotency_key: "" }, "idempotency_key"],
  ])("refuses %j with 422 invalid_waitpoint naming %s", async (body, field) => {
    const res = await createWaitpoint(body);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_waitpoint", field });
  });

  it("gives a repeat with the same idempotency_key the same waitpoint and a new token, voiding the old", async () => {
    const first = await createWaitpoint({ timeout_seconds: 600, idempotency_key: "approve-order-7" });
    const again = await createWaitpoint({ timeout_seconds: 600, idempotency_key: "approve-order-7" });
    expect(again.body.id).toBe(first.body.id);
    expect(again.body.token).not.toBe(first.body.token);
    expect((await complete(first.body.token!)).status).toBe(404);
    expect((await complete(again.body.token!)).status).toBe(200);
    // Completed: nothing is left to complete, so no token is issued.
    const late = await createWaitpoint({ timeout_seconds: 600, idempotency_key: "approve-order-7" });
    expect(late.body).toMatchObject({ id: first.body.id, state: "completed" });
    expect(late.body.token ?? undefined).toBeUndefined();
  });

  it("takes the Idempotency-Key header as its idempotency_key and keeps no copy of the answer (the token)", async () => {
    const first = await createWaitpoint({ timeout_seconds: 600 }, worker, { "Idempotency-Key": "hdr-1" });
    const again = await createWaitpoint({ timeout_seconds: 600 }, worker, { "Idempotency-Key": "hdr-1" });
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get("x-idempotent-replay")).toBeNull();
    const { rows } = await sql.query("SELECT 1 FROM idempotency_records WHERE idempotency_key = 'hdr-1'");
    expect(rows).toEqual([]);
  });
});

describe("completing a waitpoint", () => {
  it("needs no API key: the token completes it once, with its data", async () => {
    const w = await newWaitpoint();
    const res = await complete(w.token, { data: { approved: true, by: "dana" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: w.id, state: "completed", data: { approved: true, by: "dana" } });
    expect(res.body.token ?? undefined).toBeUndefined();
    const second = await complete(w.token, { data: { approved: false } });
    expect(second.status).toBe(409);
    expect(second.body.error).toBe("waitpoint_already_completed");
    expect((await getWaitpoint(w.id)).body.data).toEqual({ approved: true, by: "dana" });
  });

  it("never writes the token to the service's log (the request line is logged by its route template)", async () => {
    const w = await newWaitpoint();
    expect((await complete(w.token, { data: { ok: true } })).status).toBe(200);
    const secret = w.token.slice(37);
    expect(server.rawLogs.some((line) => line.includes("waitpoints/{token}:complete"))).toBe(true);
    expect(server.rawLogs.some((line) => line.includes(secret))).toBe(false);
  });

  it.each([
    ["a wrong secret", (t: string) => `${t.slice(0, -1)}${t.endsWith("A") ? "B" : "A"}`],
    ["another id", (t: string) => `wpt_${"0".repeat(32)}_${t.slice(37)}`],
    ["no token shape", () => "not-a-token"],
  ])("answers 404 waitpoint_not_found to %s", async (_what, token) => {
    const w = await newWaitpoint();
    const res = await complete(token(w.token));
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("waitpoint_not_found");
    expect((await getWaitpoint(w.id)).body.state).toBe("waiting");
  });

  it("answers 409 waitpoint_timed_out once its timeout passed", async () => {
    const w = await newWaitpoint(60);
    clock.advanceSeconds(61);
    expect((await getWaitpoint(w.id)).body.state).toBe("timed_out");
    const res = await complete(w.token);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("waitpoint_timed_out");
  });

  it("refuses data over 16 KiB with 422 invalid_waitpoint", async () => {
    const w = await newWaitpoint();
    const res = await complete(w.token, { data: { text: "x".repeat(17_000) } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_waitpoint", field: "data" });
  });

  it("lets the creating key resolve its own waitpoint by id; another key is told 404", async () => {
    const w = await newWaitpoint();
    const other = await rest<WaitpointJson>(url(), "POST", `/v1/waitpoints/${w.id}:resolve`, { key: stranger, body: { data: { approved: true } } });
    expect(other.status).toBe(404);
    const own = await rest<WaitpointJson>(url(), "POST", `/v1/waitpoints/${w.id}:resolve`, { key: worker, body: { data: { approved: false, by: "console" } } });
    expect(own.body).toMatchObject({ state: "completed", data: { approved: false, by: "console" } });
  });
});

describe("reading waitpoints", () => {
  it("shows a waitpoint only to the key that created it", async () => {
    const w = await newWaitpoint();
    expect((await getWaitpoint(w.id)).body).toMatchObject({ id: w.id, state: "waiting" });
    expect((await getWaitpoint(w.id, stranger)).status).toBe(404);
    expect((await getWaitpoint(w.id)).body.token ?? undefined).toBeUndefined();
  });

  it("lists the key's waiting waitpoints with ?state=waiting, newest first", async () => {
    const key = await mintKey(url(), "wp-lister");
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createWaitpoint({ timeout_seconds: 600 }, key)).body.id);
    const done = await createWaitpoint({ timeout_seconds: 600 }, key);
    await complete(done.body.token!);
    const res = await rest<{ data: WaitpointJson[] }>(url(), "GET", "/v1/waitpoints?state=waiting", { key });
    expect(res.body.data.map((w) => w.id)).toEqual(ids.reverse());
    const all = await rest<{ data: WaitpointJson[]; next_cursor?: string }>(url(), "GET", "/v1/waitpoints?limit=2", { key });
    expect(all.body.data).toHaveLength(2);
    const rest2 = await rest<{ data: WaitpointJson[] }>(url(), "GET", `/v1/waitpoints?limit=2&cursor=${encodeURIComponent(all.body.next_cursor!)}`, { key });
    expect([...all.body.data, ...rest2.body.data].map((w) => w.id)).toEqual([done.body.id, ...ids]);
  });
});

describe("a message released to wait for a waitpoint", () => {
  it("is waiting, not delivered, until the waitpoint completes; then it is delivered once carrying the data, the wait not counted", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint();
    const released = await releaseUntil(id, w.id);
    expect(released.status).toBe(200);
    expect(released.body.message).toMatchObject({ state: "waiting", waitpoint: { id: w.id, timed_out: false }, delivery_count: 0 });
    expect(await receive(ch)).toEqual([]);
    expect((await getWaitpoint(w.id)).body.waiting_messages).toBe(1);
    const stats = await rest<{ waiting: number }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner });
    expect(stats.body.waiting).toBe(1);
    await complete(w.token, { data: { approved: true } });
    const [again] = await receive(ch);
    expect(again?.message).toMatchObject({ id, delivery_count: 1, waitpoint: { id: w.id, data: { approved: true }, timed_out: false } });
    expect(await receive(ch)).toEqual([]);
  });

  it("is open work again when the waitpoint times out, marked timed_out", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint(120);
    await releaseUntil(id, w.id);
    clock.advanceSeconds(60);
    expect(await receive(ch)).toEqual([]);
    clock.advanceSeconds(61);
    const [again] = await receive(ch);
    expect(again?.message).toMatchObject({ id, waitpoint: { id: w.id, timed_out: true } });
    expect(again?.message.waitpoint?.data ?? undefined).toBeUndefined();
  });

  it("is ready at once, with the data, when the waitpoint was completed before the release", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint();
    await complete(w.token, { data: { approved: true } });
    expect((await releaseUntil(id, w.id)).body.message.state).toBe("ready");
    expect((await receive(ch))[0]?.message.waitpoint).toMatchObject({ id: w.id, data: { approved: true } });
  });

  it("wakes a receive that long-polls the channel when the waitpoint completes", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint();
    await releaseUntil(id, w.id);
    const waiting = receive(ch, { wait: 20 });
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    await complete(w.token);
    expect((await waiting)[0]?.message.id).toBe(id);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("forgets the waitpoint when its next holder releases it plainly", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint();
    await releaseUntil(id, w.id);
    await complete(w.token);
    await receive(ch);
    const plain = await rest<{ message: WaitingMessage }>(url(), "POST", `/v1/messages/${id}/release`, { key: worker, body: {} });
    expect(plain.body.message.waitpoint ?? undefined).toBeUndefined();
    expect(plain.body.message.state).toBe("ready");
  });

  it("cancelled while it waits, stays cancelled when the waitpoint completes", async () => {
    const { ch, id } = await heldTask();
    const w = await newWaitpoint();
    await releaseUntil(id, w.id);
    const cancelled = await rest<{ message: WaitingMessage }>(url(), "POST", `/v1/messages/${id}:cancel`, { key: owner, body: {} });
    expect(cancelled.body, JSON.stringify(cancelled.body)).toMatchObject({ message: { state: "cancelled" } });
    await complete(w.token);
    expect(await receive(ch)).toEqual([]);
    expect(await getMessage(id)).toMatchObject({ state: "cancelled" });
  });

  it("refuses another key's waitpoint with 404 waitpoint_not_found and keeps the lease", async () => {
    const { id } = await heldTask();
    const theirs = (await createWaitpoint({ timeout_seconds: 60 }, stranger)).body;
    const res = await releaseUntil(id, theirs.id);
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("waitpoint_not_found");
    expect((await getMessage(id)).state).toBe("in_flight");
  });

  it("refuses until_waitpoint with delay_seconds with 422 invalid_waitpoint", async () => {
    const { id } = await heldTask();
    const w = await newWaitpoint();
    const res = await releaseUntil(id, w.id, worker, { delay_seconds: 5 });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_waitpoint");
  });

  it("refuses a release by a key that does not hold the message", async () => {
    const { id } = await heldTask();
    const theirs = (await createWaitpoint({ timeout_seconds: 60 }, stranger)).body;
    expect((await releaseUntil(id, theirs.id, stranger)).status).toBe(403);
  });
});

describe("completion racing the release", () => {
  it("never leaves a message waiting for a waitpoint that is already completed (40 pairs)", async () => {
    const ch = await queue();
    const pairs = 40;
    for (let i = 0; i < pairs; i++) await postMessage(url(), owner, ch, { content: `t${i}` });
    const held = await receive(ch, { max_messages: pairs });
    expect(held).toHaveLength(pairs);
    const waitpoints = await Promise.all(held.map(() => newWaitpoint()));
    await Promise.all(held.flatMap((h, i) => [releaseUntil(h.message.id, waitpoints[i]!.id), complete(waitpoints[i]!.token, { data: { i } })]));
    const again = await receive(ch, { max_messages: pairs });
    expect(again.map((r) => r.message.id).sort()).toEqual(held.map((h) => h.message.id).sort());
    for (const r of again) expect(r.message.waitpoint?.data).toEqual({ i: waitpoints.findIndex((w) => w.id === r.message.waitpoint?.id) });
  });
});

describe("purging", () => {
  it("deletes a waitpoint a week after it finished", async () => {
    const { id } = await heldTask();
    const w = await newWaitpoint();
    await releaseUntil(id, w.id);
    await complete(w.token, { data: { ok: 1 } });
    const db = new Db(server.app.pool);
    expect((await purge(db, clock.now() + 6 * 86_400_000_000)).deletedWaitpoints).toBe(0);
    expect((await purge(db, clock.now() + 8 * 86_400_000_000)).deletedWaitpoints).toBeGreaterThanOrEqual(1);
    expect((await getWaitpoint(w.id)).status).toBe(404);
  });
});

describe("guessing tokens", () => {
  it("refuses an address that keeps presenting wrong tokens with 429 until the minute is over", async () => {
    // A service of its own: every test here calls from 127.0.0.1, and this one uses the address's allowance up.
    const db = await createTestDatabase();
    const own = new AdjustableClock();
    const app = await startApp({ config: testConfig(db.url, { AGENTBUS_WORKERS: "false" }), logger: createLogger("silent"), clock: own });
    try {
      const key = await mintKey(app.url, "wp-guess");
      const w = (await rest<WaitpointJson>(app.url, "POST", "/v1/waitpoints", { key, body: { timeout_seconds: 3600 } })).body;
      const wrong = `wpt_${"1".repeat(32)}_${"A".repeat(43)}`;
      const statuses: number[] = [];
      for (let i = 0; i <= WRONG_WAITPOINT_TOKENS_PER_MINUTE; i++) statuses.push((await rest(app.url, "POST", `/v1/waitpoints/${wrong}:complete`, { body: {} })).status);
      expect(statuses.slice(0, -1).every((s) => s === 404)).toBe(true);
      expect(statuses.at(-1)).toBe(429);
      expect((await rest(app.url, "POST", `/v1/waitpoints/${w.token}:complete`, { body: {} })).status).toBe(429);
      own.advanceSeconds(61);
      expect((await rest(app.url, "POST", `/v1/waitpoints/${w.token}:complete`, { body: {} })).status).toBe(200);
    } finally {
      await app.close();
      await db.drop();
    }
  });

  it("does not count right tokens: an outside system may complete many waitpoints", async () => {
    const many = await Promise.all(Array.from({ length: WRONG_WAITPOINT_TOKENS_PER_MINUTE + 5 }, () => newWaitpoint()));
    for (const w of many) expect((await complete(w.token)).status).toBe(200);
  });
});

describe("across a restart", () => {
  it("a waitpoint completed after the service restarted re-queues its message once", async () => {
    const db = await createTestDatabase();
    const start = () => startApp({ config: testConfig(db.url, { AGENTBUS_WORKERS: "false" }), logger: createLogger("silent") });
    let app = await start();
    try {
      const key = await mintKey(app.url, "wp-restart");
      const ch = await createChannel(app.url, key);
      const m = await postMessage(app.url, key, ch, { content: "deploy?" });
      const recv = async () => (await rest<{ data: ReceivedJson[] }>(app.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 60, max_messages: 5 } })).body.data;
      expect((await recv()).map((r) => r.message.id)).toEqual([m.id]);
      const w = (await rest<WaitpointJson>(app.url, "POST", "/v1/waitpoints", { key, body: { timeout_seconds: 3600 } })).body;
      expect((await rest(app.url, "POST", `/v1/messages/${m.id}/release`, { key, body: { until_waitpoint: w.id } })).status).toBe(200);
      await app.close();
      app = await start();
      expect(await recv()).toEqual([]);
      expect((await rest(app.url, "POST", `/v1/waitpoints/${w.token}:complete`, { body: { data: { go: true } } })).status).toBe(200);
      const again = await recv();
      expect(again.map((r) => r.message.id)).toEqual([m.id]);
      expect(await recv()).toEqual([]);
    } finally {
      await app.close();
      await db.drop();
    }
  });
});
