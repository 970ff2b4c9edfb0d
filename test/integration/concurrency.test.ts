/**
 * Proof under real concurrency, against the real server: exactly one claim
 * wins, and cursor polling under concurrent writers sees every message
 * exactly once, in order (docs/decisions.md#cursor-order).
 */
import { describe, expect, it } from "vitest";
import { createChannel, listMessages, postMessage } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer({ AGENTBUS_LOG_LEVEL: "warn", AGENTBUS_DB_POOL_SIZE: "40" });

describe("claims under contention", () => {
  it("gives 200 concurrent claims on one message exactly one winner", async () => {
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner);
    const m = await postMessage(server.url, owner, ch, { content: "the one task" });
    const keys = await Promise.all(Array.from({ length: 200 }, (_, i) => mintKey(server.url, `claimer-${i}`)));
    const results = await Promise.all(keys.map((key) => rest<{ status?: string; error?: string }>(server.url, "POST", `/v1/messages/${m.id}/claim`, { key })));
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    expect(winners[0]!.body.status).toBe("claimed");
    const losers = results.filter((r) => r.status === 409);
    expect(losers).toHaveLength(199);
    expect(losers.every((r) => r.body.error === "already_claimed")).toBe(true);
  });
});

describe("batched writes keep per-message rules exact", () => {
  it("lets exactly max_writes_per_minute of 20 concurrent posts through", async () => {
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { max_writes_per_minute: 7 });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: `m${i}` } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(7);
    expect(results.filter((r) => r.status === 429)).toHaveLength(13);
  });

  it("keeps the newest max_messages of 50 concurrent posts", async () => {
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { max_messages: 10 });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => rest<{ message: { created_at: string } }>(server.url, "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: `m${i}` } })),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const newest = results.map((r) => r.body.message.created_at).sort().slice(-10);
    const page = await listMessages(server.url, owner, ch, "?since=0&limit=100");
    expect(page.data.map((m) => m.created_at)).toEqual(newest);
    const { rows } = await server.app.pool.query("SELECT stored_messages FROM channels WHERE id = $1", [ch]);
    expect(rows[0].stored_messages).toBe(10);
  });
});

describe("cursor polling under concurrent writers (cursor-order)", () => {
  it("lets 4 pollers following next_cursor see all 4,000 messages of 8 writers exactly once, in order", async () => {
    const writers = 8;
    const perWriter = 500;
    const total = writers * perWriter;
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { mode: "broadcast" });
    const writerKeys = await Promise.all(Array.from({ length: writers }, () => mintKey(server.url)));
    let writing = true;

    const poll = async () => {
      const key = await mintKey(server.url);
      const seen: Array<{ id: string; content: string; created_at: string }> = [];
      let cursor = "0";
      // Bounded: stop after the writers finish and a final empty page, or after 60 s.
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const wasWriting = writing;
        const page = await listMessages(server.url, key, ch, `?since=${encodeURIComponent(cursor)}&limit=100`);
        seen.push(...page.data);
        cursor = page.next_cursor ?? cursor;
        if (!wasWriting && page.data.length === 0) break;
      }
      return seen;
    };

    const pollers = Array.from({ length: 4 }, () => poll());
    await Promise.all(
      writerKeys.map(async (key, w) => {
        for (let i = 0; i < perWriter; i++) await postMessage(server.url, key, ch, { content: `${w}:${i}` });
      }),
    );
    writing = false;
    const results = await Promise.all(pollers);

    for (const seen of results) {
      expect(seen).toHaveLength(total);
      expect(new Set(seen.map((m) => m.id)).size).toBe(total);
      // Strictly increasing cursor order, and each writer's messages in its own order.
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.created_at > seen[i - 1]!.created_at).toBe(true);
      const perWriterOrder = new Map<string, number>();
      for (const m of seen) {
        const [w, i] = m.content.split(":").map(Number) as [number, number];
        expect(i).toBe((perWriterOrder.get(String(w)) ?? -1) + 1);
        perWriterOrder.set(String(w), i);
      }
    }
  }, 120_000);
});
