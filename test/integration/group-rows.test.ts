/**
 * A message group's row (its turn in fair dispatch and its kept head) ends
 * with its work: the purge deletes the row of a group with no unfinished
 * message and no post for GROUP_IDLE_MINUTES (docs/decisions.md#dispatch),
 * and never one a post is adding a message to.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Db } from "../../src/store/db.js";
import { GROUP_IDLE_MINUTES, purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
const MINUTE = 60 * 1_000_000;
let owner: string;
let db: Db;
beforeAll(async () => {
  owner = await mintKey(url(), "group-rows-owner");
  db = new Db(server.app.pool);
});

const receive = async (ch: string, max = 1): Promise<ReceivedJson[]> => {
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: owner, body: { lease_seconds: 60, max_messages: max } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};
const ack = async (id: string) => expect((await rest(url(), "POST", `/v1/messages/${id}/ack`, { key: owner, body: {} })).status).toBe(200);
const groupRows = async (ch: string) =>
  (await sql.query<{ group_key: string }>("SELECT group_key FROM message_groups WHERE channel_id = $1 AND group_key <> '' ORDER BY group_key", [ch])).rows.map((r) => r.group_key);
/** Purges as of `minutes` after the service clock's now. */
const purgeIn = (minutes: number) => purge(db, clock.now() + minutes * MINUTE);

describe("a message group's row", () => {
  it("is deleted once the group has no unfinished message and no post for the idle time", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair" });
    await postMessage(url(), owner, ch, { content: "a1", group_key: "a" });
    for (const got of await receive(ch)) await ack(got.message.id);
    await purgeIn(GROUP_IDLE_MINUTES - 1);
    expect(await groupRows(ch)).toEqual(["a"]);
    const counts = await purgeIn(GROUP_IDLE_MINUTES + 1);
    expect(counts.deletedIdleGroups).toBeGreaterThanOrEqual(1);
    expect(await groupRows(ch)).toEqual([]);
  });

  it("stays while the group has unfinished work, ready or in flight, however long ago it was posted", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair", ttl_seconds: 86_400 });
    await postMessage(url(), owner, ch, { content: "r1", group_key: "ready" });
    await postMessage(url(), owner, ch, { content: "f1", group_key: "flight" });
    await postMessage(url(), owner, ch, { content: "f2", group_key: "flight" });
    // Fair: one of each group, so both of "flight"'s messages cannot be the ones received.
    const got = await receive(ch, 2);
    expect(got.map((g) => g.message.group_key).sort()).toEqual(["flight", "ready"]);
    await ack(got.find((g) => g.message.group_key === "ready")!.message.id);
    await postMessage(url(), owner, ch, { content: "r2", group_key: "ready" });
    await purgeIn(60);
    expect(await groupRows(ch)).toEqual(["flight", "ready"]);
  });

  it("is made again by the next post to the group, which is then served at once", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair" });
    await postMessage(url(), owner, ch, { content: "old", group_key: "g" });
    for (const got of await receive(ch)) await ack(got.message.id);
    await purgeIn(GROUP_IDLE_MINUTES + 1);
    expect(await groupRows(ch)).toEqual([]);
    await postMessage(url(), owner, ch, { content: "new", group_key: "g" });
    expect(await groupRows(ch)).toEqual(["g"]);
    expect((await receive(ch)).map((g) => g.message.content)).toEqual(["new"]);
  });

  // The two orders a post and the purge can meet in, each held open at its
  // commit by a deferred trigger (pg_sleep) while the other one runs.
  const holdAtCommit = async (table: string, event: "INSERT" | "DELETE", when: string) => {
    await sql.query(`CREATE OR REPLACE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$`);
    await sql.query(`CREATE CONSTRAINT TRIGGER test_hold AFTER ${event} ON ${table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION test_hold()`);
    return async () => {
      await sql.query(`DROP TRIGGER test_hold ON ${table}`);
    };
  };
  const sleeping = async () => {
    for (;;) {
      const { rows } = await sql.query("SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'");
      if (rows.length > 0) return;
      // Real time: waits for a real transaction to reach its commit.
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const idleGroup = async (ch: string, group: string) => {
    await postMessage(url(), owner, ch, { content: "old", group_key: group });
    for (const got of await receive(ch)) await ack(got.message.id);
    await sql.query("UPDATE message_groups SET posted_at = posted_at - make_interval(mins => $3) WHERE channel_id = $1 AND group_key = $2", [ch, group, GROUP_IDLE_MINUTES + 1]);
  };

  it("is not deleted by a purge that runs while a post to its group is committing", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair" });
    await idleGroup(ch, "g");
    const release = await holdAtCommit("messages", "INSERT", "NEW.content = 'held post'");
    try {
      const posting = postMessage(url(), owner, ch, { content: "held post", group_key: "g" });
      await sleeping();
      expect((await purgeIn(0)).deletedIdleGroups).toBe(0);
      await posting;
    } finally {
      await release();
    }
    expect(await groupRows(ch)).toEqual(["g"]);
    expect((await receive(ch)).map((g) => g.message.content)).toEqual(["held post"]);
  });

  it("is made again by a post that arrives while the purge deleting it is committing", async () => {
    const ch = await createChannel(url(), owner, { dispatch: "fair" });
    await idleGroup(ch, "h");
    const release = await holdAtCommit("message_groups", "DELETE", "OLD.group_key = 'h'");
    try {
      const purging = purgeIn(0);
      await sleeping();
      await postMessage(url(), owner, ch, { content: "after the purge", group_key: "h" });
      expect((await purging).deletedIdleGroups).toBeGreaterThanOrEqual(1);
    } finally {
      await release();
    }
    expect(await groupRows(ch)).toEqual(["h"]);
    expect((await receive(ch)).map((g) => g.message.content)).toEqual(["after the purge"]);
  });
});
