/**
 * The reference's convenience verbs (docs/decisions.md#compat-verbs), each a
 * short composition of the native use cases: every rule (names, access,
 * claims, schemas, quotas, limits) is the native operation's own, so there
 * is no second code path to keep in step.
 */
import type { Caller } from "../model/caller.js";
import type { ChannelResource } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import type { MessageRecord } from "../model/messages.js";
import { channelInput, type Channels } from "./channels.js";
import type { InvitationView, Membership } from "./membership.js";
import type { Messages, Page } from "./messages.js";
import { assertMessageId } from "./message-rules.js";

export interface TaskDraft {
  content: string | undefined;
  actorLabel: string | undefined;
  metadata: { [key: string]: JsonValue } | undefined;
}

/** The reference's default page for subscribe. */
export const SUBSCRIBE_DEFAULT_LIMIT = 50;

export const NOTHING_TO_CLAIM = "no unclaimed messages available";

/** The alias of a task's result channel: the reference's name for it, global like every alias. */
export const resultChannelAlias = (taskId: string): string => `result-of-${taskId}`;


const requireChannel = (channel: string | undefined): string => {
  if (channel === undefined || channel === "") throw new ApiError("missing_field", "'channel' is required: the id, alias or name of the channel", { details: { field: "channel" } });
  return channel;
};

export class TaskVerbs {
  constructor(
    private readonly channels: Channels,
    private readonly messages: Messages,
    private readonly membership: Membership,
  ) {}

  /** POST /v1/tasks/post: on the channel `channel` names, or on a new claimable channel of that name when it names none. */
  async post(caller: Caller, channel: string | undefined, draft: TaskDraft): Promise<{ message: MessageRecord; channelId: string; nextCursor: string }> {
    const identifier = requireChannel(channel);
    try {
      const posted = await this.messages.create(caller, identifier, this.input(draft));
      return { ...posted, channelId: posted.message.channelId };
    } catch (err) {
      if (!(err instanceof ApiError && err.code === "channel_not_found")) throw err;
    }
    const created = await this.channels.create(caller, channelInput({ name: identifier, mode: "claimable" }));
    const posted = await this.postOrDelete(caller, created, draft);
    return { ...posted, channelId: created.id };
  }

  /** POST /v1/tasks/broadcast: on an existing channel only. */
  broadcast(caller: Caller, channel: string | undefined, draft: TaskDraft): Promise<{ message: MessageRecord; nextCursor: string }> {
    return this.messages.create(caller, requireChannel(channel), this.input(draft));
  }

  /**
   * POST /v1/tasks/claim: a plain claim (as the reference's) on the open
   * message a receive would hand out next: the oldest of the most urgent,
   * by the channel's dispatch rule, group bounds and limits
   * (docs/decisions.md#dispatch); null when none is left.
   */
  async claimNext(caller: Caller, channel: string | undefined, actor: string | undefined, metadata: { [key: string]: JsonValue } | undefined): Promise<MessageRecord | null> {
    return this.messages.claimNext(caller, requireChannel(channel), actor, metadata);
  }

  /** POST /v1/tasks/subscribe: the list route's page, 50 by default. */
  subscribe(caller: Caller, channel: string | undefined, query: { since: string | undefined; limit: number | undefined; wait: number | undefined; signal: AbortSignal }): Promise<Page> {
    return this.messages.list(caller, requireChannel(channel), {
      since: query.since,
      cursor: undefined,
      limit: query.limit ?? SUBSCRIBE_DEFAULT_LIMIT,
      status: "all",
      wait: query.wait,
      signal: query.signal,
    });
  }

  /** POST /v1/tasks/claim-and-ack: claim (or find it already the caller's), then acknowledge. */
  async claimAndAck(caller: Caller, messageId: string, actor: string | undefined, metadata: { [key: string]: JsonValue } | undefined): Promise<MessageRecord> {
    assertMessageId(messageId);
    await this.messages.claim(caller, messageId, actor, metadata);
    return (await this.messages.ack(caller, messageId, actor, { metadata })).message;
  }

  /** POST /v1/tasks/create-claimable-session: a restricted claimable channel and an invitation to it. */
  async createClaimableSession(caller: Caller, name: string | undefined, description: string | undefined): Promise<{ channel: ChannelResource; invitation: InvitationView }> {
    const channel = await this.channels.create(caller, channelInput({ name: name ?? "session", description, mode: "claimable", access: "restricted" }));
    try {
      return { channel, invitation: await this.membership.createInvitation(caller, channel.id) };
    } catch (err) {
      await this.channels.delete(caller, channel.id).catch(() => undefined);
      throw err;
    }
  }

  /**
   * POST /v1/tasks/post-with-result: a new claimable channel named `channel`,
   * the task on it, and a broadcast result channel (related to it) holding
   * the alias result-of-<task id>. A step that fails takes back the channels
   * made before it, so a refused call leaves nothing behind.
   */
  async postWithResult(caller: Caller, channel: string | undefined, draft: TaskDraft): Promise<{ message: MessageRecord; channelId: string; resultChannel: string }> {
    const name = requireChannel(channel);
    const work = await this.channels.create(caller, channelInput({ name, mode: "claimable" }));
    const { message } = await this.postOrDelete(caller, work, draft);
    const alias = resultChannelAlias(message.id);
    let results: ChannelResource | undefined;
    try {
      results = await this.channels.create(caller, channelInput({ name: alias, mode: "broadcast", access: work.access, relatedChannels: [work.id] }));
      await this.channels.addAlias(caller, results.id, alias);
    } catch (err) {
      if (results) await this.channels.delete(caller, results.id).catch(() => undefined);
      await this.channels.delete(caller, work.id).catch(() => undefined);
      throw err;
    }
    return { message, channelId: work.id, resultChannel: alias };
  }

  /**
   * POST /v1/tasks/{id}/result: the result posted on the task's result
   * channel (metadata gains task_id); the task itself is then acknowledged
   * with the result as its native `result` when the caller may acknowledge
   * it (it holds the claim, or nobody does), so native readers see it too.
   */
  async postResult(caller: Caller, taskId: string, draft: TaskDraft): Promise<{ resultChannel: string; message: MessageRecord }> {
    assertMessageId(taskId);
    const alias = resultChannelAlias(taskId);
    const { message } = await this.messages.create(caller, alias, this.input({ ...draft, metadata: { ...draft.metadata, task_id: taskId } })).catch((err: unknown) => {
      throw noResultChannel(err, taskId);
    });
    await this.messages.ack(caller, taskId, undefined, { result: message.content }).catch((err: unknown) => {
      // Someone else holds it, or it is already finished: the result channel has the answer all the same.
      if (!(err instanceof ApiError)) throw err;
    });
    return { resultChannel: alias, message };
  }

  /** GET /v1/tasks/{id}/result: the result channel's first message, or 404 result_not_ready. */
  async getResult(caller: Caller, taskId: string): Promise<MessageRecord> {
    assertMessageId(taskId);
    const page = await this.messages
      .list(caller, resultChannelAlias(taskId), { since: undefined, cursor: undefined, limit: 1, status: "all" })
      .catch((err: unknown) => {
        throw noResultChannel(err, taskId);
      });
    const first = page.data[0];
    if (!first) throw new ApiError("result_not_ready", `Task ${taskId} has no result yet`, { details: { task_id: taskId } });
    return first;
  }

  private input(draft: TaskDraft) {
    return { content: draft.content, actor: undefined, actorLabel: draft.actorLabel, metadata: draft.metadata, mentions: [] };
  }

  private async postOrDelete(caller: Caller, channel: ChannelResource, draft: TaskDraft): Promise<{ message: MessageRecord; nextCursor: string }> {
    try {
      return await this.messages.create(caller, channel.id, this.input(draft));
    } catch (err) {
      await this.channels.delete(caller, channel.id).catch(() => undefined);
      throw err;
    }
  }
}

/** A task with no result channel (not posted with post-with-result, or not visible to the caller) is 404 result_not_ready's sibling: the channel's 404, said for the task. */
function noResultChannel(err: unknown, taskId: string): unknown {
  if (!(err instanceof ApiError && err.code === "channel_not_found")) return err;
  return new ApiError("channel_not_found", `Task ${taskId} has no result channel you can use (result channels come with POST /v1/tasks/post-with-result)`, {
    details: { task_id: taskId, result_channel: resultChannelAlias(taskId) },
  });
}
