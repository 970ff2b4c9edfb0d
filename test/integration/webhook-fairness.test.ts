/**
 * Webhook deliveries isolated per destination and per owning key (docs/decisions.md#webhook-isolation), the circuit
 * breaker for receivers that never answer, and replay-resistant signatures
 * (Standard Webhooks), against real receivers on 127.0.0.1. Latencies are
 * compared with a baseline measured in the same test.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { verifySignature, verifyStandardSignature, WebhookReceiver } from "../fakes/webhook-receiver.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { eventually } from "../support/eventually.js";
import { mintKey, rest, useTestServer, type SuiteServer } from "../support/server.js";
import { forSuite } from "../support/suite.js";

/** Accepts connections and never answers: a tarpit that holds each request until the sender's timeout. */
class DeadReceiver {
  private readonly sockets = new Set<Socket>();
  private constructor(private readonly server: Server) {
    server.on("connection", (s) => {
      this.sockets.add(s);
      // Read and discard the request: unread bytes would hide the sender's close, and the count would keep
      // connections the sender has long given up.
      s.resume();
      s.on("close", () => this.sockets.delete(s));
    });
  }
  static async start(): Promise<DeadReceiver> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return new DeadReceiver(server);
  }
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  get connections(): number {
    return this.sockets.size;
  }
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

interface DeliveryJson {
  attempt: number;
  status: string;
  error: string | null;
  response_status: number | null;
  next_attempt_at: string | null;
}

async function deliveryLog(base: string, key: string, channel: string): Promise<DeliveryJson[]> {
  const res = await rest<{ data: DeliveryJson[] }>(base, "GET", `/v1/channels/${channel}/webhook-deliveries?limit=100`, { key });
  expect(res.status).toBe(200);
  return res.body.data;
}

/** A server that runs the webhook workers and may deliver to receivers on 127.0.0.1. */
const DELIVERING = { AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" };

/** A receiver for the enclosing suite (see forSuite); declared before the server, so the server stops first and its last deliveries still meet a listener. */
const useReceiver = (): WebhookReceiver => forSuite(() => WebhookReceiver.start(), (hook) => hook.close());

/** Post to commit to the receiver having the body, in ms. */
async function pushLatency(server: SuiteServer, key: string, channel: string, hook: WebhookReceiver): Promise<number> {
  const before = hook.requests.length;
  const started = performance.now();
  await postMessage(server.url, key, channel, { content: `ping ${before}` });
  await hook.waitFor(before + 1, 30_000);
  return hook.requests[before]!.receivedAt - started;
}

describe("per-destination slots", () => {
  const dead = forSuite(() => DeadReceiver.start(), (receiver) => receiver.close());
  const hook = useReceiver();
  const server = useTestServer({
    ...DELIVERING,
    AGENTBUS_WEBHOOK_CONCURRENCY: "4",
    AGENTBUS_WEBHOOK_DESTINATION_CONCURRENCY: "1",
    AGENTBUS_WEBHOOK_TIMEOUT_MS: "1500",
    // Slots alone here; the breaker has its own test.
    AGENTBUS_WEBHOOK_BREAKER_THRESHOLD: "0",
  });

  it("delivers another owner's webhook within a few times its baseline while 20 channels point at a receiver that never answers", async () => {
    const victim = await mintKey(server.url);
    const attacker = await mintKey(server.url);
    const channel = await createChannel(server.url, victim, { webhook_url: hook.url });
    await pushLatency(server, victim, channel, hook); // connections warm
    const baseline = Math.min(...[await pushLatency(server, victim, channel, hook), await pushLatency(server, victim, channel, hook)]);

    for (let i = 0; i < 20; i++) {
      const ch = await createChannel(server.url, attacker, { webhook_url: dead.url });
      await postMessage(server.url, attacker, ch, { content: `to nowhere ${i}` });
    }
    await eventually(async () => dead.connections > 0, 20_000);
    const underAttack = Math.max(await pushLatency(server, victim, channel, hook), await pushLatency(server, victim, channel, hook));
    console.log(`webhook latency: baseline ${baseline.toFixed(1)} ms, with 20 channels at a dead receiver ${underAttack.toFixed(1)} ms`);
    // The dead receiver holds its one slot, never the others.
    expect(dead.connections).toBeLessThanOrEqual(1);
    expect(underAttack).toBeLessThan(Math.max(baseline, 25) * 10);
  }, 60_000);
});

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Push latencies (ms) one after another for `ms`, a post every 50 ms or so; `each` runs after every push. */
async function pushLatenciesFor(ms: number, push: () => Promise<number>, each: () => void = () => {}): Promise<number[]> {
  const latencies: number[] = [];
  for (const until = performance.now() + ms; performance.now() < until; ) {
    latencies.push(await push());
    each();
    // Real time: bounded load on a small machine, and the same pace with and without the attack.
    await new Promise((r) => setTimeout(r, 50));
  }
  return latencies;
}

describe("per-owner slots", () => {
  const tarpits = forSuite(
    async () => Promise.all(Array.from({ length: 24 }, () => DeadReceiver.start())),
    async (all) => {
      await Promise.all(all.map((t) => t.close()));
    },
  );
  const hook = useReceiver();
  const server = useTestServer({
    ...DELIVERING,
    // Defaults otherwise: 16 slots, 2 per destination, 16 / 4 = 4 per owner.
    AGENTBUS_WEBHOOK_TIMEOUT_MS: "2500",
    // The owner's share alone: the breaker would end the attack after a few rounds of timeouts.
    AGENTBUS_WEBHOOK_BREAKER_THRESHOLD: "0",
  });

  it("delivers another key's webhook within 3× its idle latency while one key keeps posting to 24 channels at 24 tarpits", async () => {
    const victim = await mintKey(server.url);
    const attacker = await mintKey(server.url);
    const channel = await createChannel(server.url, victim, { webhook_url: hook.url });
    const push = () => pushLatency(server, victim, channel, hook);
    for (let i = 0; i < 3; i++) await push(); // connections and prepared statements warm
    const idle = median(await pushLatenciesFor(700, push));

    const traps: string[] = [];
    for (const tarpit of tarpits) traps.push(await createChannel(server.url, attacker, { webhook_url: tarpit.url }));
    const held = () => tarpits.reduce((n, t) => n + t.connections, 0);
    // A burst first, three posts per channel (eight at a time): the tarpits' requests start, and time out, together.
    for (let i = 0; i < traps.length * 3; i += 8) {
      await Promise.all(traps.slice(i % traps.length, (i % traps.length) + 8).map((trap, j) => postMessage(server.url, attacker, trap, { content: `burst ${i + j}` })));
    }
    let attacking = true;
    const attack = (async () => {
      // Round the 24 channels, each post a first attempt to a tarpit: about 40 a second, far more than the
      // tarpits release, so its backlog only grows.
      for (let i = 0; attacking; i++) {
        await postMessage(server.url, attacker, traps[i % traps.length]!, { content: `into the tarpit ${i}` });
        // Real time: the CPU stays with the service's dispatching on a small machine, not with this loop.
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await eventually(async () => held() >= 4, 10_000);
      // For longer than the timeout, so the attacker's slots also free and fill again meanwhile.
      let most = 0;
      const latencies = await pushLatenciesFor(3_500, push, () => (most = Math.max(most, held())));
      const underAttack = median(latencies);
      console.log(
        `webhook latency p50: idle ${idle.toFixed(1)} ms; ${latencies.length} posts while one key's 24 tarpits held up to ${most} requests: ${underAttack.toFixed(1)} ms (max ${Math.max(...latencies).toFixed(1)} ms)`,
      );
      // The attacker holds its share of the slots (a quarter), never the rest.
      expect(most).toBeLessThanOrEqual(4);
      expect(underAttack).toBeLessThan(3 * idle);
    } finally {
      attacking = false;
      await attack;
    }
  }, 60_000);
});

describe("circuit breaker", () => {
  const hook = useReceiver();
  const server = useTestServer({
    ...DELIVERING,
    AGENTBUS_WEBHOOK_TIMEOUT_MS: "300",
    AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "100ms,100ms,100ms,100ms,100ms,100ms",
    AGENTBUS_WEBHOOK_BREAKER_THRESHOLD: "2",
    AGENTBUS_WEBHOOK_BREAKER_OPEN_MS: "1000",
    AGENTBUS_WEBHOOK_BREAKER_MAX_OPEN_MS: "4000",
  });

  it("stops attempting a destination after consecutive timeouts, logs deferred entries, and delivers everything once it answers", async () => {
    const key = await mintKey(server.url);
    const channel = await createChannel(server.url, key, { webhook_url: hook.url });
    hook.slow(5_000);
    for (let i = 0; i < 3; i++) await postMessage(server.url, key, channel, { content: `held ${i}` });
    const deferred = await eventually(async () => {
      const log = await deliveryLog(server.url, key, channel);
      const held = log.filter((d) => d.status === "deferred");
      return held.length > 0 && held;
    }, 20_000);
    expect(deferred[0]).toMatchObject({ error: "circuit_open", response_status: null });
    expect(deferred[0]!.next_attempt_at).not.toBeNull();
    const timeouts = (await deliveryLog(server.url, key, channel)).filter((d) => d.status === "failed");
    expect(timeouts.every((d) => d.error === "timeout")).toBe(true);
    // Deferral costs no attempts: six retries would long be used up otherwise.
    hook.slow(0);
    const delivered = await eventually(async () => {
      const log = await deliveryLog(server.url, key, channel);
      const ok = log.filter((d) => d.status === "delivered");
      return ok.length === 3 && ok;
    }, 20_000);
    expect(delivered).toHaveLength(3);
  }, 60_000);
});

describe("replay-resistant signatures", () => {
  const hook = useReceiver();
  const server = useTestServer({
    ...DELIVERING,
    AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "100ms,100ms",
  });

  it("signs id.timestamp.body the Standard Webhooks way with a webhook-id stable across retries; a stale replay is detectable", async () => {
    const key = await mintKey(server.url);
    const secret = "s3cret-for-standard-webhooks";
    const channel = await createChannel(server.url, key, { webhook_url: hook.url, webhook_secret: secret });
    hook.failNext(1);
    await postMessage(server.url, key, channel, { content: "signed twice" });
    const [first, retry] = await hook.waitFor(2, 10_000);
    for (const req of [first!, retry!]) {
      expect(verifySignature(secret, req.body, req.headers["x-service-signature"])).toBe(true);
      const now = Number(req.headers["webhook-timestamp"]);
      expect(Math.abs(now - Date.now() / 1000)).toBeLessThan(5);
      expect(verifyStandardSignature(secret, req.body, req.headers, Math.floor(Date.now() / 1000))).toBe("ok");
      expect(req.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    }
    expect(retry!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    expect(first!.headers["webhook-id"]).toBe(first!.headers["x-service-delivery"]);

    // The same request replayed ten minutes later is outside a 5-minute tolerance…
    const later = Number(first!.headers["webhook-timestamp"]) + 600;
    expect(verifyStandardSignature(secret, first!.body, first!.headers, later)).toBe("stale");
    // …and freshening its timestamp breaks the signature.
    const forged = { ...first!.headers, "webhook-timestamp": String(later) };
    expect(verifyStandardSignature(secret, first!.body, forged, later)).toBe("bad_signature");
  }, 30_000);
});
