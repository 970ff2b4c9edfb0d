/** Issue 29, items 1 and 2 through the client: a message's state, the stats of every state, and cancelling, over each transport. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { ChannelMode, createClient, isAgentbusError, MessageState, WaitpointState, type TransportKind } from "../src/index.js";
import { clientWithNewKey } from "./helpers.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

const transports: TransportKind[] = ["grpc", "connect", "grpc-web"];

describe.each(transports)("over %s", (transport) => {
  it("shows a message ready, then in flight, then acknowledged, and the stats count each state", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const { id: channel } = await client.channels.createChannel({ name: "states", mode: ChannelMode.CLAIMABLE });
    const { message } = await client.messages.createMessage({ identifier: channel, content: "task" });
    expect(message?.state).toBe(MessageState.READY);
    await client.messages.createMessage({ identifier: channel, content: "later", delaySeconds: 600 });
    const [lease] = (await client.messages.receiveMessages({ identifier: channel, maxMessages: 1 })).data;
    expect(lease?.message?.state).toBe(MessageState.IN_FLIGHT);
    await client.messages.ackMessage({ messageId: message!.id });
    expect((await client.messages.getMessage({ messageId: message!.id })).state).toBe(MessageState.ACKNOWLEDGED);
    const stats = await client.messages.getChannelStats({ identifier: channel });
    expect(stats).toMatchObject({ ready: 0, delayed: 1, blocked: 0, waiting: 0, inFlight: 0, acknowledged: 1, deadLettered: 0, cancelled: 0, expired: 0 });
  });

  it("cancels a task a worker holds: the heartbeat says so, the release cancels it, and a second cancel is already_finished", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const { id: channel } = await client.channels.createChannel({ name: "cancels", mode: ChannelMode.CLAIMABLE });
    const { message } = await client.messages.createMessage({ identifier: channel, content: "task" });
    const [lease] = (await client.messages.receiveMessages({ identifier: channel, maxMessages: 1 })).data;
    const cancelled = await client.messages.cancelMessage({ messageId: message!.id, reason: "not needed" });
    expect(cancelled.message).toMatchObject({ state: MessageState.IN_FLIGHT, cancelRequested: true, cancelReason: "not needed" });
    expect((await client.messages.heartbeatLease({ leaseToken: lease!.leaseToken, leaseSeconds: 60 })).cancelRequested).toBe(true);
    await client.messages.releaseMessage({ messageId: message!.id });
    expect((await client.messages.getMessage({ messageId: message!.id })).state).toBe(MessageState.CANCELLED);
    const again = await client.messages.cancelMessage({ messageId: message!.id }).catch((err: unknown) => err);
    expect(isAgentbusError(again, "already_finished")).toBe(true);
  });

  it("parks a task on a waitpoint that a keyless client completes with the token; the task comes back with the answer", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const { id: channel } = await client.channels.createChannel({ name: "waitpoints", mode: ChannelMode.CLAIMABLE });
    const { message } = await client.messages.createMessage({ identifier: channel, content: "spend $40?" });
    await client.messages.receiveMessages({ identifier: channel, maxMessages: 1 });
    const waitpoint = await client.waitpoints.createWaitpoint({ timeoutSeconds: 600, description: "approve" });
    expect(waitpoint).toMatchObject({ state: WaitpointState.WAITING, token: expect.stringMatching(/^wpt_/) });
    const released = await client.messages.releaseMessage({ messageId: message!.id, untilWaitpoint: waitpoint.id });
    expect(released.message?.state).toBe(MessageState.WAITING);
    const anonymous = createClient({ baseUrl: server.url, transport });
    const completed = await anonymous.waitpoints.completeWaitpoint({ token: waitpoint.token!, data: { approved: true } });
    expect(completed.state).toBe(WaitpointState.COMPLETED);
    const [back] = (await client.messages.receiveMessages({ identifier: channel, maxMessages: 1 })).data;
    expect(back?.message?.waitpoint).toMatchObject({ id: waitpoint.id, data: { approved: true }, timedOut: false });
    const again = await anonymous.waitpoints.completeWaitpoint({ token: waitpoint.token! }).catch((err: unknown) => err);
    expect(isAgentbusError(again, "waitpoint_already_completed")).toBe(true);
  });

  it("creates, pauses and deletes a schedule", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const { id: channel } = await client.channels.createChannel({ name: "schedules", mode: ChannelMode.CLAIMABLE });
    const created = await client.schedules.createSchedule({ channel, cron: "0 9 * * *", timezone: "Europe/Berlin", message: { content: "standup" } });
    expect(created).toMatchObject({ channelId: channel, timezone: "Europe/Berlin", paused: false, message: { content: "standup" } });
    expect(created.nextRunAt).toBeDefined();
    const paused = await client.schedules.updateSchedule({ id: created.id, update: { paused: true }, updateMask: { paths: ["paused"] } });
    expect(paused).toMatchObject({ paused: true });
    expect(paused.nextRunAt).toBeUndefined();
    expect((await client.schedules.listSchedules({ channel })).data.map((s) => s.id)).toEqual([created.id]);
    await client.schedules.deleteSchedule({ id: created.id });
    const gone = await client.schedules.getSchedule({ id: created.id }).catch((err: unknown) => err);
    expect(isAgentbusError(gone, "schedule_not_found")).toBe(true);
    const bad = await client.schedules.createSchedule({ channel, cron: "nope", message: { content: "x" } }).catch((err: unknown) => err);
    expect(isAgentbusError(bad, "invalid_cron")).toBe(true);
  });

  it("reports progress on a held task and follows the task with watchMessage until its result", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const { id: channel } = await client.channels.createChannel({ name: "progress", mode: ChannelMode.CLAIMABLE });
    const { message } = await client.messages.createMessage({ identifier: channel, content: "task" });
    const [lease] = (await client.messages.receiveMessages({ identifier: channel, maxMessages: 1 })).data;
    const events: string[] = [];
    for await (const e of client.messages.watchMessage({ messageId: message!.id })) {
      events.push(e.event);
      if (events.length === 2) {
        const reported = await client.messages.reportProgress({ messageId: message!.id, leaseToken: lease!.leaseToken, data: { pct: 50 }, text: "half" });
        expect(reported.message?.progress).toMatchObject({ data: { pct: 50 }, text: "half" });
      }
      if (e.event === "progress") await client.messages.ackMessage({ messageId: message!.id, result: "done" });
    }
    expect(events).toEqual(["open", "state", "progress", "state", "result"]);
  });
});
