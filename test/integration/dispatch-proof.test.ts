/**
 * Proof of issue 28 (item 8): message groups, fair dispatch, priorities and
 * shared limits hold under real concurrency, against real PostgreSQL
 * (docs/decisions.md#message-groups, #dispatch, #priorities, #shared-limits).
 *
 * Over REST only, as a fleet of workers would call it. What needs several
 * service processes runs on two `agentbus serve` children over one
 * database; what needs time to pass runs on in-process replicas that share an
 * injected clock. The checks are client-side, on what the workers saw (a
 * message is "held" from the receive answer that leased it until the
 * ack/release request for it is sent: inside the service's in-flight
 * interval, so two held at once means two were in flight at once), and on
 * the service's own stamps (claimed_at, acknowledged_by.occurred_at) and live
 * counts (GET /v1/limits/{name}).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AdjustableClock } from "../support/clock.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { createChannel, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mulberry32 } from "../support/random.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

// ---------------------------------------------------------------- helpers

interface Draft {
  content: string;
  group_key?: string;
  priority?: number;
  limits?: string[];
}

interface LimitJson {
  name: string;
  max_in_flight: number | null;
  rate: { count: number; per_seconds: number } | null;
  in_flight: number;
  used_in_window: number;
  created_at: string;
}

interface AckJson {
  status: string;
  message: MessageJson;
}

/** Posts `drafts` in order, 100 a batchCreate, one batch after the other; returns the stored messages. */
async function postInOrder(base: string, key: string, channel: string, drafts: Draft[]): Promise<MessageJson[]> {
  const stored: MessageJson[] = [];
  for (let i = 0; i < drafts.length; i += 100) {
    const res = await rest<{ data: MessageJson[] }>(base, "POST", `/v1/channels/${channel}/messages:batchCreate`, { key, body: { messages: drafts.slice(i, i + 100) } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    stored.push(...res.body.data);
  }
  return stored;
}

const receive = (base: string, key: string, channel: string, body: Record<string, unknown>) =>
  rest<{ data: ReceivedJson[] }>(base, "POST", `/v1/channels/${channel}/messages:receive`, { key, body });
const ack = (base: string, key: string, id: string) => rest<AckJson>(base, "POST", `/v1/messages/${id}/ack`, { key, body: {} });
const release = (base: string, key: string, id: string) => rest(base, "POST", `/v1/messages/${id}/release`, { key, body: {} });

async function createLimit(base: string, key: string, body: Record<string, unknown>): Promise<void> {
  const res = await rest(base, "POST", "/v1/limits", { key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

/** A service timestamp (RFC 3339, up to microseconds, UTC) in microseconds since the epoch, exactly. */
function micros(ts: string): number {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?Z$/.exec(ts);
  if (!m) throw new Error(`not a service timestamp: ${ts}`);
  return Date.parse(`${m[1]}Z`) * 1000 + Number((m[2] ?? "").padEnd(6, "0"));
}

/** The message's group and index from content "<group>:<index>". */
function parseTask(content: string): { group: string; index: number } {
  const at = content.lastIndexOf(":");
  return { group: content.slice(0, at), index: Number(content.slice(at + 1)) };
}

/** Whatever a worker loop ran into that the API does not promise: a refusal, an answer of the wrong shape. */
class Problems {
  readonly list: string[] = [];
  add(what: string): void {
    if (this.list.length < 20) this.list.push(what);
  }
}

// ---------------------------------------------------------------- two service processes over one database

describe("two service processes over one database", () => {
  let db: TestDatabase;
  const procs: ServiceProcess[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    const env = {
      DATABASE_URL: db.url,
      AGENTBUS_RATE_LIMIT: "0",
      AGENTBUS_KEY_MINT_LIMIT: "0",
      AGENTBUS_WORKERS: "false",
      AGENTBUS_DB_POOL_SIZE: "24",
      // The "listening on" line startServiceProcess waits for is an info line.
      AGENTBUS_LOG_LEVEL: "info",
    };
    procs.push(...(await Promise.all([startServiceProcess(env), startServiceProcess(env)])));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(procs.map((p) => stopServiceProcess(p, 10_000)));
    await db?.drop();
  });

  it("keeps each group of a group_concurrency 1 channel strictly FIFO for 32 receivers on 2 processes that release 10 % at random", async () => {
    const GROUPS = 50;
    const PER_GROUP = 40;
    const TOTAL = GROUPS * PER_GROUP;
    const RECEIVERS = 32;
    const [a, b] = procs.map((p) => p.url) as [string, string];
    const owner = await mintKey(a, "fifo-owner");
    const ch = await createChannel(a, owner, { group_concurrency: 1 });
    // Interleaved: every group's i-th message before any group's (i+1)-th.
    const drafts: Draft[] = [];
    for (let i = 0; i < PER_GROUP; i++) for (let g = 0; g < GROUPS; g++) drafts.push({ content: `g${g}:${i}`, group_key: `g${g}` });
    await postInOrder(a, owner, ch, drafts);

    const keys = await Promise.all(Array.from({ length: RECEIVERS }, (_, i) => mintKey(i % 2 === 0 ? a : b, `fifo-receiver-${i}`)));
    const problems = new Problems();
    /** group → the message id a receiver holds now. */
    const held = new Map<string, string>();
    /** group → indexes in the order their acks were sent. */
    const ackOrder = new Map<string, number[]>();
    /** message id → the service's acknowledgement time (µs). */
    const ackedAt = new Map<string, { group: string; index: number; at: number }>();
    const twoInFlight: string[] = [];
    const outOfOrder: string[] = [];
    let acked = 0;
    let releases = 0;
    const deadline = performance.now() + 90_000;

    const receiver = async (n: number) => {
      const base = n % 2 === 0 ? a : b;
      const key = keys[n]!;
      const random = mulberry32(2800 + n);
      while (acked < TOTAL && performance.now() < deadline) {
        const res = await receive(base, key, ch, { max_messages: 1 + Math.floor(random() * 4), lease_seconds: 30, wait: 0 });
        if (res.status !== 200) {
          problems.add(`receive → ${res.status} ${JSON.stringify(res.body)}`);
          continue;
        }
        const got = res.body.data;
        for (const { message: m } of got) {
          const { group, index } = parseTask(m.content);
          if (m.group_key !== group) problems.add(`${m.content} came with group_key ${JSON.stringify(m.group_key)}`);
          const other = held.get(group);
          if (other !== undefined) twoInFlight.push(`${m.content} (${m.id}) delivered while ${other} of ${group} was held`);
          const next = ackOrder.get(group)?.length ?? 0;
          if (index !== next) outOfOrder.push(`${m.content} delivered while ${group}:${next} was not yet acknowledged`);
          held.set(group, m.id);
        }
        if (got.length === 0) {
          // Real time: nothing open right now; look again shortly.
          await sleep(5 + random() * 10);
          continue;
        }
        for (const { message: m } of got) {
          const { group, index } = parseTask(m.content);
          if (held.get(group) === m.id) held.delete(group);
          if (random() < 0.1) {
            releases++;
            const r = await release(base, key, m.id);
            if (r.status !== 200) problems.add(`release ${m.content} → ${r.status} ${JSON.stringify(r.body)}`);
            continue;
          }
          const order = ackOrder.get(group) ?? [];
          order.push(index);
          ackOrder.set(group, order);
          acked++;
          const r = await ack(base, key, m.id);
          if (r.status !== 200 || r.body.status !== "acknowledged") {
            problems.add(`ack ${m.content} → ${r.status} ${JSON.stringify(r.body)}`);
            continue;
          }
          ackedAt.set(m.id, { group, index, at: micros(r.body.message.acknowledged_by[0]!.occurred_at) });
        }
      }
    };
    await Promise.all(Array.from({ length: RECEIVERS }, (_, n) => receiver(n)));

    expect(problems.list).toEqual([]);
    expect(twoInFlight).toEqual([]);
    expect(outOfOrder).toEqual([]);
    expect(acked).toBe(TOTAL);
    expect(releases).toBeGreaterThan(0);
    const inOrder = Array.from({ length: PER_GROUP }, (_, i) => i);
    for (let g = 0; g < GROUPS; g++) expect(ackOrder.get(`g${g}`), `g${g}`).toEqual(inOrder);
    // The service's acknowledgement times put each group in posting order too.
    const byService = new Map<string, Array<{ index: number; at: number }>>();
    for (const x of ackedAt.values()) byService.set(x.group, [...(byService.get(x.group) ?? []), x]);
    for (const [group, acks] of byService) expect(acks.sort((p, q) => p.at - q.at).map((x) => x.index), group).toEqual(inOrder);
  }, 120_000);

  it("never has more than max_in_flight 5 of a limit shared by two channels in flight, for 32 receivers on 2 processes", async () => {
    const PER_CHANNEL = 100;
    const RECEIVERS = 32;
    const MAX = 5;
    const [a, b] = procs.map((p) => p.url) as [string, string];
    const owner = await mintKey(a, "limit-owner");
    const limit = "model-quota";
    await createLimit(a, owner, { name: limit, max_in_flight: MAX });
    const channels = [await createChannel(a, owner, { limits: [limit] }), await createChannel(b, owner, { limits: [limit] })];
    for (const [c, ch] of channels.entries()) await postInOrder(a, owner, ch, Array.from({ length: PER_CHANNEL }, (_, i) => ({ content: `c${c}:${i}` })));
    const total = channels.length * PER_CHANNEL;

    const keys = await Promise.all(Array.from({ length: RECEIVERS }, (_, i) => mintKey(i % 2 === 0 ? a : b, `limit-receiver-${i}`)));
    const problems = new Problems();
    const held = new Set<string>();
    let peak = 0;
    let acked = 0;
    const deadline = performance.now() + 90_000;

    // The service's own count, sampled from both processes while the receivers run.
    const sampled: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      for (let i = 0; sampling; i++) {
        const res = await rest<LimitJson>(i % 2 === 0 ? a : b, "GET", `/v1/limits/${limit}`, { key: owner });
        if (res.status !== 200) problems.add(`GET limit → ${res.status} ${JSON.stringify(res.body)}`);
        else sampled.push(res.body.in_flight);
        // Real time: a sample every 20 ms.
        await sleep(20);
      }
    })();

    const receiver = async (n: number) => {
      const base = n % 2 === 0 ? a : b;
      const key = keys[n]!;
      const random = mulberry32(5500 + n);
      while (acked < total && performance.now() < deadline) {
        const ch = channels[Math.floor(random() * channels.length)]!;
        const res = await receive(base, key, ch, { max_messages: 1 + Math.floor(random() * 4), lease_seconds: 30, wait: 0 });
        if (res.status !== 200) {
          problems.add(`receive → ${res.status} ${JSON.stringify(res.body)}`);
          continue;
        }
        const got = res.body.data;
        for (const { message: m } of got) held.add(m.id);
        peak = Math.max(peak, held.size);
        // Real time: work takes a little while (or, with nothing received, look again shortly).
        await sleep(got.length === 0 ? 20 + random() * 20 : 2 + random() * 8);
        for (const { message: m } of got) {
          held.delete(m.id);
          acked++;
          const r = await ack(base, key, m.id);
          if (r.status !== 200) problems.add(`ack ${m.content} → ${r.status} ${JSON.stringify(r.body)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: RECEIVERS }, (_, n) => receiver(n)));
    sampling = false;
    await sampler;

    expect(problems.list).toEqual([]);
    expect(acked).toBe(total);
    expect(peak).toBeLessThanOrEqual(MAX);
    expect(sampled.length).toBeGreaterThan(0);
    expect(Math.max(...sampled)).toBeLessThanOrEqual(MAX);
    const after = await rest<LimitJson>(a, "GET", `/v1/limits/${limit}`, { key: owner });
    expect(after.body.in_flight).toBe(0);
  }, 120_000);
});

// ---------------------------------------------------------------- in-process replicas with an injected clock

describe("in-process replicas over one database, one injected clock", () => {
  // Wall time that follows real time and that a test can step forward.
  // PostgreSQL stamps created_at in real time, so each test resets it.
  const clock = new AdjustableClock();
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn", AGENTBUS_DB_POOL_SIZE: "20" }, { clock });
    b = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn", AGENTBUS_DB_POOL_SIZE: "20", DATABASE_URL: a.databaseUrl }, { clock });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });
  afterEach(() => clock.reset());

  it("acknowledges all 200 messages of 20 small groups before the 600th of a 5,000-message group posted first, with fair dispatch and 8 workers", async () => {
    const WORKERS = 8;
    const owner = await mintKey(a.url, "fair-owner");
    const ch = await createChannel(a.url, owner, { dispatch: "fair" });
    await postInOrder(a.url, owner, ch, Array.from({ length: 5000 }, (_, i) => ({ content: `big:${i}`, group_key: "big" })));
    const small: Draft[] = [];
    for (let g = 0; g < 20; g++) for (let i = 0; i < 10; i++) small.push({ content: `small${g}:${i}`, group_key: `small${g}` });
    await postInOrder(a.url, owner, ch, small);

    const keys = await Promise.all(Array.from({ length: WORKERS }, (_, i) => mintKey(a.url, `fair-worker-${i}`)));
    const problems = new Problems();
    const acks: Array<{ big: boolean; at: number }> = [];
    let smallAcked = 0;
    let bigAcked = 0;
    const deadline = performance.now() + 60_000;
    const worker = async (n: number) => {
      const base = n % 2 === 0 ? a.url : b.url;
      while (smallAcked < 200 && bigAcked < 600 && performance.now() < deadline) {
        const res = await receive(base, keys[n]!, ch, { max_messages: 1, lease_seconds: 60, wait: 0 });
        if (res.status !== 200) {
          problems.add(`receive → ${res.status} ${JSON.stringify(res.body)}`);
          continue;
        }
        for (const { message: m } of res.body.data) {
          const r = await ack(base, keys[n]!, m.id);
          if (r.status !== 200) {
            problems.add(`ack ${m.content} → ${r.status} ${JSON.stringify(r.body)}`);
            continue;
          }
          const big = m.content.startsWith("big:");
          if (m.group_key !== parseTask(m.content).group) problems.add(`${m.content} came with group_key ${JSON.stringify(m.group_key)}`);
          if (big) bigAcked++;
          else smallAcked++;
          acks.push({ big, at: micros(r.body.message.acknowledged_by[0]!.occurred_at) });
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, n) => worker(n)));

    expect(problems.list).toEqual([]);
    acks.sort((p, q) => p.at - q.at);
    const lastSmall = acks.findLastIndex((x) => !x.big);
    const bigBeforeLastSmall = acks.slice(0, lastSmall + 1).filter((x) => x.big).length;
    expect(acks.filter((x) => !x.big)).toHaveLength(200);
    expect(bigBeforeLastSmall).toBeLessThan(600);
  }, 120_000);

  it("hands a priority-1 message to the very next receive while priority-5 messages keep arriving", async () => {
    const owner = await mintKey(a.url, "priority-owner");
    const worker = await mintKey(a.url, "priority-worker");
    const ch = await createChannel(a.url, owner);
    let posting = true;
    let posted = 0;
    const poster = (async () => {
      while (posting) {
        const res = await rest(b.url, "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: `p5:${posted}`, priority: 5 } });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        posted++;
      }
    })();
    try {
      for (let round = 0; round < 3; round++) {
        const before = posted;
        // Real time: let the flow of priority-5 work build up a backlog first.
        while (posted < before + 20) await sleep(5);
        const urgent = await rest<{ message: MessageJson }>(a.url, "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: `p1:${round}`, priority: 1 } });
        expect(urgent.status).toBe(201);
        const res = await receive(a.url, worker, ch, { max_messages: 1, wait: 0 });
        expect(res.status).toBe(200);
        expect(res.body.data.map((r) => [r.message.content, r.message.priority])).toEqual([[`p1:${round}`, 1]]);
      }
    } finally {
      posting = false;
      await poster;
    }
  }, 60_000);

  // Real time, scaled down tenfold (aging 1 s, bound 2.5 s): the injected
  // clock cannot stand in here. A message's wait is the receive's clock
  // reading minus its created_at, which PostgreSQL stamps in real time, so
  // moving the clock ages every message alike, fresh posts included: with
  // aging 10 s and the clock moved a second at a time, the priority-5
  // message went only after 39 s, once every message had been lifted to
  // priority 1 and it was merely the oldest.
  it("delivers a priority-5 message under a flood of fresh priority-3 posts once it has waited two aging intervals (priority_aging_seconds 1, real time)", async () => {
    const owner = await mintKey(a.url, "aging-owner");
    const worker = await mintKey(a.url, "aging-worker");
    const ch = await createChannel(a.url, owner, { priority_aging_seconds: 1 });
    const [low] = await postInOrder(a.url, owner, ch, [{ content: "low", priority: 5 }]);
    // Five priority-3 posts, then a receive of five, over and over: the
    // flood goes on as fast as the workers take it, so the priority-3 work
    // waiting is always fresh.
    let waited: number | undefined;
    const deadline = performance.now() + 20_000;
    for (let turn = 0; waited === undefined && performance.now() < deadline; turn++) {
      await postInOrder(
        b.url,
        owner,
        ch,
        Array.from({ length: 5 }, (_, i) => ({ content: `flood:${turn}:${i}`, priority: 3 })),
      );
      const res = await receive(a.url, worker, ch, { max_messages: 5, wait: 0 });
      expect(res.status).toBe(200);
      const got = res.body.data.find((r) => r.message.id === low!.id);
      if (got) waited = (micros(got.message.claimed_at!) - micros(low!.created_at)) / 1e6;
      const ids = res.body.data.map((r) => r.message.id);
      if (ids.length > 0) expect((await rest(a.url, "POST", "/v1/messages:batchAck", { key: worker, body: { message_ids: ids } })).status).toBe(200);
    }
    expect(waited).toBeDefined();
    // Not before two intervals (priority 5 → 3, a tie with fresh priority 3 that the older wins), and soon after.
    expect(waited!).toBeGreaterThanOrEqual(2);
    expect(waited!).toBeLessThanOrEqual(2.5);
  }, 60_000);

  it("puts no more than 100 deliveries in any 10-second window of a rate {count: 100, per_seconds: 10} limit, on 2 replicas (clock injected)", async () => {
    const owner = await mintKey(a.url, "rate-owner");
    const limit = "rate-quota";
    await createLimit(a.url, owner, { name: limit, rate: { count: 100, per_seconds: 10 } });
    const ch = await createChannel(a.url, owner, { limits: [limit] });
    await postInOrder(a.url, owner, ch, Array.from({ length: 450 }, (_, i) => ({ content: `r:${i}` })));
    const keys = await Promise.all(Array.from({ length: 8 }, (_, i) => mintKey(a.url, `rate-worker-${i}`)));
    const problems = new Problems();
    /** claimed_at of every delivery, by the service's clock (µs). */
    const deliveries: number[] = [];
    const used: number[] = [];
    // Each clock second, eight workers (four on each replica) ask for ten at once, then acknowledge what they got.
    for (let second = 0; second < 35; second++) {
      await Promise.all(
        keys.map(async (key, n) => {
          const base = n % 2 === 0 ? a.url : b.url;
          const res = await receive(base, key, ch, { max_messages: 10, lease_seconds: 60, wait: 0 });
          if (res.status !== 200) {
            problems.add(`receive → ${res.status} ${JSON.stringify(res.body)}`);
            return;
          }
          for (const { message: m } of res.body.data) deliveries.push(micros(m.claimed_at!));
          const ids = res.body.data.map((r) => r.message.id);
          if (ids.length === 0) return;
          const r = await rest(base, "POST", "/v1/messages:batchAck", { key, body: { message_ids: ids } });
          if (r.status !== 200) problems.add(`batchAck → ${r.status} ${JSON.stringify(r.body)}`);
        }),
      );
      const res = await rest<LimitJson>(b.url, "GET", `/v1/limits/${limit}`, { key: owner });
      if (res.status !== 200) problems.add(`GET limit → ${res.status} ${JSON.stringify(res.body)}`);
      else used.push(res.body.used_in_window);
      clock.advanceSeconds(1);
    }

    expect(problems.list).toEqual([]);
    deliveries.sort((p, q) => p - q);
    let busiest = 0;
    for (let end = 0, start = 0; end < deliveries.length; end++) {
      // The window (t - 10 s, t] ending at this delivery.
      while (deliveries[start]! <= deliveries[end]! - 10_000_000) start++;
      busiest = Math.max(busiest, end - start + 1);
    }
    expect(busiest).toBeLessThanOrEqual(100);
    expect(Math.max(...used)).toBeLessThanOrEqual(100);
    // The rate lets its full count through in each window: about 100 per 10 s over 35 s.
    expect(deliveries.length).toBeGreaterThanOrEqual(300);
  }, 120_000);

  it("leaves a message whose limit is full ready, and delivers a later message without that limit in its place", async () => {
    const owner = await mintKey(a.url, "full-owner");
    const worker = await mintKey(a.url, "full-worker");
    const limit = "one-at-a-time";
    await createLimit(a.url, owner, { name: limit, max_in_flight: 1 });
    const ch = await createChannel(a.url, owner);
    const [first, waiting, free] = await postInOrder(a.url, owner, ch, [
      { content: "first", limits: [limit] },
      { content: "waiting", limits: [limit] },
      { content: "free" },
    ]);
    const one = await receive(a.url, worker, ch, { max_messages: 1 });
    expect(one.body.data.map((r) => r.message.id)).toEqual([first!.id]);

    const next = await receive(b.url, worker, ch, { max_messages: 10 });
    expect(next.status).toBe(200);
    expect(next.body.data.map((r) => r.message.id)).toEqual([free!.id]);
    const still = await rest<MessageJson>(a.url, "GET", `/v1/messages/${waiting!.id}`, { key: owner });
    expect(still.body).toMatchObject({ claimed_by: null, delivery_count: 0 });

    expect((await ack(a.url, worker, first!.id)).status).toBe(200);
    const last = await receive(b.url, worker, ch, { max_messages: 10 });
    expect(last.body.data.map((r) => r.message.id)).toEqual([waiting!.id]);
  });
});
