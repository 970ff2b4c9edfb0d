/**
 * Acknowledging messages, one or a batch, with an optional result
 * (docs/decisions.md#results): one entry per actor in acknowledged_by, and a
 * result only from the holder of the claim in a claimable channel.
 */
import type { ActorRef } from "../model/actors.js";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import { effectiveClaim, type MessageRecord, type NewAck } from "../model/messages.js";
import type { MessageContext } from "./message-context.js";
import { assertMessageId, checkAckExtras, checkBatchSize, eachOnItsOwn, type AckExtras, type BatchItemResult, type CheckedAck } from "./message-rules.js";

export type AckStatus = "acknowledged" | "already_acknowledged";

export class MessageAcks {
  constructor(private readonly ctx: MessageContext) {}

  async ack(caller: Caller, messageId: string, actorRef: string | undefined, extras: AckExtras = {}): Promise<{ status: AckStatus; message: MessageRecord }> {
    assertMessageId(messageId);
    const checked = checkAckExtras(extras);
    return this.ackAs(caller, messageId, await this.ctx.actors.resolveForClaim(caller, actorRef), checked);
  }

  /**
   * Acknowledges each id on its own, as ack() would (see releaseBatch): one
   * statement acknowledges every id it may, and only the ids it left alone
   * are looked at one by one, to answer as ack() would (already
   * acknowledged, or why not). An id given twice is acknowledged at its first
   * place.
   */
  async ackBatch(caller: Caller, messageIds: readonly string[], actorRef: string | undefined, extras: AckExtras = {}): Promise<Array<BatchItemResult<AckStatus>>> {
    checkBatchSize("message_ids", messageIds.length);
    const checked = checkAckExtras(extras);
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    return this.acknowledgeEach(caller, actor, messageIds.map((messageId) => ({ messageId, ...checked })));
  }

  /** ackBatch() for checked items, each with its own result. */
  async acknowledgeEach(caller: Caller, actor: ActorRef, items: ReadonlyArray<{ messageId: string } & CheckedAck>): Promise<Array<BatchItemResult<AckStatus>>> {
    const first = new Map<string, { messageId: string; ack: NewAck }>();
    for (const { messageId, result, metadata } of items) {
      const id = messageId.toLowerCase();
      if (isUuid(id) && !first.has(id)) first.set(id, { messageId: id, ack: { keyId: caller.keyId, actor, result, metadata } });
    }
    const acked = await this.ctx.store.ackMany([...first.values()], this.ctx.clock.now());
    for (const channelId of new Set(acked.map((m) => m.channelId))) this.ctx.announce(channelId);
    await this.wakeDependents(acked);
    const pending = new Set(acked.map((m) => m.id));
    // The holder learns that a message it finished had been cancelled meanwhile.
    const cancelled = new Set(acked.filter((m) => m.cancelRequestedAt !== null).map((m) => m.id));
    const results = await eachOnItsOwn(
      items.map((i) => i.messageId),
      async (messageId, index) => {
        assertMessageId(messageId);
        if (pending.delete(messageId.toLowerCase())) return "acknowledged" as const;
        const { status, message } = await this.ackAs(caller, messageId, actor, items[index]!);
        if (message.cancelRequestedAt !== null) cancelled.add(message.id);
        return status;
      },
    );
    return results.map((r) => ("error" in r || !cancelled.has(r.messageId.toLowerCase()) ? r : { ...r, cancelRequested: true }));
  }

  /**
   * Acknowledged parents free their dependents (trigger
   * messages_unblock_dependents, docs/decisions.md#dependencies), perhaps in
   * other channels: their waiting receives are woken.
   */
  private async wakeDependents(acked: readonly MessageRecord[]): Promise<void> {
    const parents = acked.filter((m) => m.dependentsCount > 0).map((m) => m.id);
    if (parents.length === 0) return;
    for (const channelId of await this.ctx.store.dependentChannels(parents)) this.ctx.announce(channelId);
  }

  private async ackAs(caller: Caller, messageId: string, actor: ActorRef, { result, metadata }: CheckedAck): Promise<{ status: AckStatus; message: MessageRecord }> {
    const now = this.ctx.clock.now();
    const acked = await this.ctx.store.ack(messageId, { keyId: caller.keyId, actor, result, metadata }, now);
    if (acked) {
      // Producers waiting on GET /v1/messages/{id}?wait= for this ack.
      this.ctx.announce(acked.channelId);
      await this.wakeDependents([acked]);
      return { status: "acknowledged", message: acked };
    }
    const found = await this.ctx.inspect(messageId, caller, now);
    // A replay changes nothing, whatever result it carries: the first one stands.
    if (found.message.acknowledgedBy.some((a) => a.id === actor.id)) return { status: "already_acknowledged", message: found.message };
    if (result !== null) {
      if (found.message.result !== null) throw new ApiError("result_already_set");
      if (found.mode === "claimable") {
        const claim = effectiveClaim(found.message, now);
        if (!claim) throw new ApiError("not_claimed", "Only the holder of the claim may send a result; this message is not claimed");
        if (claim.keyId !== caller.keyId || claim.actor.id !== actor.id) {
          throw new ApiError("forbidden", "Only the key and actor holding the claim may send a result", {
            suggestion: "Acknowledge without 'result', or send it with the key and actor that claimed the message.",
          });
        }
      }
    }
    return { status: "already_acknowledged", message: found.message };
  }
}
