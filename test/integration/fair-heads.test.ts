/**
 * A fair channel's receive walks the heads it keeps per group
 * (message_groups.head_id; docs/decisions.md#dispatch) instead of reading
 * every group's head. Each test here makes a kept head go stale in one way —
 * a release, a lapse, a delay running out, a claim by id, a post to an
 * emptied group — within the same few seconds, so the full re-read (every
 * 5 s of the service clock) cannot be what puts it right: the receive must
 * still hand out exactly what reading every head would.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { SteppingClock } from "../support/clock.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const clock = new SteppingClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
let owner: string;
beforeAll(async () => {
  owner = await mintKey(url(), "fair-heads-owner");
});
afterEach(() => clock.reset());

const receive = async (ch: string, body: Record<string, unknown> = {}): Promise<ReceivedJson[]> => {
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: owner, body: { lease_seconds: 60, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};
const receiveOne = async (ch: string, body: Record<string, unknown> = {}): Promise<ReceivedJson> => {
  const got = await receive(ch, body);
  expect(got).toHaveLength(1);
  return got[0]!;
};
const post = (ch: string, content: string, extra: Record<string, unknown> = {}) => postMessage(url(), owner, ch, { content, ...extra });
const fair = () => createChannel(url(), owner, { dispatch: "fair" });

describe("a fair channel's kept heads", () => {
  it("give a released message, more urgent now, its turn before a less urgent group's head", async () => {
    const ch = await fair();
    await post(ch, "a1", { group_key: "a", priority: 3 });
    await post(ch, "b1", { group_key: "b", priority: 3 });
    await post(ch, "b2", { group_key: "b", priority: 5 });
    expect((await receiveOne(ch)).message.content).toBe("a1");
    const b1 = await receiveOne(ch);
    expect(b1.message.content).toBe("b1");
    await post(ch, "a2", { group_key: "a", priority: 2 });
    expect((await rest(url(), "POST", `/v1/messages/${b1.message.id}/release`, { key: owner, body: { priority: 1 } })).status).toBe(200);
    expect((await receiveOne(ch)).message.content).toBe("b1");
  });

  it("give a lapsed message its group's turn again at its own priority", async () => {
    const ch = await fair();
    await post(ch, "a1", { group_key: "a", priority: 3 });
    await post(ch, "a2", { group_key: "a", priority: 5 });
    await post(ch, "b1", { group_key: "b", priority: 4 });
    const a1 = await receiveOne(ch, { lease_seconds: 30 });
    expect(a1.message.content).toBe("a1");
    // The lease runs out now, not 30 s on: past the full re-read.
    await sql.query("UPDATE messages SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [a1.message.id]);
    expect((await receiveOne(ch)).message.content).toBe("a1");
  });

  it("give a message whose delay ran out its group's turn at its own priority", async () => {
    const ch = await fair();
    await post(ch, "a1", { group_key: "a", priority: 2, delay_seconds: 2 });
    await post(ch, "a2", { group_key: "a", priority: 5 });
    await post(ch, "b1", { group_key: "b", priority: 4 });
    await post(ch, "b2", { group_key: "b", priority: 4 });
    expect((await receiveOne(ch)).message.content).toBe("b1");
    clock.advanceSeconds(3);
    expect((await receiveOne(ch)).message.content).toBe("a1");
  });

  it("pass over a head claimed by id since, to the group's next message", async () => {
    const ch = await fair();
    await post(ch, "b1", { group_key: "b", priority: 1 });
    const a1 = await post(ch, "a1", { group_key: "a" });
    await post(ch, "a2", { group_key: "a" });
    expect((await receiveOne(ch)).message.content).toBe("b1");
    expect((await rest(url(), "POST", `/v1/messages/${a1.id}/claim`, { key: owner, body: {} })).status).toBe(200);
    expect((await receive(ch, { max_messages: 5 })).map((r) => r.message.content)).toEqual(["a2"]);
  });

  it("give an emptied group's new, more urgent message its turn", async () => {
    const ch = await fair();
    await post(ch, "a1", { group_key: "a", priority: 3 });
    await post(ch, "a2", { group_key: "a", priority: 3 });
    await post(ch, "b1", { group_key: "b", priority: 3 });
    expect((await receiveOne(ch)).message.content).toBe("a1");
    expect((await receiveOne(ch)).message.content).toBe("b1");
    await post(ch, "b2", { group_key: "b", priority: 1 });
    expect((await receiveOne(ch)).message.content).toBe("b2");
  });

  it("give a message without a group, more urgent than the heads, the next turn", async () => {
    const ch = await fair();
    await post(ch, "a1", { group_key: "a", priority: 3 });
    await post(ch, "a2", { group_key: "a", priority: 3 });
    await post(ch, "loose1", { priority: 4 });
    expect((await receiveOne(ch)).message.content).toBe("a1");
    await post(ch, "loose2", { priority: 1 });
    expect((await receiveOne(ch)).message.content).toBe("loose2");
  });
});
