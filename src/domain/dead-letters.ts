/**
 * Dead letters (docs/decisions.md#dead-letters): a message delivered its
 * channel's max_deliveries times is moved out, to the dead-letter channel or
 * to history, and never delivered from its channel again; the dead-letter
 * channel's owner may redrive them back to where they came from.
 */
import type { Caller } from "../model/caller.js";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";
import type { RedriveCandidate } from "../ports/messages.js";
import { assertOwner, namedChannel } from "./channel.js";
import type { Violation } from "./json-schema.js";
import { violationsOffThread } from "./json-schema-thread.js";
import type { MessageContext } from "./message-context.js";
import { checkMaxMessages, delayed, RECEIVE_MAX_MESSAGES, REDRIVE_MAX_MESSAGES } from "./message-rules.js";

export class DeadLetters {
  constructor(private readonly ctx: MessageContext) {}

  /**
   * Moves the channel's messages that were delivered max_deliveries times
   * and came back out of it before a receive (docs/decisions.md#dead-letters).
   * They are never delivered again either way (the receive and claim
   * statements skip them); moving them here keeps the queue from filling with
   * them and puts them where their owner looks.
   */
  async moveOut(channelId: string, now: Micros): Promise<void> {
    const { moved, deadLetterChannelId } = await this.ctx.store.deadLetter(channelId, RECEIVE_MAX_MESSAGES.max, now);
    if (moved === 0) return;
    this.ctx.options.afterCommit(() => this.ctx.meter.deadLettered(moved));
    if (deadLetterChannelId !== null) this.ctx.announce(deadLetterChannelId);
  }

  /**
   * A refused claim of a message nobody holds: the claim statement skipped
   * it on purpose when it is a dead letter now (refuseDeadLetter) or not due
   * yet (409 message_delayed); otherwise (a release raced the claim) nothing.
   */
  async refuseUnavailable(caller: Caller, message: MessageRecord, now: Micros): Promise<void> {
    await this.refuseDeadLetter(caller, message, now);
    if (message.availableAt > now) throw delayed(message, now);
  }

  /**
   * When the message was delivered its channel's max_deliveries times, it is
   * moved out now and the claim is answered 404, as after a receive had moved it.
   */
  private async refuseDeadLetter(caller: Caller, message: MessageRecord, now: Micros): Promise<void> {
    const channel = await this.ctx.channels.findView(message.channelId, caller.keyId);
    if (channel === undefined || channel.maxDeliveries === null || message.deliveryCount < channel.maxDeliveries) return;
    await this.moveOut(channel.id, now);
    throw new ApiError("message_not_found", `The message was delivered ${message.deliveryCount} times, its channel's max_deliveries, and is a dead letter now`, {
      suggestion: "Look for it in the channel's dead-letter channel, or in its history when the channel has none.",
    });
  }

  /**
   * Owner of the (dead-letter) channel only. Moves up to maxMessages of its
   * dead letters back to their origin channels with a fresh delivery count,
   * oldest first (docs/decisions.md#dead-letters). Only messages the service
   * itself dead-lettered move, each to the origin recorded then, and only
   * when the origin's metadata_schema accepts its metadata (a redrive is a
   * write like any other); the others stay and are listed as refused.
   */
  async redrive(caller: Caller, identifier: string, maxMessages: number | undefined): Promise<RedriveOutcome> {
    const max = checkMaxMessages(maxMessages, REDRIVE_MAX_MESSAGES, ", and call again while 'moved' equals it.");
    const channel = namedChannel(await this.ctx.channels.findView(identifier, caller.keyId), identifier);
    assertOwner(channel, caller);
    const now = this.ctx.clock.now();
    const { chosen, refused } = await this.choose(caller, channel.id, max, now);
    const moved = chosen.length === 0 ? [] : await this.ctx.store.redrive(channel.id, chosen, now);
    for (const origin of moved) this.ctx.announce(origin.originChannelId);
    return { moved: moved.reduce((sum, origin) => sum + origin.moved, 0), refused };
  }

  /**
   * Up to `max` dead letters whose origin accepts their metadata, oldest
   * first; the refused ones are passed over (up to REDRIVE_SCAN of them), so
   * old messages an origin refuses never keep newer ones from moving.
   */
  private async choose(caller: Caller, channelId: string, max: number, now: Micros): Promise<{ chosen: string[]; refused: RedriveRefusal[] }> {
    const chosen: string[] = [];
    const refused: RedriveRefusal[] = [];
    const origins = new Map<string, ChannelView | undefined>();
    let after: RedriveCandidate | null = null;
    for (let scanned = 0; chosen.length < max && scanned < max + REDRIVE_SCAN; ) {
      const page = await this.ctx.store.redriveCandidates(channelId, after, max - chosen.length, now);
      for (const candidate of page) {
        if (!origins.has(candidate.originChannelId)) origins.set(candidate.originChannelId, await this.origin(caller, candidate.originChannelId));
        const origin = origins.get(candidate.originChannelId);
        // Gone meanwhile: agentbus_redrive leaves it where it is.
        if (origin === undefined) continue;
        const violations = await violationsOffThread(caller.keyId, origin.metadataSchema, candidate.metadata);
        if (violations.length === 0) chosen.push(candidate.id);
        else if (refused.length < max) {
          refused.push({
            messageId: candidate.id,
            originChannelId: candidate.originChannelId,
            error: "metadata_validation_failed",
            message: `The metadata does not match the origin channel's metadata_schema (${violations.length} problem(s)); the message stays a dead letter`,
            violations,
          });
        }
      }
      scanned += page.length;
      after = page[page.length - 1] ?? null;
      if (page.length < max - chosen.length || after === null) break;
    }
    return { chosen, refused };
  }

  /** The origin channel as its owner (the caller) sees it; undefined when it is gone. */
  private async origin(caller: Caller, channelId: string): Promise<ChannelView | undefined> {
    const view = await this.ctx.channels.findView(channelId, caller.keyId);
    return view;
  }
}

/** Dead letters passed over because their origin refused them, beyond the `max` moved, before a redrive gives up looking. */
const REDRIVE_SCAN = 1000;

export interface RedriveRefusal {
  messageId: string;
  originChannelId: string;
  error: "metadata_validation_failed";
  message: string;
  violations: Violation[];
}

export interface RedriveOutcome {
  moved: number;
  refused: RedriveRefusal[];
}
