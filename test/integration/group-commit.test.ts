/**
 * Group commit (src/store/coalesce.ts): receives on one channel, and acks,
 * that reach the store while a statement of their kind is in the database go
 * in together as the next one. Held to the single statement's word: nothing
 * leased twice, the oldest work to the earliest receive, each caller's
 * access judged on its own, and one bad item failing alone.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import type { MessageRecord } from "../../src/model/messages.js";
import { Db } from "../../src/store/db.js";
import { PgMessageStore } from "../../src/store/messages.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { addMember, keyIdOf } from "../support/membership.js";
import { mintKey, useTestServer } from "../support/server.js";

const server = useTestServer();
let owner: string;
beforeAll(async () => {
  owner = await mintKey(server.url);
});

/** A Db that counts the statements run under each prepared name. */
class CountingDb extends Db {
  readonly runs = new Map<string, number>();
  override query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    if (name !== undefined) this.runs.set(name, (this.runs.get(name) ?? 0) + 1);
    return super.query<R>(text, values, name);
  }
}

const now = () => Date.now() * 1000;
const leases = (keyId: string, n: number) => ({
  keyId,
  actor: { id: randomUUID(), name: "worker" },
  leaseTokens: Array.from({ length: n }, () => `lease_${randomUUID()}`),
  leaseExpiresAt: now() + 60_000_000,
});
const ackBy = (keyId: string, result: string | null = null) => ({ keyId, actor: { id: randomUUID(), name: "worker" }, result, metadata: {} });

async function queueOf(contents: number, mode: "claimable" | "broadcast" = "claimable"): Promise<{ channelId: string; ids: string[] }> {
  const channelId = await createChannel(server.url, owner, { mode });
  const ids: string[] = [];
  for (let i = 0; i < contents; i++) ids.push((await postMessage(server.url, owner, channelId, { content: `task ${i}` })).id);
  return { channelId, ids };
}

describe("receives that arrive together", () => {
  it("share statements, and lease every message once, the oldest to the earliest receive", async () => {
    const { channelId, ids } = await queueOf(40);
    const db = new CountingDb(server.app.pool);
    const store = new PgMessageStore(db);
    const keyId = keyIdOf(owner);
    // 30 receives of 1 or 2 messages (45 wanted) for 40 messages.
    const wants = Array.from({ length: 30 }, (_, i) => 1 + (i % 2));
    const got = await Promise.all(wants.map((n) => store.receive(channelId, n, leases(keyId, n), now())));
    const leased = got.flat().map((m) => m.id);
    expect(new Set(leased).size).toBe(leased.length);
    expect(leased.sort()).toEqual([...ids].sort());
    expect(db.runs.get("receive")).toBeLessThan(wants.length);
    // The first receive went in alone, at once: it holds the oldest message.
    expect(got[0]!.map((m) => m.id)).toEqual([ids[0]]);
    for (const [i, messages] of got.entries()) expect(messages.length).toBeLessThanOrEqual(wants[i]!);
  });

  it("gives each receive its own lease tokens, lease end and actor", async () => {
    const { channelId } = await queueOf(6);
    const store = new PgMessageStore(new Db(server.app.pool));
    const asked = Array.from({ length: 3 }, () => leases(keyIdOf(owner), 2));
    const got = await Promise.all(asked.map((l) => store.receive(channelId, 2, l, now())));
    for (const [i, messages] of got.entries()) {
      expect(messages).toHaveLength(2);
      for (const m of messages) {
        expect(asked[i]!.leaseTokens).toContain(m.claim?.leaseToken);
        expect(m.claim?.actor).toEqual(asked[i]!.actor);
        expect(m.claim?.leaseExpiresAt).toBe(asked[i]!.leaseExpiresAt);
      }
    }
  });

  it("leases nothing to a caller without access while the others in its statement get their share", async () => {
    const channelId = await createChannel(server.url, owner, { access: "restricted" });
    const member = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    await addMember(server.url, owner, channelId, keyIdOf(member));
    for (let i = 0; i < 10; i++) await postMessage(server.url, owner, channelId, { content: `task ${i}` });
    const db = new CountingDb(server.app.pool);
    const store = new PgMessageStore(db);
    const callers = [member, stranger, member, stranger, member, stranger, owner, stranger];
    const got = await Promise.all(callers.map((k) => store.receive(channelId, 1, leases(keyIdOf(k), 1), now())));
    for (const [i, k] of callers.entries()) expect(got[i], `caller ${i}`).toHaveLength(k === stranger ? 0 : 1);
    expect(db.runs.get("receive")).toBeLessThan(callers.length);
  });
});

describe("acks that arrive together", () => {
  it("share statements and acknowledge every message, each for its own caller", async () => {
    // Broadcast: a result needs no claim there.
    const { ids } = await queueOf(30, "broadcast");
    const db = new CountingDb(server.app.pool);
    const store = new PgMessageStore(db);
    const acks = ids.map((id) => ({ id, ack: ackBy(keyIdOf(owner), `done ${id}`) }));
    const got = await Promise.all(acks.map(({ id, ack }) => store.ack(id, ack, now())));
    for (const [i, m] of got.entries()) {
      expect(m?.id).toBe(acks[i]!.id);
      expect(m?.acknowledgedBy.map((a) => a.id)).toEqual([acks[i]!.ack.actor.id]);
      expect(m?.result).toBe(acks[i]!.ack.result);
    }
    expect(db.runs.get("ack")).toBeLessThan(acks.length);
  });

  it("acknowledges one message for two actors at once: the second waits for the next statement", async () => {
    const { ids } = await queueOf(1);
    const store = new PgMessageStore(new Db(server.app.pool));
    const [a, b] = [ackBy(keyIdOf(owner)), ackBy(keyIdOf(owner))];
    const [first, second] = await Promise.all([store.ack(ids[0]!, a, now()), store.ack(ids[0]!, b, now())]);
    expect(first?.acknowledgedBy.map((x) => x.id)).toEqual([a.actor.id]);
    expect(second?.acknowledgedBy.map((x) => x.id)).toEqual([a.actor.id, b.actor.id]);
  });

  it("fails only the ack the database refuses; the others in its statement are stored", async () => {
    const { ids } = await queueOf(12);
    const store = new PgMessageStore(new Db(server.app.pool));
    // A result with NUL is refused by PostgreSQL (the API refuses it before the store).
    const outcomes = await Promise.all(
      ids.map((id, i) =>
        store.ack(id, ackBy(keyIdOf(owner), i === 5 ? "bad \u0000 result" : null), now()).then(
          (m): MessageRecord | "failed" | undefined => m,
          () => "failed" as const,
        ),
      ),
    );
    for (const [i, outcome] of outcomes.entries()) {
      if (i === 5) expect(outcome).toBe("failed");
      else expect((outcome as MessageRecord).acknowledgedBy).toHaveLength(1);
    }
  });
});
