/**
 * Dependencies and fan-in (docs/decisions.md#dependencies): a message posted
 * with depends_on is blocked until every parent is acknowledged, then
 * delivered with its parents' results; a parent that ends otherwise
 * (cancelled, dead-lettered, expired, retracted) cancels its descendants,
 * down the tree, with cancel_reason parent_failed.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Db } from "../../src/store/db.js";
import { purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const url = () => server.url;
let owner: string;
let stranger: string;
beforeAll(async () => {
  [owner, stranger] = await Promise.all(["deps-owner", "deps-stranger"].map((l) => mintKey(url(), l)));
});

type Received = ReceivedJson & { parents: Array<{ message_id: string; channel_id: string; result: string | null }> };
const post = (ch: string, content: string, extra: Record<string, unknown> = {}, key = owner) =>
  rest<{ message: MessageJson & { depends_on: string[]; dependents_count: number }; error?: string }>(url(), "POST", `/v1/channels/${ch}/messages`, {
    key,
    body: { content, ...extra },
  });
const receive = async (ch: string, body: Record<string, unknown> = {}, key = owner) => {
  const res = await rest<{ data: Received[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 60, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};
const ack = (id: string, result?: string) => rest(url(), "POST", `/v1/messages/${id}/ack`, { key: owner, body: result === undefined ? {} : { result } });
const get = async (id: string) => (await rest<MessageJson & { cancel_reason: string | null; dependents_count: number }>(url(), "GET", `/v1/messages/${id}`, { key: owner })).body;

describe("a message with parents", () => {
  it("is blocked until every parent is acknowledged, then delivered with their results", async () => {
    const work = await createChannel(url(), owner);
    const results = await createChannel(url(), owner);
    const a = (await postMessage(url(), owner, work, { content: "a" })).id;
    const b = (await postMessage(url(), owner, work, { content: "b" })).id;
    const posted = await post(results, "aggregate", { depends_on: [a, b] });
    expect(posted.status).toBe(201);
    expect(posted.body.message).toMatchObject({ state: "blocked", depends_on: [a, b] });
    expect((await get(a)).dependents_count).toBe(1);
    expect(await receive(results)).toEqual([]);
    // The workers take both parents (a result is sent by the holder of a claim).
    expect((await receive(work, { max_messages: 2 })).map((r) => r.message.id)).toEqual([a, b]);
    await ack(a, "A");
    expect(await receive(results)).toEqual([]);
    expect((await get(posted.body.message.id)).state).toBe("blocked");
    await ack(b, "B");
    const [agg] = await receive(results);
    expect(agg!.message).toMatchObject({ id: posted.body.message.id, state: "in_flight" });
    expect(agg!.parents.sort((x, y) => (x.result ?? "").localeCompare(y.result ?? ""))).toEqual([
      { message_id: a, channel_id: work, result: "A" },
      { message_id: b, channel_id: work, result: "B" },
    ]);
  });

  it("is ready at once when every parent is already acknowledged", async () => {
    const ch = await createChannel(url(), owner);
    const a = (await postMessage(url(), owner, ch, { content: "a" })).id;
    await receive(ch);
    await ack(a, "done");
    const posted = await post(ch, "next", { depends_on: [a] });
    expect(posted.body.message.state).toBe("ready");
  });

  it("wakes a receive waiting on the dependent's channel when the last parent is acknowledged", async () => {
    const work = await createChannel(url(), owner);
    const results = await createChannel(url(), owner);
    const a = (await postMessage(url(), owner, work, { content: "a" })).id;
    await post(results, "after a", { depends_on: [a] });
    await receive(work);
    const started = Date.now();
    const waiting = receive(results, { wait: 20 });
    await new Promise((r) => setTimeout(r, 200));
    await ack(a, "A");
    expect((await waiting).map((r) => r.message.content)).toEqual(["after a"]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("counts as blocked in the stats", async () => {
    const ch = await createChannel(url(), owner);
    const a = (await postMessage(url(), owner, ch, { content: "a" })).id;
    await post(ch, "after a", { depends_on: [a] });
    expect((await rest<{ blocked: number; ready: number; delayed: number }>(url(), "GET", `/v1/channels/${ch}/stats`, { key: owner })).body).toMatchObject({
      blocked: 1,
      ready: 1,
      delayed: 0,
    });
  });
});

describe("a message's dependents", () => {
  it("are listed, oldest first, by GET /v1/messages/{id}/dependents, also after the parent was acknowledged", async () => {
    const ch = await createChannel(url(), owner);
    const parent = (await postMessage(url(), owner, ch, { content: "fetch" })).id;
    const first = (await post(ch, "summarise", { depends_on: [parent] })).body.message.id;
    const second = (await post(ch, "translate", { depends_on: [parent] })).body.message.id;
    const listed = await rest<{ data: Array<MessageJson & { state: string }> }>(url(), "GET", `/v1/messages/${parent}/dependents`, { key: owner });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((m) => [m.id, m.state])).toEqual([
      [first, "blocked"],
      [second, "blocked"],
    ]);
    await receive(ch);
    await ack(parent, "done");
    const after = await rest<{ data: Array<MessageJson & { state: string }> }>(url(), "GET", `/v1/messages/${parent}/dependents`, { key: owner });
    expect(after.body.data.map((m) => [m.id, m.state])).toEqual([
      [first, "ready"],
      [second, "ready"],
    ]);
  });

  it("are not shown from a restricted channel the caller cannot read", async () => {
    const open = await createChannel(url(), owner);
    const closed = await createChannel(url(), owner, { access: "restricted" });
    const parent = (await postMessage(url(), owner, open, { content: "fetch" })).id;
    await post(closed, "secret step", { depends_on: [parent] });
    const seen = await rest<{ data: MessageJson[] }>(url(), "GET", `/v1/messages/${parent}/dependents`, { key: stranger });
    expect(seen.status).toBe(200);
    expect(seen.body.data).toEqual([]);
    expect((await rest<{ data: MessageJson[] }>(url(), "GET", `/v1/messages/${parent}/dependents`, { key: owner })).body.data).toHaveLength(1);
  });
});

describe("a parent that ends without an acknowledgement", () => {
  it("cancels every descendant, three levels down, with cancel_reason parent_failed", async () => {
    const ch = await createChannel(url(), owner);
    const root = (await postMessage(url(), owner, ch, { content: "root" })).id;
    const child = (await post(ch, "child", { depends_on: [root] })).body.message.id;
    const grandchild = (await post(ch, "grandchild", { depends_on: [child] })).body.message.id;
    const great = (await post(ch, "great-grandchild", { depends_on: [grandchild] })).body.message.id;
    expect((await rest(url(), "POST", `/v1/messages/${root}:cancel`, { key: owner, body: {} })).status).toBe(200);
    for (const id of [child, grandchild, great]) expect(await get(id), id).toMatchObject({ state: "cancelled", cancel_reason: "parent_failed" });
    expect(await receive(ch, { max_messages: 10 })).toEqual([]);
  });

  it("cancels its dependents when it is dead-lettered", async () => {
    const ch = await createChannel(url(), owner, { max_deliveries: 1 });
    const parent = (await postMessage(url(), owner, ch, { content: "fails" })).id;
    const child = (await post(ch, "after", { depends_on: [parent] })).body.message.id;
    const [lease] = await receive(ch);
    await rest(url(), "POST", `/v1/messages/${lease!.message.id}/release`, { key: owner, body: {} });
    // The next receive moves the dead letter out, and cancels what depended on it.
    expect(await receive(ch)).toEqual([]);
    expect(await get(child)).toMatchObject({ state: "cancelled", cancel_reason: "parent_failed" });
  });

  it("cancels its dependents when it expires and the purge moves it", async () => {
    const ch = await createChannel(url(), owner);
    const parent = (await postMessage(url(), owner, ch, { content: "short-lived", ttl_seconds: 1 })).id;
    const child = (await post(ch, "after", { depends_on: [parent] })).body.message.id;
    clock.advanceSeconds(2);
    try {
      await purge(new Db(server.app.pool), clock.now());
      expect(await get(child)).toMatchObject({ state: "cancelled", cancel_reason: "parent_failed" });
    } finally {
      clock.reset();
    }
  });

  it("makes a new message that depends on it cancelled at once", async () => {
    const ch = await createChannel(url(), owner);
    const parent = (await postMessage(url(), owner, ch, { content: "cancelled" })).id;
    await rest(url(), "POST", `/v1/messages/${parent}:cancel`, { key: owner, body: {} });
    const posted = await post(ch, "too late", { depends_on: [parent] });
    expect(posted.status).toBe(201);
    expect(posted.body.message).toMatchObject({ state: "cancelled", cancel_reason: "parent_failed" });
  });
});

describe("a parent cancelled while a worker holds it", () => {
  it("is still pending for a new dependent: its holder may yet acknowledge it, which frees the dependent", async () => {
    const ch = await createChannel(url(), owner);
    const parent = (await postMessage(url(), owner, ch, { content: "in hand" })).id;
    await receive(ch);
    expect((await rest(url(), "POST", `/v1/messages/${parent}:cancel`, { key: owner, body: {} })).body).toMatchObject({ message: { state: "in_flight" } });
    const child = await post(ch, "after", { depends_on: [parent] });
    expect(child.body.message.state).toBe("blocked");
    await ack(parent, "finished anyway");
    const [next] = await receive(ch);
    expect(next).toMatchObject({ message: { id: child.body.message.id }, parents: [{ message_id: parent, result: "finished anyway" }] });
  });

  it("cancels the dependent once its holder gives it back", async () => {
    const ch = await createChannel(url(), owner);
    const parent = (await postMessage(url(), owner, ch, { content: "in hand" })).id;
    await receive(ch);
    await rest(url(), "POST", `/v1/messages/${parent}:cancel`, { key: owner, body: {} });
    const child = (await post(ch, "after", { depends_on: [parent] })).body.message.id;
    await rest(url(), "POST", `/v1/messages/${parent}/release`, { key: owner, body: {} });
    expect(await get(child)).toMatchObject({ state: "cancelled", cancel_reason: "parent_failed" });
  });
});

describe("refusals", () => {
  it("refuses an unknown parent with 422 invalid_depends_on", async () => {
    const res = await post(await createChannel(url(), owner), "x", { depends_on: ["00000000-0000-4000-8000-000000000000"] });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_depends_on");
  });

  it("refuses more than 100 parents, and ids that are not message ids, with 422 invalid_depends_on", async () => {
    const ch = await createChannel(url(), owner);
    const many = Array.from({ length: 101 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`);
    expect((await post(ch, "x", { depends_on: many })).body.error).toBe("invalid_depends_on");
    expect((await post(ch, "x", { depends_on: ["not-an-id"] })).body.error).toBe("invalid_depends_on");
  });

  it("refuses a parent of a channel another key owns with 403 forbidden", async () => {
    const theirs = await createChannel(url(), stranger);
    const parent = (await postMessage(url(), stranger, theirs, { content: "theirs" })).id;
    const res = await post(await createChannel(url(), owner), "x", { depends_on: [parent] });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe("forbidden");
  });
});

describe("a batch", () => {
  const batch = (ch: string, messages: Array<Record<string, unknown>>) =>
    rest<{ data: Array<MessageJson & { depends_on: string[] }>; error?: string; index?: number }>(url(), "POST", `/v1/channels/${ch}/messages:batchCreate`, {
      key: owner,
      body: { messages },
    });

  it("lets an item depend on earlier items by their refs", async () => {
    const ch = await createChannel(url(), owner);
    const res = await batch(ch, [
      { content: "fetch", ref: "fetch" },
      { content: "clean", ref: "clean", depends_on: ["fetch"] },
      { content: "report", depends_on: ["fetch", "clean"] },
    ]);
    expect(res.status).toBe(201);
    const [fetch, clean, report] = res.body.data;
    expect(clean).toMatchObject({ state: "blocked", depends_on: [fetch!.id] });
    expect(report).toMatchObject({ state: "blocked", depends_on: [fetch!.id, clean!.id] });
    const [first] = await receive(ch);
    expect(first!.message.id).toBe(fetch!.id);
    await ack(fetch!.id, "rows");
    const [second] = await receive(ch);
    expect(second).toMatchObject({ message: { id: clean!.id }, parents: [{ message_id: fetch!.id, result: "rows" }] });
    await ack(clean!.id, "clean rows");
    const [third] = await receive(ch);
    expect(third!.message.id).toBe(report!.id);
    expect(third!.parents.map((p) => p.result).sort()).toEqual(["clean rows", "rows"]);
  });

  it.each([
    ["a ref of a later item", [{ content: "a", depends_on: ["later"] }, { content: "b", ref: "later" }], 0],
    ["its own ref", [{ content: "a", ref: "self", depends_on: ["self"] }], 0],
    ["a ref used twice", [{ content: "a", ref: "x" }, { content: "b", ref: "x" }], 1],
    ["an unknown message", [{ content: "a" }, { content: "b", depends_on: ["00000000-0000-4000-8000-000000000000"] }], 1],
  ])("refuses %s with 422 invalid_depends_on at its index, storing nothing", async (_what, messages, index) => {
    const ch = await createChannel(url(), owner);
    const res = await batch(ch, messages);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_depends_on", index });
    expect(await receive(ch, { max_messages: 10 })).toEqual([]);
  });
});

describe("fan-in", () => {
  it("releases an aggregator of 100 parents exactly once, with the 100 results, when 16 workers finish them", async () => {
    const work = await createChannel(url(), owner);
    const results = await createChannel(url(), owner);
    const parents: string[] = [];
    for (let i = 0; i < 100; i++) parents.push((await postMessage(url(), owner, work, { content: `part ${i}` })).id);
    const aggregator = (await post(results, "aggregate", { depends_on: parents })).body.message.id;
    const aggregations: Received[] = [];
    const watcher = (async () => {
      const deadline = Date.now() + 30_000;
      while (aggregations.length === 0 && Date.now() < deadline) aggregations.push(...(await receive(results, { wait: 2 })));
    })();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (;;) {
          const got = await receive(work, { max_messages: 3, wait: 0 });
          if (got.length === 0) return;
          await Promise.all(got.map((r) => ack(r.message.id, `done ${r.message.content}`)));
        }
      }),
    );
    await watcher;
    expect(aggregations.map((r) => r.message.id)).toEqual([aggregator]);
    expect(aggregations[0]!.parents).toHaveLength(100);
    expect(new Set(aggregations[0]!.parents.map((p) => p.result))).toEqual(new Set(Array.from({ length: 100 }, (_, i) => `done part ${i}`)));
    // Exactly once: nothing more comes, now or after the lease would lapse.
    expect(await receive(results)).toEqual([]);
  });
});
