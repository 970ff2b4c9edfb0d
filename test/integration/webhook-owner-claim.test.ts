/**
 * The webhook claim shares dispatch slots between the keys that own the
 * deliveries (docs/decisions.md#webhook-isolation), on real PostgreSQL: each
 * outbox row records its owning key, the claim sees every owner's due rows
 * however many one owner has queued, gives one owner at most its share, and
 * lets the owner with fewest in flight, then the one served least recently,
 * go first. The dispatcher over real receivers is in webhook-fairness.test.ts.
 */
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import type { Micros } from "../../src/model/time.js";
import type { ClaimLimits, OwnerLoad } from "../../src/model/webhooks.js";
import { Db } from "../../src/store/db.js";
import { migrate, MIGRATIONS_DIR } from "../../src/store/migrate.js";
import { enqueueMemberAdded, PgWebhookStore } from "../../src/store/webhooks.js";
import { createTestDatabase } from "../support/database.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { keyIdOf } from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

// No dispatcher: the outbox holds what the tests put there.
const server = useTestServer({ AGENTBUS_WORKERS: "false" });
const db = () => new Db(server.app.pool);

const NOW: Micros = 1_767_225_600_000_000;
const SECOND = 1_000_000;
const LEASE_UNTIL = NOW + 40 * SECOND;

/** A key and `channels` channels of it, each with a webhook at a destination of its own. */
async function owner(name: string, channels = 1): Promise<string[]> {
  await server.app.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, '\\x00', $1, $1)", [name]);
  const { rows } = await server.app.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, webhook_url, created_at, updated_at)
     SELECT $1 || ' ' || i, 'broadcast', 'open', false, $1, $1, 3600, 7, 'https://' || $1 || '-' || i || '.example/hook', clock_timestamp(), now()
     FROM generate_series(1, $2::int) i RETURNING id`,
    [name, channels],
  );
  return rows.map((r) => r.id);
}

/** Queues `count` message.created rows to `channel`, due `ageSeconds` before NOW and one second apart, oldest first. */
async function queue(channel: string, count: number, ageSeconds: number): Promise<void> {
  await server.app.pool.query(
    `INSERT INTO webhook_outbox (channel_id, event, message_id, next_attempt_at)
     SELECT $1, 'message.created', gen_random_uuid(), $2::timestamptz - ($3::int - i) * interval '1 second' FROM generate_series(1, $4::int) i`,
    [channel, new Date(NOW / 1000 - ageSeconds * 1000).toISOString(), count, count],
  );
}

const limits = (perOwner: number, owners: Record<string, OwnerLoad> = {}): ClaimLimits => ({
  busy: new Map(),
  perDestination: 2,
  owners: new Map(Object.entries(owners)),
  perOwner,
});

const claimOwners = async (limit: number, l: ClaimLimits): Promise<string[]> =>
  (await new PgWebhookStore(db()).claimDue(NOW, limit, LEASE_UNTIL, l)).map((d) => d.ownerKeyId);

beforeEach(async () => {
  await server.app.pool.query("DELETE FROM webhook_outbox");
});

describe("the owner of an outbox row", () => {
  it("is the key owning the channel for channel webhooks and member_added, and the key owning the actor for a mention push", async () => {
    const channelKey = await mintKey(server.url);
    const actorKey = await mintKey(server.url);
    const actor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key: actorKey, body: { name: "mentioned" } });
    expect((await rest(server.url, "POST", `/v1/actors/${actor.body.id}/webhook`, { key: actorKey, body: { url: "https://actor.example/hook" } })).status).toBe(200);
    const channel = await createChannel(server.url, channelKey, { webhook_url: "https://channel.example/hook" });

    await postMessage(server.url, channelKey, channel, { content: "hello", mentions: [actor.body.id] });
    expect(await enqueueMemberAdded(db(), { channelId: channel, memberKeyId: keyIdOf(actorKey), approvedByKeyId: keyIdOf(channelKey) }, NOW)).toBe(true);

    const { rows } = await server.app.pool.query<{ event: string; owner_key_id: string }>(
      "SELECT event, owner_key_id FROM webhook_outbox WHERE channel_id = $1 ORDER BY event",
      [channel],
    );
    expect(rows).toEqual([
      { event: "member_added", owner_key_id: keyIdOf(channelKey) },
      { event: "mention", owner_key_id: keyIdOf(actorKey) },
      { event: "message.created", owner_key_id: keyIdOf(channelKey) },
    ]);
  });
});

describe("the upgrade that adds it (0024)", () => {
  it("fills it in for rows queued before: the channel's key, or for a mention push the actor's", async () => {
    const db = await createTestDatabase({ migrate: false });
    const before = await mkdtemp(path.join(tmpdir(), "agentbus-before-0024-"));
    try {
      // The database as the release before 0024 left it, with pushes still queued.
      for (const name of (await readdir(MIGRATIONS_DIR)).filter((n) => n < "0024")) await copyFile(path.join(MIGRATIONS_DIR, name), path.join(before, name));
      await migrate(db.pool, { dir: before, sqlDir: false });
      await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_channels', '\\x00', 'c', 'c'), ('ak_actors', '\\x00', 'a', 'a')");
      const channel = await db.pool.query<{ id: string }>(
        `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, webhook_url, created_at, updated_at)
         VALUES ('queued', 'broadcast', 'open', false, 'c', 'ak_channels', 3600, 7, 'https://channel.example/hook', clock_timestamp(), now()) RETURNING id`,
      );
      const actor = await db.pool.query<{ id: string }>("INSERT INTO actors (name, owner_id, created_by_key_id) VALUES ('mentioned', 'a', 'ak_actors') RETURNING id");
      await db.pool.query(
        `INSERT INTO webhook_outbox (channel_id, actor_id, event, message_id)
         VALUES ($1, NULL, 'message.created', gen_random_uuid()), ($1, $2, 'mention', gen_random_uuid())`,
        [channel.rows[0]!.id, actor.rows[0]!.id],
      );

      await migrate(db.pool);

      const { rows } = await db.pool.query<{ event: string; owner_key_id: string }>("SELECT event, owner_key_id FROM webhook_outbox ORDER BY event");
      expect(rows).toEqual([
        { event: "mention", owner_key_id: "ak_actors" },
        { event: "message.created", owner_key_id: "ak_channels" },
      ]);
    } finally {
      await rm(before, { recursive: true, force: true });
      await db.drop();
    }
  });
});

describe("the claim", () => {
  it("claims another owner's due row behind more than 1,000 older due rows of one owner", async () => {
    // More than the 1,000 due rows the claim used to look at in all.
    const [flood] = await owner("ak_flood");
    const [quiet] = await owner("ak_quiet");
    await queue(flood!, 1500, 3600);
    await queue(quiet!, 1, 1);

    expect(await claimOwners(16, limits(4))).toContain("ak_quiet");
  });

  it("gives one owner at most its share of the slots across its destinations, counting what it has in flight", async () => {
    const channels = await owner("ak_spread", 10);
    for (const channel of channels) await queue(channel, 1, 10);

    expect(await claimOwners(16, limits(4, { ak_spread: { inFlight: 1, servedAt: NOW - SECOND } }))).toEqual(["ak_spread", "ak_spread", "ak_spread"]);
  });

  it("gives the next slot to the owner with fewest requests in flight, whoever has the oldest row", async () => {
    const [busy] = await owner("ak_busy", 1);
    const [idle] = await owner("ak_idle", 1);
    await queue(busy!, 3, 60);
    await queue(idle!, 1, 1);
    const served = NOW - SECOND;

    expect(await claimOwners(1, limits(4, { ak_busy: { inFlight: 1, servedAt: served }, ak_idle: { inFlight: 0, servedAt: served } }))).toEqual(["ak_idle"]);
  });

  it("among owners with as many in flight, serves first the one never served, then the one served least recently", async () => {
    const [recent] = await owner("ak_recent");
    const [earlier] = await owner("ak_earlier");
    const [fresh] = await owner("ak_fresh");
    await queue(recent!, 1, 30);
    await queue(earlier!, 1, 20);
    await queue(fresh!, 1, 10);

    const served = limits(4, { ak_recent: { inFlight: 0, servedAt: NOW - SECOND }, ak_earlier: { inFlight: 0, servedAt: NOW - 20 * SECOND } });
    // One slot at a time (a claimed row is leased, no longer due), the same turn order each time.
    const order = [await claimOwners(1, served), await claimOwners(1, served), await claimOwners(1, served)];
    expect(order).toEqual([["ak_fresh"], ["ak_earlier"], ["ak_recent"]]);
  });
});
