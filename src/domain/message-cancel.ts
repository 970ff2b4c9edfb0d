/**
 * Cancelling a message (docs/decisions.md#cancel): its author or the
 * owner of its claimable channel stops work that is no longer wanted. Open
 * work is cancelled at once and never delivered; work in flight is marked
 * (cancel_requested), its holder sees the mark and may still acknowledge,
 * and it is cancelled when its lease ends or it is released.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { FINISHED_STATES, messageState, type MessageRecord } from "../model/messages.js";
import type { MessageContext } from "./message-context.js";
import { assertMessageId } from "./message-rules.js";

/** Characters a cancel's reason may have. */
export const MAX_CANCEL_REASON = 500;


export class MessageCancel {
  constructor(private readonly ctx: MessageContext) {}

  async cancel(caller: Caller, messageId: string, reason: string | undefined): Promise<MessageRecord> {
    assertMessageId(messageId);
    if (reason !== undefined && [...reason].length > MAX_CANCEL_REASON) {
      throw new ApiError("invalid_cancel_reason", `A cancel reason is at most ${MAX_CANCEL_REASON} characters`, { details: { max: MAX_CANCEL_REASON } });
    }
    const now = this.ctx.clock.now();
    const found = await this.ctx.findReadable(caller, messageId);
    if (found.message.authorKeyId !== caller.keyId && found.channelOwnerKeyId !== caller.keyId) {
      throw new ApiError("forbidden", "Only the message's author or the channel owner may cancel it", {
        suggestion: "Ask its author or the channel's owner; a worker that cannot do a task releases it instead.",
      });
    }
    if (found.mode !== "claimable") throw new ApiError("channel_not_claimable", "Only messages of a claimable channel are work to cancel", {
      suggestion: "A broadcast message is not handed out; its author may retract it with DELETE /v1/messages/{message_id}.",
    });
    if (found.archivedAt !== null || FINISHED_STATES.has(messageState(found.message, now))) throw new ApiError("already_finished");
    // The statement judges the row as it is when it gets it: an ack or a
    // lapse that came first leaves nothing to cancel.
    const cancelled = await this.ctx.store.cancel(found.message.id, now, reason === undefined || reason === "" ? null : reason);
    if (!cancelled) throw new ApiError("already_finished");
    // Cancelled at once (nobody held it): what depends on it will never run (docs/decisions.md#dependencies).
    if (cancelled.dependentsCount > 0 && messageState(cancelled, now) === "cancelled") {
      await this.ctx.store.failDependents([cancelled.id], now);
    }
    // Waiters on GET /v1/messages/{id}?wait= and the channel's followers read again.
    this.ctx.announce(cancelled.channelId);
    return cancelled;
  }
}
