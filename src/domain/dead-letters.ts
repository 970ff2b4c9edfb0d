/**
 * Dead letters (docs/decisions.md#dead-letters): a message delivered its
 * channel's max_deliveries times is moved out, to the dead-letter channel or
 * to history, and never delivered from its channel again; the dead-letter
 * channel's owner may redrive them back to where they came from.
 */
import type { Caller } from "../model/caller.js";
import { isAmbiguous } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";
import { assertOwner, namedChannel } from "./channel.js";
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
    if (channel === undefined || isAmbiguous(channel) || channel.maxDeliveries === null || message.deliveryCount < channel.maxDeliveries) return;
    await this.moveOut(channel.id, now);
    throw new ApiError("message_not_found", `The message was delivered ${message.deliveryCount} times, its channel's max_deliveries, and is a dead letter now`, {
      suggestion: "Look for it in the channel's dead-letter channel, or in its history when the channel has none.",
    });
  }

  /**
   * Owner of the (dead-letter) channel only. Moves up to maxMessages of its
   * dead letters back to their origin channels with a fresh delivery count;
   * how many moved (docs/decisions.md#dead-letters).
   */
  async redrive(caller: Caller, identifier: string, maxMessages: number | undefined): Promise<number> {
    const max = checkMaxMessages(maxMessages, REDRIVE_MAX_MESSAGES, ", and call again while 'moved' equals it.");
    const channel = namedChannel(await this.ctx.channels.findView(identifier, caller.keyId), identifier);
    assertOwner(channel, caller);
    const moved = await this.ctx.store.redrive(channel.id, max, this.ctx.clock.now());
    for (const origin of moved) this.ctx.announce(origin.originChannelId);
    return moved.reduce((sum, origin) => sum + origin.moved, 0);
  }
}
