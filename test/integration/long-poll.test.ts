/** Long-poll `wait` (docs/decisions.md#long-poll) over REST and gRPC, on both wake buses, across processes. */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage, type PageJson } from "../support/fixtures.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { mintKey, rest, startTestServer, untilParked, type TestServer } from "../support/server.js";

let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const timed = async <T>(fn: () => Promise<T>) => {
  const started = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - started };
};

const poll = (server: TestServer, key: string, ch: string, query: string) =>
  timed(() => rest<PageJson>(server.url, "GET", `/v1/channels/${ch}/messages${query}`, { key }));

const buses: Array<[string, () => Record<string, string>]> = [
  ["PostgreSQL LISTEN/NOTIFY", () => ({})],
  ["Redis pub/sub", () => ({ REDIS_URL: redis.url })],
];

describe.each(buses)("long-poll over %s", (_name, env) => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    // One key plays every waiter here (100 at once): lift its per-key share.
    server = await startTestServer({ ...env(), AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "3", AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY: "1000" });
    key = await mintKey(server.url);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("returns as soon as a message arrives, not at the deadline", async () => {
    const ch = await createChannel(server.url, key);
    const waiting = poll(server, key, ch, "?since=0&wait=3");
    await untilParked(server, 1);
    await postMessage(server.url, key, ch, { content: "wake up" });
    const { value, ms } = await waiting;
    expect(value.status).toBe(200);
    expect(value.body.data.map((m) => m.content)).toEqual(["wake up"]);
    expect(ms).toBeLessThan(2_000);
  });

  it("returns an empty page at the deadline, echoing the cursor", async () => {
    const ch = await createChannel(server.url, key);
    const { value, ms } = await poll(server, key, ch, "?since=0&wait=1");
    expect(value.body).toEqual({ data: [], limit: 50, next_cursor: "0" });
    expect(ms).toBeGreaterThanOrEqual(900);
  });

  it("caps wait at AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS", async () => {
    const ch = await createChannel(server.url, key);
    const { ms } = await poll(server, key, ch, "?wait=60");
    expect(ms).toBeLessThan(4_500);
  });

  it("answers at once when data exists or wait is 0", async () => {
    const ch = await createChannel(server.url, key);
    expect((await poll(server, key, ch, "?wait=0")).ms).toBeLessThan(500);
    await postMessage(server.url, key, ch, { content: "ready" });
    const { value, ms } = await poll(server, key, ch, "?since=0&wait=3");
    expect(value.body.data).toHaveLength(1);
    expect(ms).toBeLessThan(500);
  });

  it("wakes every one of 100 waiters on one channel", async () => {
    const ch = await createChannel(server.url, key);
    const waiters = Array.from({ length: 100 }, () => poll(server, key, ch, "?since=0&wait=3"));
    await untilParked(server, 100);
    await postMessage(server.url, key, ch, { content: "all hands" });
    const results = await Promise.all(waiters);
    expect(results.every((r) => r.value.body.data.length === 1)).toBe(true);
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(2_900);
  });

  it("gives waiters woken together the same page over REST and gRPC, each answer with its own request id", async () => {
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const restWaiters = Array.from({ length: 20 }, () => poll(server, key, ch, "?since=0&wait=3"));
    const grpcWaiters = Array.from({ length: 5 }, () => client.listMessages({ identifier: ch, since: "0", wait: 3 }, { headers: { "x-api-key": key } }));
    await untilParked(server, 25);
    const posted = await postMessage(server.url, key, ch, { content: "together", metadata: { n: 1 } });
    const restPages = await Promise.all(restWaiters);
    for (const { value } of restPages) {
      expect(value.body).toEqual(restPages[0]?.value.body);
      expect(value.body.data.map((m) => [m.id, m.content])).toEqual([[posted.id, "together"]]);
      expect(value.body.next_cursor).toBe(posted.created_at);
    }
    expect(new Set(restPages.map((p) => p.value.headers.get("x-request-id"))).size).toBe(20);
    for (const page of await Promise.all(grpcWaiters)) {
      expect(page.data.map((m) => [m.id, m.content, m.metadata])).toEqual([[posted.id, "together", { n: 1 }]]);
      expect(page.nextCursor).toBe(posted.created_at);
    }
  });

  it("loses no wake-up when the message lands while the poll starts", async () => {
    for (let i = 0; i < 25; i++) {
      const ch = await createChannel(server.url, key);
      const [polled] = await Promise.all([poll(server, key, ch, "?since=0&wait=3"), postMessage(server.url, key, ch, { content: `race ${i}` })]);
      expect(polled.value.body.data).toHaveLength(1);
      expect(polled.ms).toBeLessThan(2_500);
    }
  });

  it("keeps waiting past a wake-up for messages its status filter excludes", async () => {
    const ch = await createChannel(server.url, key);
    const claimed = await postMessage(server.url, key, ch, { content: "taken" });
    await rest(server.url, "POST", `/v1/messages/${claimed.id}/claim`, { key });
    const waiting = poll(server, key, ch, `?since=${encodeURIComponent(claimed.created_at)}&status=unclaimed&wait=3`);
    await untilParked(server, 1);
    await postMessage(server.url, key, ch, { content: "open" });
    expect((await waiting).value.body.data.map((m) => m.content)).toEqual(["open"]);
  });

  it("long-polls over gRPC too", async () => {
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const waiting = timed(() => client.listMessages({ identifier: ch, since: "0", wait: 3 }, { headers: { "x-api-key": key } }));
    await untilParked(server, 1);
    await postMessage(server.url, key, ch, { content: "grpc wake" });
    const { value, ms } = await waiting;
    expect(value.data.map((m) => m.content)).toEqual(["grpc wake"]);
    expect(ms).toBeLessThan(2_000);
  });
});

describe("long-poll across service processes", () => {
  it.each(buses)("wakes a waiter on one process when another process writes (%s)", async (_name, env) => {
    const a = await startTestServer({ ...env() });
    const b = await startTestServer({ ...env(), DATABASE_URL: a.databaseUrl });
    try {
      const key = await mintKey(a.url);
      const ch = await createChannel(a.url, key);
      const waiting = poll(b, key, ch, "?since=0&wait=5");
      await untilParked(b, 1);
      await postMessage(a.url, key, ch, { content: "from a" });
      const { value, ms } = await waiting;
      expect(value.body.data.map((m) => m.content)).toEqual(["from a"]);
      expect(ms).toBeLessThan(3_000);
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe("waiters per key", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "5", AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY: "1" });
  });
  afterAll(async () => {
    await server?.close();
  });

  /** Settles to the poll's page; `settled` tells whether it has. */
  function tracked(key: string, ch: string) {
    const state = { settled: false };
    const done = poll(server, key, ch, "?since=0&wait=5").then((r) => ((state.settled = true), r.value));
    return { state, done };
  }

  /** Opens a watch over gRPC and reads its opening item; the caller aborts it. */
  async function openWatch(key: string, ch: string, abort: AbortController) {
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const stream = client.watchMessages({ identifier: ch }, { headers: { "x-api-key": key }, signal: abort.signal })[Symbol.asyncIterator]();
    await stream.next();
    return stream;
  }

  it("answers a key at its cap at once, like wait=0, while another key still long-polls", async () => {
    const busy = await mintKey(server.url);
    const other = await mintKey(server.url);
    const ch = await createChannel(server.url, busy);
    const held = tracked(busy, ch);
    await untilParked(server, 1);
    const atCap = await poll(server, busy, ch, "?since=0&wait=5");
    expect(atCap.value.body).toEqual({ data: [], limit: 50, next_cursor: "0" });
    expect(held.state.settled).toBe(false);
    const waiting = tracked(other, ch);
    await untilParked(server, 2);
    expect(waiting.state.settled).toBe(false);
    await postMessage(server.url, busy, ch, { content: "for both" });
    expect((await held.done).body.data.map((m) => m.content)).toEqual(["for both"]);
    expect((await waiting.done).body.data.map((m) => m.content)).toEqual(["for both"]);
  });

  it("gives the slot back when the long-poll ends", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const first = tracked(key, ch);
    await untilParked(server, 1);
    await postMessage(server.url, key, ch, { content: "one" });
    await first.done;
    const other = await createChannel(server.url, key);
    const second = tracked(key, other);
    await untilParked(server, 1);
    expect(second.state.settled).toBe(false);
    await postMessage(server.url, key, other, { content: "two" });
    expect((await second.done).body.data.map((m) => m.content)).toEqual(["two"]);
  });

  it("counts a watch stream: the key's long-poll is answered at once and a second watch is refused with 429 too_many_waiters", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const abort = new AbortController();
    try {
      await openWatch(key, ch, abort);
      expect((await poll(server, key, ch, "?since=0&wait=5")).value.body.data).toEqual([]);
      const refused = await openWatch(key, ch, new AbortController()).catch((e: unknown) => e);
      expect(ConnectError.from(refused).code).toBe(Code.ResourceExhausted);
      expect(ConnectError.from(refused).findDetails(ErrorDetailSchema)[0]?.error).toBe("too_many_waiters");
      const sse = await fetch(`${server.url}/v1/channels/${ch}/messages:stream`, { headers: { "X-API-Key": key } });
      expect(sse.status).toBe(429);
      expect(await sse.json()).toMatchObject({ error: "too_many_waiters", suggestion: expect.any(String) });
    } finally {
      abort.abort();
    }
  });

  it("gives a watch's slot back when the stream closes", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key);
    const first = new AbortController();
    await openWatch(key, ch, first);
    first.abort();
    // The server learns of the cancel asynchronously: retry until the slot is free.
    const second = new AbortController();
    try {
      for (let attempt = 0; ; attempt++) {
        const opened = await openWatch(key, ch, second).then(
          () => true,
          (e: unknown) => (attempt < 50 && ConnectError.from(e).code === Code.ResourceExhausted ? false : Promise.reject(e)),
        );
        if (opened) break;
        // Real time: the cancel travels over the network; no clock of ours decides when it lands.
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      second.abort();
    }
  });
});

describe("invalid wait", () => {
  it("answers 422 invalid_wait for a negative or non-numeric wait", async () => {
    const server = await startTestServer();
    try {
      const key = await mintKey(server.url);
      const ch = await createChannel(server.url, key);
      for (const q of ["?wait=-1", "?wait=soon"]) {
        const res = await rest(server.url, "GET", `/v1/channels/${ch}/messages${q}`, { key });
        expect(res.status, q).toBe(422);
        expect(res.body).toMatchObject({ error: "invalid_wait" });
      }
    } finally {
      await server.close();
    }
  });
});
