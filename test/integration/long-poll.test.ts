/** Long-poll `wait` (M3) over REST and gRPC, on both wake buses, across processes. */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage, type PageJson } from "../support/fixtures.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

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
    server = await startTestServer({ ...env(), AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "3" });
    key = await mintKey(server.url);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("returns as soon as a message arrives, not at the deadline", async () => {
    const ch = await createChannel(server.url, key);
    const waiting = poll(server, key, ch, "?since=0&wait=3");
    await new Promise((r) => setTimeout(r, 150));
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
    await new Promise((r) => setTimeout(r, 300));
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
    await new Promise((r) => setTimeout(r, 300));
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
    await new Promise((r) => setTimeout(r, 100));
    await postMessage(server.url, key, ch, { content: "open" });
    expect((await waiting).value.body.data.map((m) => m.content)).toEqual(["open"]);
  });

  it("long-polls over gRPC too", async () => {
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const waiting = timed(() => client.listMessages({ identifier: ch, since: "0", wait: 3 }, { headers: { "x-api-key": key } }));
    await new Promise((r) => setTimeout(r, 150));
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
      await new Promise((r) => setTimeout(r, 300));
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
