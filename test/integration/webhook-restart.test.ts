/**
 * Webhook delivery survives restarts (docs/decisions.md#webhook-delivery: durable, at least once):
 * the outbox lives in PostgreSQL, so a worker killed between attempts, or a
 * service stopped mid-retry, delivers once a process runs again on the same
 * database. Also: a separate `agentbus worker` hears of new messages at
 * once (NOTIFY), not on its sweep.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import type { Env } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { WebhookReceiver } from "../fakes/webhook-receiver.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { spawnCli } from "../support/process.js";
import { mintKey, testConfig } from "../support/server.js";
import { eventually } from "../support/eventually.js";

const WEBHOOK_ENV = {
  AGENTBUS_ALLOW_PRIVATE_TARGETS: "true",
  AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "1s,1s,1s,1s,1s,1s",
  AGENTBUS_WEBHOOK_TIMEOUT_MS: "2000",
};

function app(db: TestDatabase, env: Env): Promise<App> {
  return startApp({ config: testConfig(db.url, env), logger: createLogger("silent") });
}

interface Row {
  message_id: string;
  delivery_id: string;
  attempt: number;
  status: string;
}

const attempts = async (db: TestDatabase, messageId: string): Promise<Row[]> =>
  (
    await db.pool.query<Row>(
      "SELECT message_id, delivery_id, attempt, status FROM webhook_deliveries WHERE message_id = $1 ORDER BY id",
      [messageId],
    )
  ).rows;

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});
afterAll(async () => {
  await receiver?.close();
});

describe("webhook delivery across restarts", () => {
  it("an `agentbus worker` killed mid-retry: the next worker on the same database delivers", async () => {
    const db = await createTestDatabase();
    const api = await app(db, { AGENTBUS_WORKERS: "false", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
    let worker = spawnCli(["worker"], { DATABASE_URL: db.url, ...WEBHOOK_ENV });
    try {
      await eventually(async () => worker.lines.some((l) => l.includes("agentbus worker running")));
      receiver.answer(500);
      const key = await mintKey(api.url);
      const ch = await createChannel(api.url, key, { webhook_url: receiver.url });
      const posted = performance.now();
      const first = await postMessage(api.url, key, ch, { content: "survives a crash" });
      // The worker is another process: it hears of the commit by NOTIFY, long before any sweep.
      await receiver.waitFor(1, 5_000);
      expect(receiver.requests[0]!.receivedAt - posted).toBeLessThan(2_000);
      await eventually(async () => (await attempts(db, first.id)).length >= 1);

      // Crash: no shutdown at all. The retry is due in about a second.
      worker.child.kill("SIGKILL");
      await worker.exited;
      const seenBefore = receiver.requests.length;
      receiver.answer(200);
      // Written while no worker runs: it waits in the outbox.
      const second = await postMessage(api.url, key, ch, { content: "written while nobody delivers" });
      // Real time: an absence (no worker delivers) shows only over a while; the worker is a real process.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(receiver.requests.length).toBe(seenBefore);

      worker = spawnCli(["worker"], { DATABASE_URL: db.url, ...WEBHOOK_ENV });
      const rows = await eventually(async () => {
        const a = await attempts(db, first.id);
        const b = await attempts(db, second.id);
        return a.at(-1)?.status === "delivered" && b.at(-1)?.status === "delivered" && { a, b };
      });
      expect(new Set(rows.a.map((r) => r.delivery_id)).size).toBe(1);
      expect(rows.a.at(-1)!.attempt).toBeGreaterThanOrEqual(2);
      expect(rows.b).toEqual([expect.objectContaining({ attempt: 1, status: "delivered" })]);
      const { rows: left } = await db.pool.query("SELECT 1 FROM webhook_outbox");
      expect(left).toHaveLength(0);
    } finally {
      if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
      await api.close();
      await db.drop();
    }
  });

  it("`agentbus serve` stopped mid-retry and started again delivers", async () => {
    const db = await createTestDatabase();
    let service = await app(db, { AGENTBUS_WORKERS: "true", ...WEBHOOK_ENV });
    try {
      receiver.answer(503);
      const key = await mintKey(service.url);
      const ch = await createChannel(service.url, key, { webhook_url: receiver.url });
      const message = await postMessage(service.url, key, ch, { content: "survives a restart" });
      await eventually(async () => (await attempts(db, message.id)).length >= 1);
      await service.close();
      receiver.answer(200);
      service = await app(db, { AGENTBUS_WORKERS: "true", ...WEBHOOK_ENV });
      const rows = await eventually(async () => {
        const a = await attempts(db, message.id);
        return a.at(-1)?.status === "delivered" && a;
      });
      expect(rows[0]).toMatchObject({ attempt: 1, status: "failed" });
      expect(rows.at(-1)!.attempt).toBeGreaterThanOrEqual(2);
    } finally {
      await service.close();
      await db.drop();
    }
  });
});
