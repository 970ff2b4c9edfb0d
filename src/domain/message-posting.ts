/**
 * Posting messages, one or a batch: size limits, the channel's metadata
 * schema, mentions, delays; pause, throttle and the ring buffer are the
 * store's write function's (docs/decisions.md#channels-and-messages).
 */
import type { Caller } from "../model/caller.js";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import type { JsonValue } from "../model/json.js";
import type { BatchParents, MessageRecord, NewMessage } from "../model/messages.js";
import { formatTimestamp } from "../model/time.js";
import { newTrace, type TraceContext } from "../model/trace.js";
import { violationsOffThread } from "./json-schema-thread.js";
import { limitIdsNamed, validateGroupKey, validateLimitNames, validateMessageTtl, validatePriority } from "./dispatch-rules.js";
import type { MessageContext } from "./message-context.js";
import { atIndex, atIndexAsync, byteLength, checkBatchSize, checkDelaySeconds, checkMetadataSize, refusal, withIndex } from "./message-rules.js";

export interface NewMessageInput {
  content: string | undefined;
  actor: string | undefined;
  actorLabel: string | undefined;
  metadata: { [key: string]: JsonValue } | undefined;
  mentions: readonly string[];
  /** Seconds before the message is open work (docs/decisions.md#delays); 0..the channel's TTL. */
  delaySeconds?: number | undefined;
  /** The message's group, 1..128 characters (docs/decisions.md#message-groups). */
  groupKey?: string | undefined;
  /** 1 (most urgent)..5, default 3 (docs/decisions.md#priorities). */
  priority?: number | undefined;
  /** 1..the channel's TTL: the message expires this much after it is posted. */
  ttlSeconds?: number | undefined;
  /** Names of the channel owner's shared limits the message also holds (docs/decisions.md#shared-limits). */
  limits?: readonly string[] | undefined;
  /** Ids of the messages it waits for, at most 100 (docs/decisions.md#dependencies); in a batch, also earlier items' refs. */
  dependsOn?: readonly string[] | undefined;
  /** In a batch: this item's name, for a later item's dependsOn. */
  ref?: string | undefined;
  /** The poster's trace context (docs/decisions.md#trace-context); absent: the message starts a new trace. */
  trace?: TraceContext | undefined;
}

/** A message body that passed the checks needing no channel. */
interface CheckedBody {
  content: string;
  metadata: { [key: string]: JsonValue };
}

export class MessagePosting {
  constructor(private readonly ctx: MessageContext) {}

  async create(caller: Caller, identifier: string, input: NewMessageInput): Promise<{ message: MessageRecord; nextCursor: string }> {
    // The body is judged before the channel is looked up: a bad request is a
    // bad request whichever channel it names.
    const body = this.checkBody(input);
    const channel = await this.ctx.usableChannel(caller, identifier);
    const parents = checkDependsOn(input.dependsOn);
    const draft = await this.prepare(caller, channel, input, body, input.trace ?? newTrace());
    await this.ctx.options.quotas?.admitMessages(caller, 1, storedBytes(draft));
    const result =
      parents.length === 0 ? await this.ctx.store.create(draft) : await this.ctx.store.createWithParents(draft, parents, channel.createdByKeyId, this.ctx.clock.now());
    if (result.outcome === "unknown_parent" || result.outcome === "foreign_parent") throw parentRefusal(result.outcome);
    if (result.outcome !== "created") throw refusal(result, channel);
    // The channel's receives now check limits: a cached view must not say otherwise.
    if ((draft.limitIds?.length ?? 0) > 0 && !channel.limitedMessages) this.ctx.options.views?.clear();
    this.ctx.announce(channel.id);
    return { message: result.message, nextCursor: formatTimestamp(result.message.createdAt) };
  }

  /**
   * Posts a batch: every item is judged as create() judges one message, and
   * an item's error carries its `index`. All are stored, in order, or none:
   * the store rolls the batch back when the channel refuses any item (pause,
   * write limit). Long-polls are woken once, for the whole batch.
   */
  async createBatch(caller: Caller, identifier: string, inputs: readonly NewMessageInput[]): Promise<{ messages: MessageRecord[]; nextCursor: string }> {
    checkBatchSize("messages", inputs.length);
    const bodies = inputs.map((input, index) => atIndex(index, () => this.checkBody(input)));
    const channel = await this.ctx.usableChannel(caller, identifier);
    const drafts: NewMessage[] = [];
    // A batch posted without a trace is one new trace: one poster's one act.
    const started = newTrace();
    for (const [index, input] of inputs.entries()) {
      drafts.push(await atIndexAsync(index, () => this.prepare(caller, channel, input, bodies[index]!, input.trace ?? started)));
    }
    const parents = batchParents(inputs);
    await this.ctx.options.quotas?.admitMessages(caller, drafts.length, drafts.reduce((sum, d) => sum + storedBytes(d), 0));
    const result = await this.ctx.store.createAll(channel.id, drafts, parents, channel.createdByKeyId, this.ctx.clock.now());
    if (result.outcome === "unknown_parent" || result.outcome === "foreign_parent") throw withIndex(result.index, parentRefusal(result.outcome));
    if (result.outcome !== "created") throw withIndex(result.index, refusal(result, channel));
    if (drafts.some((d) => (d.limitIds?.length ?? 0) > 0) && !channel.limitedMessages) this.ctx.options.views?.clear();
    this.ctx.announce(channel.id);
    const last = result.messages[result.messages.length - 1]!;
    return { messages: result.messages, nextCursor: formatTimestamp(last.createdAt) };
  }

  /** The checks of a message body that need no channel. */
  private checkBody(input: NewMessageInput): CheckedBody {
    const content = input.content;
    if (content === undefined) throw new ApiError("missing_field", "'content' is required", { details: { field: "content" } });
    if (content.trim() === "") throw new ApiError("invalid_string", "'content' must contain a non-whitespace character", { details: { field: "content" } });
    const contentBytes = byteLength(content);
    const maxContentBytes = this.ctx.options.maxContentBytes;
    if (contentBytes > maxContentBytes) {
      throw new ApiError("content_too_large", `'content' is ${contentBytes} bytes; the limit is ${maxContentBytes}`, {
        details: { max_content_bytes: maxContentBytes, received_bytes: contentBytes },
      });
    }
    const metadata = input.metadata ?? {};
    checkMetadataSize(metadata);
    if (input.mentions.some((m) => m.trim() === "")) {
      throw new ApiError("invalid_mentions", "'mentions' entries must be non-empty actor ids or aliases", { details: { field: "mentions" } });
    }
    return { content, metadata };
  }

  /** The checks against the channel (metadata schema), then the message to store with its actor and mentions resolved. */
  private async prepare(caller: Caller, channel: ChannelView, input: NewMessageInput, { content, metadata }: CheckedBody, trace: TraceContext): Promise<NewMessage> {
    const problems = await violationsOffThread(caller.keyId, channel.metadataSchema, metadata);
    if (problems.length > 0) {
      throw new ApiError("metadata_validation_failed", `'metadata' does not match the channel's metadata_schema (${problems.length} problem(s))`, {
        details: { violations: problems.map((p) => ({ field: p.field, issue: p.issue })) },
      });
    }
    const delaySeconds = checkDelaySeconds(input.delaySeconds, channel.ttlSeconds);
    const groupKey = validateGroupKey(input.groupKey);
    const priority = validatePriority(input.priority);
    const ttlSeconds = input.ttlSeconds === undefined ? undefined : validateMessageTtl(input.ttlSeconds, channel.ttlSeconds);
    const limitNames = validateLimitNames(input.limits);
    // A poster names its channel's owner's limits, not its own.
    const limitIds = await limitIdsNamed(limitNames, (names) => this.ctx.channels.limitIds(channel.createdByKeyId, names));
    const actor = input.actor === undefined ? null : await this.ctx.actors.resolveOwn(caller, input.actor);
    const mentions = input.mentions.length === 0 ? [] : await this.ctx.actors.resolveMentions(input.mentions, channel);
    return {
      delaySeconds,
      groupKey,
      priority,
      ...(ttlSeconds === undefined ? {} : { ttlSeconds }),
      limitIds,
      limitNames,
      channelId: channel.id,
      authorKeyId: caller.keyId,
      authorLabel: caller.agentLabel,
      actor,
      actorLabel: input.actorLabel ?? null,
      content,
      metadata,
      mentions,
      trace,
    };
  }
}

/** What a message counts against its author's stored-bytes quota: its content and metadata (docs/decisions.md#quotas). */
const storedBytes = (draft: NewMessage): number => byteLength(draft.content) + byteLength(JSON.stringify(draft.metadata));

/** A post whose parents are unknown (422) or of a channel another key owns (403). */
function parentRefusal(outcome: "unknown_parent" | "foreign_parent"): ApiError {
  if (outcome === "unknown_parent") return new ApiError("invalid_depends_on", "'depends_on' names a message that does not exist");
  return new ApiError("forbidden", "'depends_on' names a message of a channel another key owns", {
    suggestion: "A message may depend only on messages of channels its own channel's owner owns.",
  });
}

/** At most this many parents per message (docs/decisions.md#dependencies). */
export const MAX_DEPENDS_ON = 100;

/** depends_on: distinct message ids, at most MAX_DEPENDS_ON (422 invalid_depends_on). */
function checkDependsOn(ids: readonly string[] | undefined): string[] {
  if (ids === undefined || ids.length === 0) return [];
  if (ids.length > MAX_DEPENDS_ON) {
    throw new ApiError("invalid_depends_on", `'depends_on' names ${ids.length} messages; at most ${MAX_DEPENDS_ON}`, { details: { max: MAX_DEPENDS_ON } });
  }
  const distinct = [...new Set(ids.map((id) => id.toLowerCase()))];
  if (distinct.some((id) => !isUuid(id))) throw new ApiError("invalid_depends_on", "'depends_on' holds message ids (UUIDs)");
  return distinct;
}

/**
 * A batch's dependencies (docs/decisions.md#dependencies): per item, the ids
 * it names and the earlier items it names by ref. A ref is unique in the
 * batch (1..128 characters); naming a ref not given before, or the item's
 * own, is 422 invalid_depends_on at that item: so a batch cannot form a cycle.
 */
function batchParents(inputs: readonly NewMessageInput[]): BatchParents[] {
  const refs = new Map<string, number>();
  return inputs.map((input, index) =>
    atIndex(index, () => {
      const ids: string[] = [];
      const earlier: number[] = [];
      for (const name of input.dependsOn ?? []) {
        const at = refs.get(name);
        if (at !== undefined) earlier.push(at);
        else ids.push(name);
      }
      if (ids.length + earlier.length > MAX_DEPENDS_ON) {
        throw new ApiError("invalid_depends_on", `'depends_on' names ${ids.length + earlier.length} messages; at most ${MAX_DEPENDS_ON}`, { details: { max: MAX_DEPENDS_ON } });
      }
      if (ids.some((id) => !isUuid(id))) throw new ApiError("invalid_depends_on", "'depends_on' holds message ids, or refs of earlier items of the batch");
      if (input.ref !== undefined) {
        if (input.ref.length < 1 || input.ref.length > 128) throw new ApiError("invalid_depends_on", "'ref' is 1 to 128 characters");
        if (refs.has(input.ref)) throw new ApiError("invalid_depends_on", `'ref' ${JSON.stringify(input.ref)} is used by an earlier item of the batch`);
        refs.set(input.ref, index);
      }
      return { ids: [...new Set(ids.map((id) => id.toLowerCase()))], earlier: [...new Set(earlier)] };
    }),
  );
}
