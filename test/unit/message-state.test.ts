/** The rules of a message's state (docs/decisions.md#message-state). */
import { describe, expect, it } from "vitest";
import { messageState, type MessageRecord } from "../../src/model/messages.js";

const T = 1_800_000_000_000_000;
const S = 1_000_000;
const message = (over: Partial<MessageRecord> = {}): MessageRecord => ({
  id: "m", channelId: "c", authorKeyId: "k", authorLabel: "a", actor: null, actorLabel: null, content: "x", metadata: {}, mentions: [],
  createdAt: T, expiresAt: T + 3600 * S, availableAt: T, claim: null, acknowledgedBy: [], deliveryCount: 0, result: null,
  deadLetter: null, groupKey: null, priority: 3, limits: [], maxDeliveries: null, cancelRequestedAt: null, cancelReason: null, progress: null, dependsOn: [], blockedBy: 0, dependentsCount: 0, waitpoint: null, trace: null, ...over,
});
const held = (leaseExpiresAt: number | null) => ({ keyId: "w", actor: { id: "", name: "" }, claimedAt: T, leaseToken: "t", leaseExpiresAt });
const acked = [{ id: "w", name: "w", occurredAt: T + S, metadata: {} }];

describe("a message's state", () => {
  it("is waiting while released to wait for a waitpoint that has not completed, until its timeout", () => {
    const waiting = message({ availableAt: T + 60 * S, waitpoint: { id: "w", completed: false, data: null } });
    expect(messageState(waiting, T + S)).toBe("waiting");
    expect(messageState(waiting, T + 60 * S)).toBe("ready");
  });
  it("is ready once its waitpoint is completed", () => {
    expect(messageState(message({ availableAt: T, waitpoint: { id: "w", completed: true, data: {} } }), T + S)).toBe("ready");
  });
  it("is ready when open and due", () => {
    expect(messageState(message(), T + S)).toBe("ready");
  });
  it("is ready, not delayed, when its created_at is a little ahead of the service clock", () => {
    expect(messageState(message(), T - 5)).toBe("ready");
  });
  it("is delayed until a delay runs out", () => {
    expect(messageState(message({ availableAt: T + 60 * S }), T + S)).toBe("delayed");
    expect(messageState(message({ availableAt: T + 60 * S }), T + 60 * S)).toBe("ready");
  });
  it("is in flight while a lease runs, and ready again once it lapses", () => {
    expect(messageState(message({ claim: held(T + 30 * S), deliveryCount: 1 }), T + S)).toBe("in_flight");
    expect(messageState(message({ claim: held(T + 30 * S), deliveryCount: 1 }), T + 30 * S)).toBe("ready");
  });
  it("is in flight while claimed without a lease", () => {
    expect(messageState(message({ claim: held(null), deliveryCount: 1 }), T + 3000 * S)).toBe("in_flight");
  });
  it("is dead-lettered once delivered max_deliveries times and not held", () => {
    expect(messageState(message({ deliveryCount: 3, maxDeliveries: 3 }), T + S)).toBe("dead_lettered");
    expect(messageState(message({ claim: held(T + 30 * S), deliveryCount: 3, maxDeliveries: 3 }), T + S)).toBe("in_flight");
  });
  it("is acknowledged once acknowledged, past its expiry too", () => {
    expect(messageState(message({ acknowledgedBy: acked, claim: held(T + 30 * S) }), T + 2 * S)).toBe("acknowledged");
    expect(messageState(message({ acknowledgedBy: acked }), T + 7200 * S)).toBe("acknowledged");
  });
  it("is expired past its expiry without an acknowledgement", () => {
    expect(messageState(message({ claim: held(null) }), T + 3600 * S)).toBe("expired");
  });
  it("tells how an archived copy ended: dead-lettered, acknowledged, or else expired", () => {
    expect(messageState(message({ deliveryCount: 1 }), T, "dead_lettered")).toBe("dead_lettered");
    expect(messageState(message({ acknowledgedBy: acked }), T, "expired")).toBe("acknowledged");
    expect(messageState(message(), T, "retracted")).toBe("expired");
    expect(messageState(message(), T, "redriven")).toBe("expired");
  });
});
