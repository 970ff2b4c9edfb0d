/**
 * The rules of live messages (docs/decisions.md#channels-and-messages), one
 * use case per module: posting (message-posting.ts), reading, following and
 * waiting (message-reading.ts), claims, leases, release and retraction
 * (message-claims.ts), acknowledgements (message-acks.ts), the worker's
 * receive (message-receiving.ts), dead letters (dead-letters.ts),
 * cancellation (message-cancel.ts) and progress (message-progress.ts). This
 * module wires them over one shared context and is what the handlers call.
 */
import type { Caller } from "../model/caller.js";
import type { JsonValue } from "../model/json.js";
import type { FoundMessage, MessageParent, MessageRecord, QueueStats } from "../model/messages.js";
import type { Clock, Micros } from "../model/time.js";
import type { ChannelStore } from "../ports/channels.js";
import type { MessageStore } from "../ports/messages.js";
import { DeadLetters, type RedriveOutcome } from "./dead-letters.js";
import { MessageAcks, type AckStatus } from "./message-acks.js";
import { MessageCancel } from "./message-cancel.js";
import { MessageProgressing, type OpenedMessageWatch, type ProgressInput } from "./message-progress.js";
import { MessageClaims, type ClaimStatus } from "./message-claims.js";
import { MessageContext, type ActorDirectory, type MessagesOptions } from "./message-context.js";
import { MessagePosting, type NewMessageInput } from "./message-posting.js";
import { MessageReading, type GetInput, type ListInput, type OpenedWatch, type Page } from "./message-reading.js";
import { MessageReceiving, type CompletedTask, type ReceiveInput, type ReceivedLease } from "./message-receiving.js";
import type { AckExtras, BatchItemResult } from "./message-rules.js";

export type { ActorDirectory, MessagesOptions } from "./message-context.js";
export type { MessageEvent, OpenedMessageWatch, ProgressInput } from "./message-progress.js";
export type { NewMessageInput } from "./message-posting.js";
export type { GetInput, ListInput, OpenedWatch, Page } from "./message-reading.js";
export type { CompletedTask, ReceiveInput, ReceivedLease } from "./message-receiving.js";
export type { ClaimStatus } from "./message-claims.js";
export type { AckStatus } from "./message-acks.js";
export type { AckExtras, BatchItemResult } from "./message-rules.js";
export type { RedriveOutcome, RedriveRefusal } from "./dead-letters.js";

export class Messages {
  private readonly posting: MessagePosting;
  private readonly reading: MessageReading;
  private readonly claims: MessageClaims;
  private readonly acks: MessageAcks;
  private readonly receiving: MessageReceiving;
  private readonly deadLetters: DeadLetters;
  private readonly cancelling: MessageCancel;
  private readonly progressing: MessageProgressing;

  constructor(private readonly store: MessageStore, channels: ChannelStore, actors: ActorDirectory, clock: Clock, options: MessagesOptions) {
    const ctx = new MessageContext(store, channels, actors, clock, options);
    this.deadLetters = new DeadLetters(ctx);
    this.posting = new MessagePosting(ctx);
    this.reading = new MessageReading(ctx);
    this.claims = new MessageClaims(ctx, this.deadLetters);
    this.acks = new MessageAcks(ctx);
    this.receiving = new MessageReceiving(ctx, this.acks, this.deadLetters);
    this.cancelling = new MessageCancel(ctx);
    this.progressing = new MessageProgressing(ctx);
  }

  create(caller: Caller, identifier: string, input: NewMessageInput): Promise<{ message: MessageRecord; nextCursor: string }> {
    return this.posting.create(caller, identifier, input);
  }

  createBatch(caller: Caller, identifier: string, inputs: readonly NewMessageInput[]): Promise<{ messages: MessageRecord[]; nextCursor: string }> {
    return this.posting.createBatch(caller, identifier, inputs);
  }

  list(caller: Caller, identifier: string, input: ListInput): Promise<Page> {
    return this.reading.list(caller, identifier, input);
  }

  openWatch(caller: Caller, identifier: string, since: string | undefined, signal?: AbortSignal): Promise<OpenedWatch> {
    return this.reading.openWatch(caller, identifier, since, signal);
  }

  get(caller: Caller, messageId: string, input: GetInput = {}): Promise<FoundMessage> {
    return this.reading.get(caller, messageId, input);
  }

  async stats(caller: Caller, identifier: string): Promise<QueueStats> {
    return (await this.reading.stats(caller, identifier)).stats;
  }

  /** stats, with the id of the channel the identifier named. */
  statsOf(caller: Caller, identifier: string): Promise<{ channelId: string; stats: QueueStats }> {
    return this.reading.stats(caller, identifier);
  }

  claim(caller: Caller, messageId: string, actorRef: string | undefined, metadata: { [key: string]: JsonValue } | undefined): Promise<{ status: ClaimStatus; message: MessageRecord }> {
    return this.claims.claim(caller, messageId, actorRef, metadata);
  }

  claimWithLease(
    caller: Caller,
    messageId: string,
    actorRef: string | undefined,
    leaseSeconds: number | undefined,
    metadata: { [key: string]: JsonValue } | undefined,
  ): Promise<{ leaseToken: string; expiresAt: Micros; message: MessageRecord }> {
    return this.claims.claimWithLease(caller, messageId, actorRef, leaseSeconds, metadata);
  }

  heartbeat(caller: Caller, leaseToken: string, leaseSeconds: number | undefined): Promise<{ leaseToken: string; expiresAt: Micros; cancelRequested: boolean }> {
    return this.claims.heartbeat(caller, leaseToken, leaseSeconds);
  }

  release(caller: Caller, messageId: string, actorRef: string | undefined, delaySeconds?: number, priority?: number, untilWaitpoint?: string): Promise<MessageRecord> {
    return this.claims.release(caller, messageId, actorRef, delaySeconds, priority, untilWaitpoint);
  }

  releaseBatch(caller: Caller, messageIds: readonly string[], actorRef: string | undefined, delaySeconds?: number, priority?: number): Promise<Array<BatchItemResult<"released">>> {
    return this.claims.releaseBatch(caller, messageIds, actorRef, delaySeconds, priority);
  }

  retract(caller: Caller, messageId: string): Promise<void> {
    return this.claims.retract(caller, messageId);
  }

  cancel(caller: Caller, messageId: string, reason: string | undefined): Promise<MessageRecord> {
    return this.cancelling.cancel(caller, messageId, reason);
  }

  /** Received messages' parents with their results (docs/decisions.md#dependencies): the receiver was given them, so no further check. */
  parentsOf(messageIds: readonly string[]): Promise<Map<string, MessageParent[]>> {
    return this.store.parentsOf(messageIds);
  }

  /** A message's live dependents (docs/decisions.md#dependencies), for a caller who may read the message; those of channels it may read. */
  inTrace(caller: Caller, traceId: string): Promise<MessageRecord[]> {
    return this.reading.inTrace(caller, traceId);
  }

  dependents(caller: Caller, messageId: string): Promise<MessageRecord[]> {
    return this.reading.dependents(caller, messageId);
  }

  reportProgress(caller: Caller, messageId: string, input: ProgressInput): Promise<MessageRecord> {
    return this.progressing.report(caller, messageId, input);
  }

  openMessageWatch(caller: Caller, messageId: string, since: string | undefined, signal?: AbortSignal): Promise<OpenedMessageWatch> {
    return this.progressing.openWatch(caller, messageId, since, signal);
  }

  ack(caller: Caller, messageId: string, actorRef: string | undefined, extras: AckExtras = {}): Promise<{ status: AckStatus; message: MessageRecord }> {
    return this.acks.ack(caller, messageId, actorRef, extras);
  }

  ackBatch(caller: Caller, messageIds: readonly string[], actorRef: string | undefined, extras: AckExtras = {}): Promise<Array<BatchItemResult<AckStatus>>> {
    return this.acks.ackBatch(caller, messageIds, actorRef, extras);
  }

  receive(caller: Caller, identifier: string, input: ReceiveInput): Promise<ReceivedLease[]> {
    return this.receiving.receive(caller, identifier, input);
  }

  claimNext(caller: Caller, identifier: string, actorRef: string | undefined, metadata?: { [key: string]: JsonValue }): Promise<MessageRecord | null> {
    return this.receiving.claimNext(caller, identifier, actorRef, metadata);
  }

  completeAndReceive(
    caller: Caller,
    identifier: string,
    input: ReceiveInput,
    complete: readonly CompletedTask[],
  ): Promise<{ completed: Array<BatchItemResult<AckStatus>>; leases: ReceivedLease[] }> {
    return this.receiving.completeAndReceive(caller, identifier, input, complete);
  }

  redrive(caller: Caller, identifier: string, maxMessages: number | undefined): Promise<RedriveOutcome> {
    return this.deadLetters.redrive(caller, identifier, maxMessages);
  }
}
