/**
 * A worker's receive (docs/decisions.md#receive): lease up to max_messages of
 * a claimable channel's oldest open work, waiting for some when there is
 * none, and acknowledge what it finished in the same request.
 */
import type { ActorRef } from "../model/actors.js";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import type { MessageRecord } from "../model/messages.js";
import { MICROS_PER_SECOND, type Micros } from "../model/time.js";
import type { DeadLetters } from "./dead-letters.js";
import { readOrWait } from "./long-poll.js";
import type { AckStatus, MessageAcks } from "./message-acks.js";
import type { MessageContext } from "./message-context.js";
import { dispatchesByRule, LIMITED_RECHECK_MS, sharesLimits } from "./dispatch-rules.js";
import {
  atIndex,
  checkAckExtras,
  checkBatchSize,
  checkLeaseSeconds,
  checkMaxMessages,
  checkWait,
  newLeaseToken,
  RECEIVE_MAX_MESSAGES,
  type BatchItemResult,
} from "./message-rules.js";

export interface ReceiveInput {
  maxMessages: number | undefined;
  leaseSeconds: number | undefined;
  /** Long-poll seconds; capped by the server. */
  wait: number | undefined;
  actor: string | undefined;
  signal?: AbortSignal | undefined;
}

/** A task the caller finished, acknowledged before its next receive. */
export interface CompletedTask {
  messageId: string;
  result?: string | undefined;
}

/** A message received under a lease of its own. */
export interface ReceivedLease {
  message: MessageRecord;
  leaseToken: string;
  leaseExpiresAt: Micros;
}

export class MessageReceiving {
  constructor(
    private readonly ctx: MessageContext,
    private readonly acks: MessageAcks,
    private readonly deadLetters: DeadLetters,
  ) {}

  /**
   * Leases up to maxMessages of the channel's open work to the caller, oldest
   * first (docs/decisions.md#receive). Finding none, it waits for a wake-up
   * on the channel (a post or a release, from any replica) and tries again
   * until the wait ends.
   */
  async receive(caller: Caller, identifier: string, input: ReceiveInput): Promise<ReceivedLease[]> {
    return (await this.prepare(caller, identifier, input)).receive();
  }

  /**
   * Acknowledges the tasks the caller finished, each on its own as
   * ackBatch() would, and receives as receive() does: a worker's loop in one
   * round trip per task (docs/decisions.md#receive). Everything the receive
   * is refused for is judged first, and every result, so a refused request
   * acknowledges nothing. The two run side by side (a request waits for one
   * database round trip, not two); a finished task whose lease had lapsed
   * can be leased again by the receive before its acknowledgement lands, and
   * is then left out of the answer (acknowledged, it is no longer work).
   * When the acknowledgements fail, what the receive leased is released:
   * the caller never sees those leases.
   */
  /**
   * The next open message as a plain claim (no lease), in the order a receive
   * would hand it out (priority, dispatch, group bounds, limits): the
   * compatibility surface's claim-next. Null when there is none.
   */
  async claimNext(caller: Caller, identifier: string, actorRef: string | undefined, metadata?: { [key: string]: JsonValue }): Promise<MessageRecord | null> {
    const channel = await this.ctx.usableChannel(caller, identifier);
    if (channel.mode !== "claimable") throw new ApiError("channel_not_claimable");
    const actor = await this.ctx.actors.resolveForClaim(caller, actorRef);
    const now = this.ctx.clock.now();
    if (channel.maxDeliveries !== null) await this.deadLetters.moveOut(channel.id, now);
    const [claimed] = await this.ctx.store.receive(channel.id, 1, { keyId: caller.keyId, actor, leaseTokens: [null], leaseExpiresAt: null, metadata: metadata ?? null }, now, dispatchesByRule(channel));
    if (claimed === undefined) return null;
    this.ctx.countDelivered([claimed], false);
    return claimed;
  }

  async completeAndReceive(
    caller: Caller,
    identifier: string,
    input: ReceiveInput,
    complete: readonly CompletedTask[],
  ): Promise<{ completed: Array<BatchItemResult<AckStatus>>; leases: ReceivedLease[] }> {
    if (complete.length === 0) return { completed: [], leases: await this.receive(caller, identifier, input) };
    checkBatchSize("complete", complete.length, 0);
    const acks = complete.map((task, index) => ({ messageId: task.messageId, ...atIndex(index, () => checkAckExtras({ result: task.result }), "complete") }));
    const prepared = await this.prepare(caller, identifier, input);
    const [completed, leased] = await Promise.allSettled([this.acks.acknowledgeEach(caller, prepared.actor, acks), prepared.receive()]);
    if (completed.status === "rejected") {
      if (leased.status === "fulfilled") await this.giveBack(caller, leased.value);
      throw completed.reason;
    }
    if (leased.status === "rejected") throw leased.reason;
    const done = new Set(completed.value.flatMap((r, i) => ("status" in r && r.status === "acknowledged" ? [acks[i]!.messageId.toLowerCase()] : [])));
    return { completed: completed.value, leases: leased.value.filter((l) => !done.has(l.message.id)) };
  }

  /**
   * Gives back leases the caller will never see (its acknowledgements failed,
   * or it went away while they were taken): open work again at once, the
   * delivery not counted. A failure leaves them to run out.
   */
  private async giveBack(caller: Caller, leases: readonly ReceivedLease[]): Promise<void> {
    if (leases.length === 0) return;
    const given = leases.map((l) => ({ messageId: l.message.id, leaseToken: l.leaseToken }));
    const released = await this.ctx.store.releaseUnseen(given, caller.keyId, this.ctx.clock.now()).catch(() => 0);
    if (released > 0) this.ctx.announce(leases[0]!.message.channelId);
  }

  /** Judges a receive and resolves its channel and actor; `receive` then leases (or waits for) work. */
  private async prepare(caller: Caller, identifier: string, input: ReceiveInput): Promise<{ actor: ActorRef; receive: () => Promise<ReceivedLease[]> }> {
    const max = checkMaxMessages(input.maxMessages, RECEIVE_MAX_MESSAGES, ".");
    const seconds = checkLeaseSeconds(input.leaseSeconds);
    const wait = checkWait(input.wait);
    const channel = await this.ctx.usableChannel(caller, identifier);
    if (channel.mode !== "claimable") throw new ApiError("channel_not_claimable");
    const actor = await this.ctx.actors.resolveForClaim(caller, input.actor);
    const gone = () => input.signal?.aborted === true;
    const read = async (): Promise<ReceivedLease[]> => {
      // A caller that went away leases nothing: nobody would work on it until the lease ran out.
      if (gone()) return [];
      const now = this.ctx.clock.now();
      const leaseExpiresAt = now + seconds * MICROS_PER_SECOND;
      const leaseTokens = Array.from({ length: max }, newLeaseToken);
      if (channel.maxDeliveries !== null) await this.deadLetters.moveOut(channel.id, now);
      // The settings as they are now (a long-poll outlives the view it started
      // with); access is the statement's to judge, as it always was.
      const load = () => this.ctx.channels.findView(channel.id, caller.keyId);
      const current = (this.ctx.options.views ? await this.ctx.options.views.find(channel.id, caller.keyId, load) : await load()) ?? channel;
      const leased = await this.ctx.store.receive(channel.id, max, { keyId: caller.keyId, actor, leaseTokens, leaseExpiresAt }, now, dispatchesByRule(current));
      const leases = leased.map((message) => ({ message, leaseToken: message.claim?.leaseToken ?? "", leaseExpiresAt }));
      // Gone while the statement ran: the leases go back at once, uncounted.
      if (gone() && leases.length > 0) {
        await this.giveBack(caller, leases);
        return [];
      }
      this.ctx.countDelivered(leased, true);
      return leases;
    };
    const recheck = sharesLimits(channel) ? LIMITED_RECHECK_MS : undefined;
    return { actor, receive: () => readOrWait(read, this.ctx.longPoll(caller, channel.id, wait, input.signal, true, recheck)) };
  }
}
