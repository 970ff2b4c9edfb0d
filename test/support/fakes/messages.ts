/** MessageStore over a Map, reading channels (mode, access, pause, members) from a FakeChannelStore. */
import { randomUUID } from "node:crypto";
import type { ActorRef } from "../../../src/model/actors.js";
import { freshLifecycle, keepProgressTail, type BatchCreateOutcome, type CreateOutcome, type FoundMessage, type ListFilter, type MessageInspection, type MessageRecord, type NewAck, type NewClaim, type NewLeases, type NewMessage, type NewProgress, type QueueStats } from "../../../src/model/messages.js";
import { MICROS_PER_SECOND, type Micros } from "../../../src/model/time.js";
import type { MessageStore, RedriveCandidate } from "../../../src/ports/messages.js";
import type { FakeChannelStore } from "./channels.js";

/** A lease that ran out before any acknowledgement no longer holds. */
const lapsed = (m: MessageRecord, now: Micros) =>
  m.claim !== null && m.claim.leaseExpiresAt !== null && m.claim.leaseExpiresAt <= now && m.acknowledgedBy.length === 0;
const claimed = (m: MessageRecord, now: Micros) => m.claim !== null && !lapsed(m, now);
/** Open work from availableAt on; an undelayed message (availableAt = createdAt, NULL in the table) always is. */
const due = (m: MessageRecord, now: Micros) => m.availableAt === m.createdAt || m.availableAt <= now;

export class FakeMessageStore implements MessageStore {
  readonly messages = new Map<string, MessageRecord>();
  private readonly heads = new Map<string, Micros>();

  constructor(private readonly channels: FakeChannelStore) {}

  private accessible(m: MessageRecord, keyId: string): boolean {
    const channel = this.channels.channels.get(m.channelId);
    return channel !== undefined && (channel.access === "open" || channel.createdByKeyId === keyId || this.channels.isMember(channel.id, keyId));
  }

  async create({ delaySeconds = 0, groupKey = null, priority = 3, ttlSeconds, limitIds: _ids, limitNames = [], trace, ...input }: NewMessage): Promise<CreateOutcome> {
    const channel = this.channels.channels.get(input.channelId);
    if (!channel) return { outcome: "channel_not_found", retryAfter: null };
    if (channel.paused) return { outcome: "channel_paused", retryAfter: null };
    const createdAt = this.channels.stamp();
    const message: MessageRecord = {
      ...input,
      trace: trace ?? null,
      id: randomUUID(),
      createdAt,
      availableAt: createdAt + Math.round(delaySeconds * MICROS_PER_SECOND),
      expiresAt: createdAt + (ttlSeconds ?? channel.ttlSeconds) * MICROS_PER_SECOND,
      claim: null,
      acknowledgedBy: [],
      deliveryCount: 0,
      ...freshLifecycle(),
      result: null,
      deadLetter: null,
      groupKey,
      priority,
      limits: limitNames,
    };
    this.messages.set(message.id, message);
    this.heads.set(channel.id, createdAt);
    return { outcome: "created", message };
  }

  async createAll(channelId: string, inputs: readonly NewMessage[]): Promise<BatchCreateOutcome> {
    const channel = this.channels.channels.get(channelId);
    if (!channel) return { outcome: "channel_not_found", retryAfter: null, index: 0 };
    if (channel.paused) return { outcome: "channel_paused", retryAfter: null, index: 0 };
    const messages: MessageRecord[] = [];
    for (const input of inputs) {
      const outcome = await this.create(input);
      if (outcome.outcome === "created") messages.push(outcome.message);
    }
    return { outcome: "created", messages };
  }

  async list(channelId: string, since: Micros | null, limit: number, filter: ListFilter, now: Micros): Promise<MessageRecord[]> {
    return [...this.messages.values()]
      .filter((m) => m.channelId === channelId && m.createdAt > (since ?? -Infinity) && m.expiresAt > now)
      .filter((m) => filter === "all" || (filter === "claimed" ? claimed(m, now) : !claimed(m, now) && due(m, now) && (filter !== "open" || m.acknowledgedBy.length === 0)))
      .sort((a, b) => a.createdAt - b.createdAt)
      .slice(0, limit);
  }

  async claim(messageId: string, claim: NewClaim, now: Micros): Promise<MessageRecord | undefined> {
    const m = this.messages.get(messageId);
    const channel = m && this.channels.channels.get(m.channelId);
    if (!m || !channel || m.expiresAt <= now || claimed(m, now) || !due(m, now) || m.acknowledgedBy.length > 0 || channel.mode !== "claimable" || !this.accessible(m, claim.keyId)) return undefined;
    const updated = {
      ...m,
      claim: { keyId: claim.keyId, actor: claim.actor, claimedAt: now, leaseToken: claim.leaseToken, leaseExpiresAt: claim.leaseExpiresAt },
      deliveryCount: m.deliveryCount + 1,
    };
    this.messages.set(messageId, updated);
    return updated;
  }

  async receive(channelId: string, max: number, leases: NewLeases, now: Micros): Promise<MessageRecord[]> {
    const channel = this.channels.channels.get(channelId);
    if (!channel || channel.mode !== "claimable") return [];
    const open = [...this.messages.values()]
      .filter((m) => m.channelId === channelId && m.expiresAt > now && (m.claim === null ? due(m, now) && m.acknowledgedBy.length === 0 : lapsed(m, now)))
      .sort((a, b) => a.createdAt - b.createdAt)
      .slice(0, max);
    return open.map((m, i) => {
      const claim = { keyId: leases.keyId, actor: leases.actor, claimedAt: now, leaseToken: leases.leaseTokens[i]!, leaseExpiresAt: leases.leaseExpiresAt };
      const updated = { ...m, claim, deliveryCount: m.deliveryCount + 1 };
      this.messages.set(m.id, updated);
      return updated;
    });
  }

  /** Dependencies are SQL (store/message-dependencies.ts); they are tested against PostgreSQL, not here. */
  async dependentsOf(): Promise<MessageRecord[]> {
    return [];
  }

  /** A trace's messages: by their stored traceparent's trace id (access is the SQL's, tested against PostgreSQL). */
  async inTrace(traceId: string): Promise<MessageRecord[]> {
    return [...this.messages.values()].filter((m) => m.trace?.traceparent.slice(3, 35) === traceId);
  }

  /** Waitpoints are SQL (store/waitpoints.ts); they are tested against PostgreSQL, not here. */
  async releaseUntil(): Promise<"waitpoint_not_found"> {
    return "waitpoint_not_found";
  }

  /** Dead letters are SQL (agentbus_dead_letter); they are tested against PostgreSQL, not here. */
  async deadLetter(): Promise<{ moved: number; deadLetterChannelId: string | null }> {
    return { moved: 0, deadLetterChannelId: null };
  }

  /** The live states as STATS_SQL decides them; no history here, so dead letters are only the ones not moved yet. */
  async stats(channelId: string, now: Micros): Promise<QueueStats> {
    const channel = this.channels.channels.get(channelId);
    const claimable = channel?.mode === "claimable";
    const stats: QueueStats = { ready: 0, delayed: 0, inFlight: 0, acknowledged: 0, deadLettered: 0, expired: 0, cancelled: 0, blocked: 0, waiting: 0, oldestReadySince: null, claimToAckP50Ms: null, claimToAckAvgMs: null, live: 0, readyByPriority: [0, 0, 0, 0, 0], groups: claimable ? { count: 0, inFlight: 0, top: [] } : null };
    const spans: number[] = [];
    for (const m of this.messages.values()) {
      if (m.channelId !== channelId) continue;
      if (m.cancelRequestedAt !== null && m.acknowledgedBy.length === 0 && (m.expiresAt <= now || !claimed(m, now))) {
        stats.cancelled += 1;
        continue;
      }
      if (m.expiresAt <= now) {
        if (m.acknowledgedBy.length === 0) stats.expired += 1;
        continue;
      }
      stats.live += 1;
      if (m.acknowledgedBy.length > 0) {
        stats.acknowledged += 1;
        if (m.claim) spans.push((m.acknowledgedBy[0]!.occurredAt - m.claim.claimedAt) / 1000);
      } else if (claimable && claimed(m, now)) stats.inFlight += 1;
      else if (claimable && m.deliveryCount >= (channel.maxDeliveries ?? Infinity)) stats.deadLettered += 1;
      else if (!due(m, now)) stats.delayed += 1;
      else {
        stats.ready += 1;
        stats.readyByPriority[m.priority - 1]! += 1;
        stats.oldestReadySince = Math.min(stats.oldestReadySince ?? Infinity, m.availableAt);
      }
    }
    spans.sort((a, b) => a - b);
    const mid = spans.length / 2;
    if (spans.length > 0) {
      stats.claimToAckP50Ms = spans.length % 2 ? spans[Math.floor(mid)]! : (spans[mid - 1]! + spans[mid]!) / 2;
      stats.claimToAckAvgMs = spans.reduce((a, b) => a + b, 0) / spans.length;
    }
    return stats;
  }

  /** Redrive is SQL (agentbus_redrive); it is tested against PostgreSQL, not here. */
  async redriveCandidates(): Promise<RedriveCandidate[]> {
    return [];
  }

  async redrive(): Promise<Array<{ originChannelId: string; moved: number }>> {
    return [];
  }

  async releaseUnseen(leases: ReadonlyArray<{ messageId: string; leaseToken: string }>, keyId: string, now: Micros): Promise<number> {
    let released = 0;
    for (const { messageId, leaseToken } of leases) {
      const m = this.messages.get(messageId);
      if (!m || m.claim?.leaseToken !== leaseToken || m.claim.keyId !== keyId || m.expiresAt <= now || m.acknowledgedBy.length > 0) continue;
      this.messages.set(messageId, { ...m, claim: null, deliveryCount: Math.max(m.deliveryCount - 1, 0) });
      released++;
    }
    return released;
  }

  /** Messages moved to history, with when (retract here; the purge in the tests that need it). */
  readonly archived = new Map<string, { message: MessageRecord; archivedAt: Micros }>();

  async ackMany(acks: ReadonlyArray<{ messageId: string; ack: NewAck }>, now: Micros): Promise<MessageRecord[]> {
    const acked: MessageRecord[] = [];
    for (const { messageId: id, ack } of acks) {
      const m = await this.ack(id, ack, now);
      if (m) acked.push(m);
    }
    return acked;
  }

  async ack(messageId: string, ack: NewAck, now: Micros): Promise<MessageRecord | undefined> {
    const m = this.messages.get(messageId);
    const channel = m && this.channels.channels.get(m.channelId);
    if (!m || !channel || m.expiresAt <= now || m.acknowledgedBy.some((a) => a.id === ack.actor.id) || !this.accessible(m, ack.keyId)) return undefined;
    if (ack.result !== null) {
      const holder = claimed(m, now) && m.claim?.keyId === ack.keyId && m.claim.actor.id === ack.actor.id;
      if (m.result !== null || (channel.mode === "claimable" && !holder)) return undefined;
    }
    const updated: MessageRecord = {
      ...m,
      acknowledgedBy: [...m.acknowledgedBy, { ...ack.actor, occurredAt: now, metadata: ack.metadata }],
      claim: m.claim && { ...m.claim, leaseToken: null, leaseExpiresAt: null },
      result: m.result ?? ack.result,
    };
    this.messages.set(messageId, updated);
    return updated;
  }

  async release(messageId: string, keyId: string, actor: ActorRef, now: Micros, availableAt: Micros | null = null): Promise<MessageRecord | undefined> {
    const m = this.messages.get(messageId);
    if (!m || m.expiresAt <= now || !claimed(m, now) || m.acknowledgedBy.length > 0 || m.claim?.keyId !== keyId || m.claim.actor.id !== actor.id) return undefined;
    const updated = { ...m, claim: null, availableAt: availableAt ?? m.availableAt };
    this.messages.set(messageId, updated);
    return updated;
  }

  async nextAvailableAt(channelId: string, now: Micros): Promise<Micros | null> {
    const mine = [...this.messages.values()].filter((m) => m.channelId === channelId && m.expiresAt > now);
    const delays = mine.filter((m) => m.claim === null && !due(m, now)).map((m) => m.availableAt);
    const leaseEnds = mine.flatMap((m) => (m.claim?.leaseExpiresAt != null && m.claim.leaseExpiresAt > now && m.acknowledgedBy.length === 0 ? [m.claim.leaseExpiresAt] : []));
    const ahead = [...delays, ...leaseEnds];
    return ahead.length === 0 ? null : Math.min(...ahead);
  }

  async heartbeat(leaseToken: string, keyId: string, until: Micros, now: Micros): Promise<{ leaseToken: string; expiresAt: Micros; cancelRequested: boolean } | undefined> {
    const m = [...this.messages.values()].find((x) => x.claim?.leaseToken === leaseToken);
    if (!m?.claim || m.claim.keyId !== keyId || (m.claim.leaseExpiresAt ?? 0) <= now || m.expiresAt <= now) return undefined;
    const cancelled = m.cancelRequestedAt !== null;
    this.messages.set(m.id, { ...m, expiresAt: cancelled ? until : m.expiresAt, claim: { ...m.claim, leaseExpiresAt: until } });
    return { leaseToken, expiresAt: until, cancelRequested: cancelled };
  }

  /** store/message-progress.ts's rules. */
  async reportProgress(messageId: string, leaseToken: string, keyId: string, now: Micros, progress: NewProgress): Promise<MessageRecord | undefined> {
    const m = this.messages.get(messageId);
    if (!m?.claim || m.claim.leaseToken !== leaseToken || m.claim.keyId !== keyId || (m.claim.leaseExpiresAt ?? 0) <= now || m.expiresAt <= now || m.acknowledgedBy.length > 0) return undefined;
    const before = m.progress;
    const text = progress.text === null ? (before?.text ?? "") : keepProgressTail(progress.append ? (before?.text ?? "") + progress.text : progress.text);
    const updated: MessageRecord = { ...m, progress: { data: progress.data ?? before?.data ?? {}, text, updatedAt: Math.max(now, (before?.updatedAt ?? 0) + 1) } };
    this.messages.set(m.id, updated);
    return updated;
  }

  /** Dependencies are kept by the real store only (docs/decisions.md#dependencies): the domain's unit tests post without parents. */
  async createWithParents(): Promise<never> {
    throw new Error("FakeMessageStore: dependencies are tested against PostgreSQL");
  }

  async parentsOf(): Promise<Map<string, never[]>> {
    return new Map();
  }

  async failDependents(): Promise<number> {
    return 0;
  }

  async dependentChannels(): Promise<string[]> {
    return [];
  }

  /** CANCEL_SQL's rules, without the clock margin. */
  async cancel(messageId: string, now: Micros, reason: string | null): Promise<MessageRecord | undefined> {
    const m = this.messages.get(messageId);
    if (!m || m.acknowledgedBy.length > 0 || m.expiresAt <= now) return undefined;
    const held = claimed(m, now);
    const max = this.channels.channels.get(m.channelId)?.maxDeliveries ?? Infinity;
    if (!held && m.deliveryCount >= max) return undefined;
    const updated: MessageRecord = {
      ...m,
      cancelRequestedAt: m.cancelRequestedAt ?? now,
      cancelReason: m.cancelRequestedAt === null ? reason : m.cancelReason,
      expiresAt: held ? Math.min(m.expiresAt, m.claim?.leaseExpiresAt ?? m.expiresAt) : Math.min(m.expiresAt, now),
    };
    this.messages.set(m.id, updated);
    return updated;
  }

  async leaseHolder(leaseToken: string): Promise<{ keyId: string; messageId: string } | undefined> {
    const m = [...this.messages.values()].find((x) => x.claim?.leaseToken === leaseToken);
    return m?.claim ? { keyId: m.claim.keyId, messageId: m.id } : undefined;
  }

  async channelHead(channelId: string): Promise<Micros | null> {
    return this.heads.get(channelId) ?? null;
  }

  async inspect(messageId: string, keyId: string): Promise<MessageInspection | undefined> {
    const m = this.messages.get(messageId);
    const channel = m && this.channels.channels.get(m.channelId);
    if (!m || !channel) return undefined;
    return { message: m, mode: channel.mode, access: channel.access, channelOwnerKeyId: channel.createdByKeyId, callerIsMember: this.channels.isMember(channel.id, keyId) };
  }

  async find(messageId: string, keyId: string): Promise<FoundMessage | undefined> {
    const live = this.messages.get(messageId);
    const stored = live ? { message: live, archivedAt: null } : this.archived.get(messageId);
    const channel = stored && this.channels.channels.get(stored.message.channelId);
    if (!stored || !channel) return undefined;
    return {
      message: stored.message,
      archivedAt: stored.archivedAt,
      // The fake archives only on retract.
      archivedReason: stored.archivedAt === null ? null : "retracted",
      mode: channel.mode,
      access: channel.access,
      channelOwnerKeyId: channel.createdByKeyId,
      callerIsMember: this.channels.isMember(channel.id, keyId),
    };
  }

  async retract(message: MessageRecord, now: Micros): Promise<boolean> {
    const m = this.messages.get(message.id);
    if (!m || claimed(m, now)) return false;
    this.messages.delete(message.id);
    this.archived.set(m.id, { message: m, archivedAt: now });
    return true;
  }
}
