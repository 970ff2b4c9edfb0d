/**
 * Holding one message: claims (first claim wins), leases and their
 * heartbeats, giving a claim back (release, with back-off), and retracting
 * unclaimed work (docs/decisions.md#claims).
 */
import type { ActorRef } from "../model/actors.js";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import { effectiveClaim, type MessageRecord } from "../model/messages.js";
import { isUuid } from "../model/ids.js";
import { MICROS_PER_SECOND, type Micros } from "../model/time.js";
import type { DeadLetters } from "./dead-letters.js";
import type { MessageContext } from "./message-context.js";
import { boundsDeliveries, validatePriority } from "./dispatch-rules.js";
import {
  assertMessageId,
  checkBatchSize,
  checkDelaySeconds,
  checkLeaseSeconds,
  eachOnItsOwn,
  newLeaseToken,
  type BatchItemResult,
} from "./message-rules.js";

const waitpointNotFound = () =>
  new ApiError("waitpoint_not_found", "No waitpoint of your key has this id", { suggestion: "Release with the id of a waitpoint your key created (POST /v1/waitpoints)." });

export type ClaimStatus = "claimed" | "already_claimed" | "already_acknowledged";

export class MessageClaims {
  constructor(
    private readonly ctx: MessageContext,
    private readonly deadLetters: DeadLetters,
  ) {}

  async claim(caller: Caller, messageId: string, actorRef: string | undefined, metadata: { [key: string]: JsonValue } | undefined): Promise<{ status: ClaimStatus; message: MessageRecord }> {
    assertMessageId(messageId);
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    const now = this.ctx.clock.now();
    const claimed = await this.ctx.store.claim(messageId, { keyId: caller.keyId, actor, metadata: metadata ?? null, leaseToken: null, leaseExpiresAt: null }, now);
    if (claimed) {
      this.ctx.countDelivered([claimed], false);
      return { status: "claimed", message: claimed };
    }
    const found = await this.ctx.explainRefusedClaim(caller, messageId, now);
    const claim = effectiveClaim(found.message, now);
    if (!claim) await this.refuseUnclaimed(caller, found.message, now);
    if (claim && claim.keyId === caller.keyId && claim.actor.id === actor.id) {
      return { status: found.message.acknowledgedBy.length > 0 ? "already_acknowledged" : "already_claimed", message: found.message };
    }
    throw new ApiError("already_claimed");
  }

  async claimWithLease(
    caller: Caller,
    messageId: string,
    actorRef: string | undefined,
    leaseSeconds: number | undefined,
    metadata: { [key: string]: JsonValue } | undefined,
  ): Promise<{ leaseToken: string; expiresAt: Micros; message: MessageRecord }> {
    assertMessageId(messageId);
    const seconds = checkLeaseSeconds(leaseSeconds);
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    const now = this.ctx.clock.now();
    const leaseToken = newLeaseToken();
    const expiresAt = now + seconds * MICROS_PER_SECOND;
    const claimed = await this.ctx.store.claim(messageId, { keyId: caller.keyId, actor, metadata: metadata ?? null, leaseToken, leaseExpiresAt: expiresAt }, now);
    if (claimed) {
      this.ctx.countDelivered([claimed], false);
      return { leaseToken, expiresAt, message: claimed };
    }
    const found = await this.ctx.explainRefusedClaim(caller, messageId, now);
    if (!effectiveClaim(found.message, now)) await this.refuseUnclaimed(caller, found.message, now);
    // A lease is exclusive: asking again while any claim holds is a conflict.
    throw new ApiError("already_claimed");
  }

  async heartbeat(caller: Caller, leaseToken: string, leaseSeconds: number | undefined): Promise<{ leaseToken: string; expiresAt: Micros; cancelRequested: boolean }> {
    const seconds = checkLeaseSeconds(leaseSeconds);
    const now = this.ctx.clock.now();
    const extended = await this.ctx.store.heartbeat(leaseToken, caller.keyId, now + seconds * MICROS_PER_SECOND, now);
    if (extended) return extended;
    const holder = await this.ctx.store.leaseHolder(leaseToken);
    if (holder !== undefined && holder.keyId !== caller.keyId) {
      // A stranger to a restricted channel learns nothing more than that.
      await this.ctx.inspect(holder.messageId, caller, now);
      throw new ApiError("forbidden", "This lease is held by another key", {
        suggestion: "Only the key that claimed the message with this lease may extend it.",
      });
    }
    throw new ApiError("lease_expired");
  }

  /**
   * Gives the claim up; with delaySeconds the message is open work again
   * only that much later (a retry with back-off); with untilWaitpoint when
   * that waitpoint completes or times out (docs/decisions.md#waitpoints).
   */
  async release(caller: Caller, messageId: string, actorRef: string | undefined, delaySeconds?: number, priority?: number, untilWaitpoint?: string): Promise<MessageRecord> {
    assertMessageId(messageId);
    const delay = checkDelaySeconds(delaySeconds, Infinity);
    const newPriority = priority === undefined ? null : validatePriority(priority);
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    if (untilWaitpoint === undefined) return this.releaseAs(caller, messageId, actor, delay, newPriority);
    if (delaySeconds !== undefined || priority !== undefined) {
      throw new ApiError("invalid_waitpoint", "Release with until_waitpoint alone: a waitpoint decides when the message is open work again", {
        details: { field: delaySeconds !== undefined ? "delay_seconds" : "priority" },
      });
    }
    return this.releaseUntil(caller, messageId, actor, untilWaitpoint);
  }

  private async releaseUntil(caller: Caller, messageId: string, actor: ActorRef, waitpointId: string): Promise<MessageRecord> {
    if (!isUuid(waitpointId)) throw waitpointNotFound();
    const now = this.ctx.clock.now();
    const released = await this.ctx.store.releaseUntil(messageId, caller.keyId, actor, waitpointId, now);
    if (released === "waitpoint_not_found") throw waitpointNotFound();
    if (released === undefined) return this.refuseRelease(caller, messageId, now);
    // Waiting wakes nobody now, but a receive sleeping until the channel's next due work must re-read it.
    return this.afterRelease(released, now);
  }

  /** What follows any release that took: wake the channel's waiters; one given back after a cancel fails what depends on it. */
  private async afterRelease(released: MessageRecord, now: Micros): Promise<MessageRecord> {
    this.ctx.announce(released.channelId);
    // Given back after a cancel, it is cancelled: what depends on it will never run (docs/decisions.md#dependencies).
    if (released.cancelRequestedAt !== null && released.dependentsCount > 0) await this.ctx.store.failDependents([released.id], now);
    return released;
  }

  /**
   * Releases each id on its own, as release() would, in the order given (a
   * repeated id is judged again). The actor is resolved once: a bad actor
   * refuses the whole request, since it applies to every item.
   */
  async releaseBatch(
    caller: Caller,
    messageIds: readonly string[],
    actorRef: string | undefined,
    delaySeconds?: number,
    priority?: number,
  ): Promise<Array<BatchItemResult<"released">>> {
    checkBatchSize("message_ids", messageIds.length);
    const delay = checkDelaySeconds(delaySeconds, Infinity);
    const newPriority = priority === undefined ? null : validatePriority(priority);
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    return eachOnItsOwn(messageIds, async (messageId) => {
      assertMessageId(messageId);
      await this.releaseAs(caller, messageId, actor, delay, newPriority);
      return "released" as const;
    });
  }

  private async releaseAs(caller: Caller, messageId: string, actor: ActorRef, delaySeconds: number, priority: number | null = null): Promise<MessageRecord> {
    const now = this.ctx.clock.now();
    let availableAt: Micros | null = null;
    if (delaySeconds > 0) {
      // The bound is the TTL of the message's channel, known only once the message is found.
      const found = await this.ctx.explainRefusedClaim(caller, messageId, now);
      const channel = await this.ctx.channels.findView(found.message.channelId, caller.keyId);
      checkDelaySeconds(delaySeconds, channel ? channel.ttlSeconds : Infinity);
      availableAt = now + Math.round(delaySeconds * MICROS_PER_SECOND);
    }
    const released = await this.ctx.store.release(messageId, caller.keyId, actor, now, availableAt, priority);
    // Open work again: wake whoever waits for unclaimed messages.
    if (released) return this.afterRelease(released, now);
    return this.refuseRelease(caller, messageId, now);
  }

  /** Why a release matched nothing. */
  private async refuseRelease(caller: Caller, messageId: string, now: Micros): Promise<never> {
    const found = await this.ctx.explainRefusedClaim(caller, messageId, now);
    // Acknowledged is final: releasing it would hand finished work out again.
    if (found.message.acknowledgedBy.length > 0) throw new ApiError("already_acknowledged", "This message was acknowledged: an acknowledged message cannot be released");
    const claim = effectiveClaim(found.message, now);
    if (!claim) throw new ApiError("not_claimed");
    throw new ApiError("forbidden", "Only the key and actor holding the claim may release it", {
      suggestion: "Release with the same key and actor that claimed the message.",
    });
  }

  /**
   * Why a claim of a message nobody holds was refused: it was acknowledged
   * without a claim (finished: 409 already_acknowledged), it is a dead letter
   * now or not due yet; otherwise (a release raced the claim) nothing.
   */
  private async refuseUnclaimed(caller: Caller, message: MessageRecord, now: Micros): Promise<void> {
    if (message.acknowledgedBy.length > 0) throw new ApiError("already_acknowledged", "This message was acknowledged without a claim: it is finished, not open work");
    const channel = await this.ctx.channels.findView(message.channelId, caller.keyId);
    if (channel && boundsDeliveries(channel)) throw new ApiError("receive_required");
    await this.deadLetters.refuseUnavailable(caller, message, now);
  }

  async retract(caller: Caller, messageId: string): Promise<void> {
    assertMessageId(messageId);
    const now = this.ctx.clock.now();
    const found = await this.ctx.inspect(messageId, caller, now);
    const isAuthor = found.message.authorKeyId === caller.keyId;
    if (!isAuthor && found.channelOwnerKeyId !== caller.keyId) {
      throw new ApiError("forbidden", "Only the message's author or the channel owner may retract it");
    }
    if (effectiveClaim(found.message, now)) throw new ApiError("message_claimed");
    if (!(await this.ctx.store.retract(found.message, now))) throw new ApiError("message_claimed");
    // Withdrawn before it was done: what depends on it will never run (docs/decisions.md#dependencies).
    if (found.message.dependentsCount > 0) await this.ctx.store.failDependents([found.message.id], now);
    // A producer waiting on GET /v1/messages/{id}?wait= gets the archived copy at once.
    this.ctx.announce(found.message.channelId);
  }
}
