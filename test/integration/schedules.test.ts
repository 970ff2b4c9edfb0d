/**
 * Schedules (docs/decisions.md#schedules): a message posted to a channel at
 * each tick of a cron expression, as the key that created the schedule;
 * once per tick across service processes and restarts, and once for all
 * the ticks missed while nothing ran. The service clock is moved, not slept
 * through, except where two processes share real time.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { nextTick } from "../../src/domain/schedules.js";
import { AdjustableClock } from "../support/clock.js";
import { eventually } from "../support/eventually.js";
import { createChannel, type MessageJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, useSqlClient, useTestServer } from "../support/server.js";

interface ScheduleJson {
  id: string;
  channel_id: string;
  cron: string;
  timezone: string;
  next_run_at: string | null;
  paused: boolean;
  created_at: string;
  runs: number;
  last_run_at: string | null;
  last_message_id: string | null;
  last_error: string | null;
  message: { content: string; metadata: Record<string, unknown>; group_key: string | null; priority: number | null };
  error?: string;
  field?: string;
}

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
const sql = useSqlClient(server);
const url = () => server.url;
let owner: string;
let member: string;
let stranger: string;
beforeAll(async () => {
  [owner, member, stranger] = await Promise.all(["sched-owner", "sched-member", "sched-stranger"].map((l) => mintKey(url(), l)));
});
afterEach(() => clock.reset());

const create = (body: Record<string, unknown>, key = owner) => rest<ScheduleJson>(url(), "POST", "/v1/schedules", { key, body });
const get = (id: string, key = owner) => rest<ScheduleJson>(url(), "GET", `/v1/schedules/${id}`, { key });
const patch = (id: string, body: Record<string, unknown>, key = owner) => rest<ScheduleJson>(url(), "PATCH", `/v1/schedules/${id}`, { key, body });
const messages = async (ch: string) => (await rest<{ data: MessageJson[] }>(url(), "GET", `/v1/channels/${ch}/messages?since=0&limit=100`, { key: owner })).body.data;
const every = (cron: string, ch: string, extra: Record<string, unknown> = {}) => create({ channel: ch, cron, message: { content: "daily report" }, ...extra });

describe("creating a schedule", () => {
  it("answers 201 with its id, channel, cron, time zone (UTC by default), next tick and paused", async () => {
    const ch = await createChannel(url(), owner);
    const res = await create({ channel: ch, cron: "0 0 * * *", message: { content: "daily report", metadata: { kind: "report" }, group_key: "reports", priority: 2 } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ channel_id: ch, cron: "0 0 * * *", timezone: "UTC", paused: false, runs: 0, message: { content: "daily report", metadata: { kind: "report" }, group_key: "reports", priority: 2 } });
    const next = new Date(res.body.next_run_at!);
    expect(next.getUTCHours()).toBe(0);
    expect(next.getUTCMinutes()).toBe(0);
    expect(next.getTime() - Date.parse(res.body.created_at)).toBeLessThanOrEqual(86_400_000);
  });

  it("takes a seconds field and a time zone, with its daylight-saving changes", async () => {
    const ch = await createChannel(url(), owner);
    const seconds = await every("*/10 * * * * *", ch);
    expect(new Date(seconds.body.next_run_at!).getUTCSeconds() % 10).toBe(0);
    const berlin = await every("0 9 * * *", ch, { timezone: "Europe/Berlin" });
    expect(berlin.body.timezone).toBe("Europe/Berlin");
    // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
    expect([7, 8]).toContain(new Date(berlin.body.next_run_at!).getUTCHours());
    expect(nextTick("0 9 * * *", "Europe/Berlin", Date.parse("2026-07-01T00:00:00Z") * 1000)).toBe(Date.parse("2026-07-01T07:00:00Z") * 1000);
    expect(nextTick("0 9 * * *", "Europe/Berlin", Date.parse("2026-12-01T00:00:00Z") * 1000)).toBe(Date.parse("2026-12-01T08:00:00Z") * 1000);
  });

  it.each([
    ["not cron", "invalid_cron"],
    ["61 * * * *", "invalid_cron"],
    ["* * * *", "invalid_cron"],
    ["* * * * * * *", "invalid_cron"],
    ["0 0 30 2 *", "invalid_cron"],
  ])("refuses the cron expression %j with 422 %s", async (cron, error) => {
    const res = await create({ channel: await createChannel(url(), owner), cron, message: { content: "x" } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error, field: "cron" });
  });

  it("refuses an unknown time zone with 422 invalid_timezone", async () => {
    const res = await every("0 0 * * *", await createChannel(url(), owner), { timezone: "Mars/Olympus_Mons" });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_timezone");
  });

  it("refuses a message without content with 422 invalid_schedule", async () => {
    const res = await create({ channel: await createChannel(url(), owner), cron: "0 0 * * *", message: {} });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_schedule");
  });

  it("is created paused when asked, with no next tick", async () => {
    const res = await every("* * * * *", await createChannel(url(), owner), { paused: true });
    expect(res.body).toMatchObject({ paused: true, next_run_at: null });
  });
});

describe("ticks", () => {
  it("post the schedule's message once per tick, as the key that created it", async () => {
    const ch = await createChannel(url(), owner);
    const s = (await every("* * * * *", ch, { message: { content: "tick", metadata: { n: 1 }, group_key: "g" } })).body;
    expect(await messages(ch)).toEqual([]);
    clock.advanceSeconds(61);
    await eventually(async () => (await messages(ch)).length === 1);
    const [posted] = await messages(ch);
    expect(posted).toMatchObject({ content: "tick", metadata: { n: 1 }, author_key_id: owner.split(".")[0] });
    const after = (await get(s.id)).body;
    expect(after).toMatchObject({ runs: 1, last_message_id: posted!.id, last_error: null });
    expect(Date.parse(after.next_run_at!)).toBeGreaterThan(clock.now() / 1000);
  });

  it("post once for all the ticks missed while nothing ran, then go on from now", async () => {
    const ch = await createChannel(url(), owner);
    const s = (await every("* * * * *", ch)).body;
    clock.advanceSeconds(10 * 60 + 5);
    await eventually(async () => (await get(s.id)).body.runs === 1);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await messages(ch)).toHaveLength(1);
    const after = (await get(s.id)).body;
    expect(after.last_run_at).toBe(s.next_run_at);
    expect(Date.parse(after.next_run_at!) - clock.now() / 1000).toBeLessThanOrEqual(60_000);
    expect(Date.parse(after.next_run_at!)).toBeGreaterThan(clock.now() / 1000);
  });

  it("stop while paused and go on from now when resumed", async () => {
    const ch = await createChannel(url(), owner);
    const s = (await every("* * * * *", ch)).body;
    expect((await patch(s.id, { paused: true })).body).toMatchObject({ paused: true, next_run_at: null });
    clock.advanceSeconds(5 * 60);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await messages(ch)).toEqual([]);
    const resumed = (await patch(s.id, { paused: false })).body;
    expect(Date.parse(resumed.next_run_at!)).toBeGreaterThan(clock.now() / 1000);
    clock.advanceSeconds(61);
    await eventually(async () => (await messages(ch)).length === 1);
  });

  it("record why a tick posted nothing: its creating key was revoked", async () => {
    const revocable = await mintKey(url(), "sched-revoked");
    const ch = await createChannel(url(), revocable);
    const doomed = (await create({ channel: ch, cron: "* * * * *", message: { content: "x" } }, revocable)).body;
    expect((await rest(url(), "DELETE", "/v1/keys/me", { key: revocable })).status).toBeLessThan(300);
    clock.advanceSeconds(61);
    await eventually(async () => (await sql.query<{ runs: number }>("SELECT runs FROM schedules WHERE id = $1", [doomed.id])).rows[0]?.runs === 1);
    const { rows } = await sql.query<{ last_error: string; last_message_id: string | null; n: string }>(
      "SELECT last_error, last_message_id, (SELECT count(*) FROM messages WHERE channel_id = $2) AS n FROM schedules WHERE id = $1",
      [doomed.id, ch],
    );
    expect(rows[0]).toEqual({ last_error: "key_revoked", last_message_id: null, n: "0" });
  });

  it("record insufficient_scope when the creating key gave up messages:write, and post nothing", async () => {
    const narrowing = await mintKey(url(), "sched-narrowed");
    const ch = await createChannel(url(), narrowing);
    const s = (await create({ channel: ch, cron: "* * * * *", message: { content: "x" } }, narrowing)).body;
    expect((await rest(url(), "PUT", "/v1/keys/me/scopes", { key: narrowing, body: { scopes: ["messages:read", "channels:read"] } })).status).toBe(200);
    clock.advanceSeconds(61);
    await eventually(async () => (await sql.query<{ runs: number }>("SELECT runs FROM schedules WHERE id = $1", [s.id])).rows[0]?.runs === 1);
    const { rows } = await sql.query<{ last_error: string; n: string }>("SELECT last_error, (SELECT count(*) FROM messages WHERE channel_id = $2) AS n FROM schedules WHERE id = $1", [s.id, ch]);
    expect(rows[0]).toEqual({ last_error: "insufficient_scope", n: "0" });
  });

  it("end with their channel: deleting a channel deletes its schedules", async () => {
    const ch = await createChannel(url(), owner);
    const s = (await every("* * * * *", ch)).body;
    await rest(url(), "DELETE", `/v1/channels/${ch}`, { key: owner });
    clock.advanceSeconds(61);
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await get(s.id)).status).toBe(404);
  });
});

describe("who may do what", () => {
  it("lets a writer of a restricted channel create and read its schedules; a stranger is refused and does not see them", async () => {
    const ch = await createChannel(url(), owner, { access: "restricted" });
    await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: member.split(".")[0] } });
    const mine = await every("0 0 * * *", ch, {});
    const theirs = await create({ channel: ch, cron: "0 0 * * *", message: { content: "x" } }, member);
    expect(theirs.status).toBe(201);
    expect((await create({ channel: ch, cron: "0 0 * * *", message: { content: "x" } }, stranger)).body.error).toBe("channel_access_denied");
    expect((await get(mine.body.id, member)).status).toBe(200);
    expect((await get(mine.body.id, stranger)).status).toBe(404);
    const listed = await rest<{ data: ScheduleJson[] }>(url(), "GET", `/v1/schedules?channel=${ch}`, { key: member });
    expect(listed.body.data.map((s) => s.id)).toEqual([mine.body.id, theirs.body.id]);
    const own = await rest<{ data: ScheduleJson[] }>(url(), "GET", "/v1/schedules", { key: member });
    expect(own.body.data.map((s) => s.id)).toContain(theirs.body.id);
    expect(own.body.data.map((s) => s.id)).not.toContain(mine.body.id);
  });

  it("lets the creator or the channel owner change and delete a schedule; another writer gets 403 forbidden", async () => {
    const ch = await createChannel(url(), owner);
    const other = await mintKey(url(), "sched-other");
    const theirs = (await create({ channel: ch, cron: "0 0 * * *", message: { content: "x" } }, member)).body;
    expect((await patch(theirs.id, { cron: "0 12 * * *" }, other)).status).toBe(403);
    expect((await patch(theirs.id, { cron: "0 12 * * *" }, member)).body.cron).toBe("0 12 * * *");
    expect((await patch(theirs.id, { message: { content: "y" } }, owner)).body.message.content).toBe("y");
    expect((await rest(url(), "DELETE", `/v1/schedules/${theirs.id}`, { key: other })).status).toBe(403);
    expect((await rest(url(), "DELETE", `/v1/schedules/${theirs.id}`, { key: owner })).status).toBe(204);
    expect((await get(theirs.id)).status).toBe(404);
  });

  it("refuses an unknown field in a change with 422", async () => {
    const s = (await every("0 0 * * *", await createChannel(url(), owner))).body;
    expect((await patch(s.id, { crontab: "x" })).status).toBe(422);
    expect((await patch(s.id, { cron: "nope" })).body.error).toBe("invalid_cron");
  });
});

describe("two service processes", () => {
  it("post exactly one message per tick over 5 ticks", async () => {
    const a = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn" });
    const b = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn", DATABASE_URL: a.databaseUrl });
    try {
      const key = await mintKey(a.url, "sched-two-processes");
      const ch = await createChannel(a.url, key);
      // Five ticks a second apart, at least two seconds ahead, within one minute (so one cron line names them).
      let start = new Date(Math.ceil((Date.now() + 2_000) / 1000) * 1000);
      if (start.getUTCSeconds() > 54) start = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate(), start.getUTCHours(), start.getUTCMinutes() + 1, 0));
      const secs = [0, 1, 2, 3, 4].map((i) => start.getUTCSeconds() + i);
      const cron = `${secs.join(",")} ${start.getUTCMinutes()} ${start.getUTCHours()} ${start.getUTCDate()} ${start.getUTCMonth() + 1} *`;
      const s = (await rest<ScheduleJson>(a.url, "POST", "/v1/schedules", { key, body: { channel: ch, cron, message: { content: "tick" } } })).body;
      expect(s.next_run_at).toBe(start.toISOString().replace(".000Z", ".000000Z"));
      await eventually(async () => (await rest<ScheduleJson>(b.url, "GET", `/v1/schedules/${s.id}`, { key })).body.runs === 5, 20_000);
      await new Promise((r) => setTimeout(r, 1_500));
      const posted = (await rest<{ data: MessageJson[] }>(a.url, "GET", `/v1/channels/${ch}/messages?since=0&limit=100`, { key })).body.data;
      expect(posted).toHaveLength(5);
      const runs = await a.app.pool.query<{ n: number; distinct_ticks: number; messages: number }>(
        "SELECT count(*)::int AS n, count(DISTINCT scheduled_for)::int AS distinct_ticks, count(DISTINCT message_id)::int AS messages FROM schedule_runs WHERE schedule_id = $1",
        [s.id],
      );
      expect(runs.rows[0]).toEqual({ n: 5, distinct_ticks: 5, messages: 5 });
    } finally {
      await b.close();
      await a.close();
    }
  }, 40_000);
});
