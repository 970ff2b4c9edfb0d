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

/**
 * The rule of docs/decisions.md#priorities, #message-groups and #dispatch,
 * one delivery at a time: the most urgent head first (a group's head is its
 * oldest open message, none while the group is at its bound; the messages
 * without a group are one turn, the most urgent of them its head), then, fair,
 * the turn served least recently (never first) and the group's key, or, fifo,
 * the oldest.
 */
class DispatchModel {
  private readonly messages: Array<{ content: string; group: string; priority: number; open: boolean; at: number }> = [];
  private readonly served = new Map<string, number>();
  private clock = 0;
  constructor(private readonly rule: { dispatch: "fair" | "fifo"; groupConcurrency?: number }) {}
  post(content: string, group: string, priority: number): void {
    this.messages.push({ content, group, priority, open: true, at: this.messages.length });
  }
  release(content: string, priority: number): void {
    Object.assign(this.messages.find((m) => m.content === content)!, { open: true, priority });
  }
  receive(wanted: number): string[] {
    const out: string[] = [];
    while (out.length < wanted) {
      const heads = new Map<string, (typeof this.messages)[number]>();
      const inFlight = new Map<string, number>();
      for (const m of this.messages) if (!m.open) inFlight.set(m.group, (inFlight.get(m.group) ?? 0) + 1);
      for (const m of this.messages) {
        if (!m.open) continue;
        if (m.group !== "" && (inFlight.get(m.group) ?? 0) >= (this.rule.groupConcurrency ?? Infinity)) continue;
        const h = heads.get(m.group);
        if (!h || (m.group === "" && m.priority < h.priority)) heads.set(m.group, m);
      }
      const turn = (k: string) => this.served.get(k) ?? -1;
      const order = [...heads.entries()].sort(([ka, a], [kb, b]) => a.priority - b.priority
        || (this.rule.dispatch === "fair" ? turn(ka) - turn(kb) || (ka < kb ? -1 : ka > kb ? 1 : 0) : a.at - b.at));
      if (order.length === 0) break;
      const [key, m] = order[0]!;
      m.open = false;
      this.served.set(key, this.clock++);
      out.push(m.content);
    }
    return out;
  }
}

describe("a receive of many", () => {
  // Each channel against the rule, one delivery at a time: the same posts,
  // receives of 1 to 7 and releases at new priorities must hand out the same
  // messages each time. A fair channel without aging walks its kept heads;
  // with aging (an interval no message reaches here), a group bound or fifo
  // groups, it reads every group's head.
  const rules: Array<{ name: string; settings: Record<string, unknown>; rule: ConstructorParameters<typeof DispatchModel>[0] }> = [
    { name: "fair, walking the kept heads", settings: { dispatch: "fair" }, rule: { dispatch: "fair" } },
    { name: "fair, reading every head", settings: { dispatch: "fair", priority_aging_seconds: 86400 }, rule: { dispatch: "fair" } },
    { name: "fair with group_concurrency 2", settings: { dispatch: "fair", group_concurrency: 2, priority_aging_seconds: 86400 }, rule: { dispatch: "fair", groupConcurrency: 2 } },
    { name: "fifo with group_concurrency 3", settings: { group_concurrency: 3 }, rule: { dispatch: "fifo", groupConcurrency: 3 } },
  ];
  it.each(rules)("hands out what as many receives of one would ($name)", async ({ settings, rule }) => {
    const ch = await createChannel(url(), owner, settings);
    const model = new DispatchModel(rule);
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    for (let i = 0; i < 90; i++) {
      const group = random() < 0.85 ? `g${Math.floor(random() * 6)}` : "";
      const priority = 1 + Math.floor(random() * 5);
      model.post(`m${i}`, group, priority);
      await post(ch, `m${i}`, { ...(group ? { group_key: group } : {}), priority });
    }
    const held: ReceivedJson[] = [];
    for (let step = 0; step < 40; step++) {
      const wanted = 1 + Math.floor(random() * 7);
      const got = await receive(ch, { max_messages: wanted });
      held.push(...got);
      expect(got.map((x) => x.message.content).sort(), `receive ${step}`).toEqual(model.receive(wanted).sort());
      if (random() < 0.4 && held.length > 0) {
        const [x] = held.splice(Math.floor(random() * held.length), 1);
        const priority = 1 + Math.floor(random() * 5);
        model.release(x!.message.content, priority);
        expect((await rest(url(), "POST", `/v1/messages/${x!.message.id}/release`, { key: owner, body: { priority } })).status).toBe(200);
      }
    }
  });
});
