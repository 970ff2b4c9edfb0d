/** The channel webhook's delivery log (src/domain/webhook-deliveries.ts) over an in-memory WebhookStore. */
import { describe, expect, it } from "vitest";
import type { ChannelView } from "../../src/model/channels.js";
import { WebhookDeliveryLog } from "../../src/domain/webhook-deliveries.js";
import type { DeliveryLogRecord } from "../../src/model/webhooks.js";
import { caller } from "../support/domain.js";
import { refusalCode as code } from "../support/errors.js";
import { FakeWebhookStore } from "../support/fakes/webhooks.js";

const owner = caller("owner");
const member = caller("member");
const CHANNEL = "c0ffee00-0000-4000-8000-000000000001";

const entry = (id: number): DeliveryLogRecord => ({
  id: String(id),
  deliveryId: `d${id}`,
  channelId: CHANNEL,
  event: "message.created",
  messageId: null,
  attempt: 1,
  status: "delivered",
  responseStatus: 200,
  error: null,
  durationMs: 3,
  attemptedAt: id,
  nextAttemptAt: null,
});

function setup(entries: number) {
  const store = new FakeWebhookStore();
  for (let i = 1; i <= entries; i++) store.log.push(entry(i));
  // Only the fields the log's access check reads.
  const channel = { id: CHANNEL, createdByKeyId: owner.keyId, access: "open", callerIsMember: false } as unknown as ChannelView;
  return new WebhookDeliveryLog(store, async (identifier) => (identifier === "ch" ? channel : undefined));
}

describe("WebhookDeliveryLog", () => {
  it("pages newest first, with a cursor while pages are full", async () => {
    const log = setup(5);
    const first = await log.list(owner, "ch", { cursor: undefined, limit: 2 });
    expect(first.data.map((d) => d.id)).toEqual(["5", "4"]);
    expect(first.nextCursor).toBe("4");
    const last = await log.list(owner, "ch", { cursor: "2", limit: 2 });
    expect(last.data.map((d) => d.id)).toEqual(["1"]);
    expect(last.nextCursor).toBeNull();
  });

  it("is the owner's only", async () => {
    expect(await code(setup(1).list(member, "ch", { cursor: undefined, limit: undefined }))).toBe("forbidden");
  });

  it("answers channel_not_found for an unknown channel", async () => {
    expect(await code(setup(1).list(owner, "nope", { cursor: undefined, limit: undefined }))).toBe("channel_not_found");
  });

  it("refuses a limit out of range and a cursor that is not a log id, before looking at the channel", async () => {
    const log = setup(1);
    expect(await code(log.list(owner, "nope", { cursor: undefined, limit: 0 }))).toBe("invalid_limit");
    expect(await code(log.list(owner, "nope", { cursor: "abc", limit: 10 }))).toBe("invalid_cursor");
  });
});
