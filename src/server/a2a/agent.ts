/**
 * One published channel as an A2A agent, for one calling key
 * (docs/decisions.md#a2a). It implements the SDK's A2ARequestHandler on the
 * REST API, called with the caller's key, exactly as the MCP tools do: every
 * A2A call passes the checks a REST call of that key passes (membership,
 * scopes, rate limits, idempotency), so A2A adds no way around them.
 *
 * SendMessage posts the A2A message on the channel (its messageId is the
 * post's idempotency key, so a client's retry posts once); the task is the
 * message. Streaming follows the message's own event stream
 * (GET /v1/messages/{id}/events).
 */
import { parseSseStream, type AgentCard, type Message as A2aMessage, type StreamResponse, type Task } from "@a2a-js/sdk";
import {
  ExtendedAgentCardNotConfiguredError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import { A2A_ERROR_CODE, JsonRpcRequestMalformedError, JsonRpcTransportError } from "@a2a-js/sdk/errors";
import type {
  A2ARequestHandler,
  ServerCallContext,
} from "@a2a-js/sdk/server";
import type {
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  SendMessageRequest,
  SubscribeToTaskRequest,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../../model/json.js";
import { ApiCallError, type AgentbusApi } from "../mcp/api.js";
import type { A2aPush } from "../../domain/a2a-push.js";
import type { Caller } from "../../model/caller.js";
import { ApiError } from "../../model/errors.js";
import type { PushConfig } from "../../ports/a2a-push.js";
import { contextOf, isFinal, resultArtifact, taskState, taskStatus, toPost, toTask, type MessageJson } from "../../protocol/a2a-tasks.js";

/** How long a SendMessage that did not ask to return at once waits for the task to finish: one long-poll (the service's cap). */
const BLOCKING_WAIT_SECONDS = 25;
/** Channel messages read per ListTasks call at most, looking for the caller's tasks. */
const LIST_SCAN_PAGES = 10;
const LIST_PAGE = 100;

export interface ChannelAgentOptions {
  channelId: string;
  card: AgentCard;
  /** The REST API with the caller's key. */
  api: AgentbusApi;
  caller: Caller;
  /** Push-notification configs, per key. */
  push: A2aPush;
  /** Ends with the HTTP request: a long-poll or a stream for a client that left stops. */
  signal: AbortSignal;
}

export class ChannelAgent implements A2ARequestHandler {
  constructor(private readonly o: ChannelAgentOptions) {}

  async getAgentCard(): Promise<AgentCard> {
    return this.o.card;
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new ExtendedAgentCardNotConfiguredError();
  }

  async sendMessage(params: SendMessageRequest, _context: ServerCallContext): Promise<Task> {
    const posted = await this.post(params);
    const push = params.configuration?.taskPushNotificationConfig;
    if (push !== undefined) await this.setPush(posted.id, push);
    if (params.configuration?.returnImmediately === true) return toTask(posted, params.configuration.historyLength);
    // Blocking: one long-poll for the result; a task still running is answered as it stands (follow it with GetTask or SubscribeToTask).
    const now = await this.read(posted.id, BLOCKING_WAIT_SECONDS);
    return toTask(now, params.configuration?.historyLength);
  }

  async *sendMessageStream(params: SendMessageRequest, _context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const posted = await this.post(params);
    // The watch opens before the task is answered: nothing that happens after the client has the task is missed.
    const watch = await this.watch(posted);
    yield { payload: { $case: "task", value: toTask(posted, params.configuration?.historyLength) } };
    yield* this.follow(posted, watch);
  }

  async getTask(params: GetTaskRequest, _context: ServerCallContext): Promise<Task> {
    return toTask(await this.read(params.id), params.historyLength);
  }

  async cancelTask(params: CancelTaskRequest, _context: ServerCallContext): Promise<Task> {
    await this.read(params.id);
    const reason = typeof params.metadata?.reason === "string" ? params.metadata.reason : undefined;
    try {
      const answer = await this.o.api.call(MessageService.method.cancelMessage, { message_id: params.id, ...(reason === undefined ? {} : { reason }) }, { signal: this.o.signal });
      return toTask(answer.message as MessageJson);
    } catch (err) {
      if (err instanceof ApiCallError && (err.body.error === "already_finished" || err.status === 403)) {
        throw new TaskNotCancelableError(err.status === 403 ? "Only the task's sender or the channel's owner may cancel it" : "The task has already finished and cannot be cancelled");
      }
      throw a2aError(err);
    }
  }

  async *resubscribe(params: SubscribeToTaskRequest, _context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const message = await this.read(params.id);
    if (isFinal(taskState(message.state))) {
      throw new UnsupportedOperationError("The task has finished: read it with GetTask");
    }
    const watch = await this.watch(message);
    yield { payload: { $case: "task", value: toTask(message) } };
    yield* this.follow(message, watch);
  }

  /**
   * The caller's tasks on this channel, oldest first. The page token is a
   * channel cursor: each message read moves it past that message, so pages
   * never skip or repeat a task. A call reads at most LIST_SCAN_PAGES pages
   * of the channel, so on a busy channel a page may hold fewer tasks than
   * asked with a token to go on from.
   */
  async listTasks(params: ListTasksRequest, _context: ServerCallContext): Promise<ListTasksResponse> {
    const pageSize = Math.min(Math.max(params.pageSize ?? 50, 1), 100);
    const tasks: Task[] = [];
    let since = params.pageToken === "" ? "0" : params.pageToken;
    let exhausted = false;
    scan: for (let page = 0; page < LIST_SCAN_PAGES; page++) {
      const answer = await this.call(() => this.o.api.call(MessageService.method.listMessages, { identifier: this.o.channelId, since, limit: LIST_PAGE }, { signal: this.o.signal }));
      const data = (answer.data ?? []) as unknown as MessageJson[];
      for (const message of data) {
        since = message.created_at ?? since;
        if (message.author_key_id !== this.o.caller.keyId) continue;
        if (params.contextId !== "" && contextOf(message) !== params.contextId) continue;
        if (params.status !== 0 && taskState(message.state) !== params.status) continue;
        tasks.push(toTask(message, params.historyLength ?? 0));
        if (tasks.length === pageSize) break scan;
      }
      if (data.length < LIST_PAGE) {
        exhausted = true;
        break;
      }
    }
    if (params.includeArtifacts !== true) for (const task of tasks) task.artifacts = [];
    return { tasks, nextPageToken: exhausted ? "" : since, pageSize, totalSize: tasks.length };
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig, _context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    return this.setPush(params.taskId, params);
  }

  async getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest, _context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const found = await this.pushCall(() => this.o.push.get(this.o.caller, this.o.channelId, params.taskId, params.id));
    if (found === undefined) throw new TaskNotFoundError(`No push-notification config ${params.id} of yours for task ${params.taskId}`);
    return toA2aConfig(found);
  }

  async listTaskPushNotificationConfigs(params: ListTaskPushNotificationConfigsRequest, _context: ServerCallContext): Promise<ListTaskPushNotificationConfigsResponse> {
    const configs = await this.pushCall(() => this.o.push.list(this.o.caller, this.o.channelId, params.taskId));
    return { configs: configs.map(toA2aConfig), nextPageToken: "" };
  }

  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest, _context: ServerCallContext): Promise<void> {
    const deleted = await this.pushCall(() => this.o.push.delete(this.o.caller, this.o.channelId, params.taskId, params.id));
    if (!deleted) throw new TaskNotFoundError(`No push-notification config ${params.id} of yours for task ${params.taskId}`);
  }

  private setPush(taskId: string, config: Pick<TaskPushNotificationConfig, "id" | "url" | "token" | "authentication">): Promise<TaskPushNotificationConfig> {
    return this.pushCall(async () =>
      toA2aConfig(
        await this.o.push.set(this.o.caller, this.o.channelId, {
          taskId,
          id: config.id,
          url: config.url,
          token: config.token,
          authScheme: config.authentication?.scheme ?? "",
          authCredentials: config.authentication?.credentials ?? "",
        }),
      ),
    );
  }

  /** A push-config use case; its refusals as A2A errors (a task the caller cannot read: TaskNotFound). */
  private async pushCall<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (err instanceof ApiError && (err.code === "message_not_found" || err.status === 403)) throw new TaskNotFoundError("No such task on this agent");
      throw a2aError(err instanceof ApiError ? ApiCallError.of(err) : err);
    }
  }

  // -------------------------------------------------------------------------

  private async post(params: SendMessageRequest): Promise<MessageJson> {
    const message: A2aMessage | undefined = params.message;
    if (message === undefined || message.parts.length === 0) throw invalidParams("The request needs a message with at least one part");
    if (message.taskId !== "") {
      throw new UnsupportedOperationError("A task takes no further messages here: send a new message (the same contextId keeps the conversation together)");
    }
    const contextId = message.contextId !== "" ? message.contextId : message.messageId;
    const post = toPost(message, contextId, params.metadata as JsonObject | undefined);
    // The A2A messageId is the client's name for this send: its retry is stored once.
    const answer = await this.call(() =>
      this.o.api.call(MessageService.method.createMessage, { identifier: this.o.channelId, ...post }, { signal: this.o.signal, idempotencyKey: message.messageId === "" ? undefined : `a2a:${message.messageId}` }),
    );
    return answer.message as unknown as MessageJson;
  }

  /** The task's message, if it is one of this channel's the caller may read; else TaskNotFound. `wait`: long-poll for its result. */
  private async read(id: string, wait?: number): Promise<MessageJson> {
    let message: MessageJson;
    try {
      message = (await this.o.api.call(MessageService.method.getMessage, { message_id: id, ...(wait === undefined ? {} : { wait }) }, { signal: this.o.signal, waitSeconds: wait })) as unknown as MessageJson;
    } catch (err) {
      if (err instanceof ApiCallError && (err.status === 404 || err.status === 403 || err.status === 422)) throw new TaskNotFoundError(`No task ${id} on this agent`);
      throw a2aError(err);
    }
    if (message.channel_id !== this.o.channelId) throw new TaskNotFoundError(`No task ${id} on this agent`);
    return message;
  }

  private async call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw a2aError(err);
    }
  }

  /** Opens the message's own event stream (GET /v1/messages/{id}/events); `stop` ends it. */
  private async watch(message: MessageJson): Promise<{ res: Response; stop: AbortController }> {
    const stop = new AbortController();
    try {
      return { res: await this.o.api.open(MessageService.method.watchMessage, { message_id: message.id }, AbortSignal.any([this.o.signal, stop.signal])), stop };
    } catch (err) {
      throw a2aError(err);
    }
  }

  /** The task's changes from its event stream, as A2A events, until it is final or the client leaves. */
  private async *follow(start: MessageJson, { res, stop }: { res: Response; stop: AbortController }): AsyncGenerator<StreamResponse, void, undefined> {
    let lastState = taskState(start.state);
    let lastStatusAt = taskStatus(start).timestamp;
    let artifactSent = false;
    try {
      if (isFinal(lastState)) return;
      for await (const event of parseSseStream(res)) {
        if (event.type === "open" || event.data === "") continue;
        const message = JSON.parse(event.data) as MessageJson;
        const status = taskStatus(message);
        // The result comes with the state change that acknowledges it (its own event follows): the artifact goes first, once.
        const artifact = artifactSent ? undefined : resultArtifact(message);
        if (artifact !== undefined) {
          artifactSent = true;
          yield { payload: { $case: "artifactUpdate", value: { taskId: message.id, contextId: contextOf(message), artifact, append: false, lastChunk: true, metadata: undefined } } };
        }
        // A state change, or news (progress) in the same state.
        if (status.state !== lastState || (event.type === "progress" && status.timestamp !== lastStatusAt)) {
          lastState = status.state;
          lastStatusAt = status.timestamp;
          yield { payload: { $case: "statusUpdate", value: { taskId: message.id, contextId: contextOf(message), status, metadata: undefined } } };
        }
        if (isFinal(status.state)) return;
      }
    } finally {
      stop.abort();
    }
  }
}

const invalidParams = (message: string) => new JsonRpcTransportError({ jsonrpc: "2.0", id: null, error: { code: A2A_ERROR_CODE.INVALID_PARAMS, message } });

/**
 * A refusal of the REST API as a JSON-RPC error: the status's JSON-RPC code
 * (a request the API found invalid: invalid params; any other refusal:
 * invalid request), the catalog's message, and its code, suggestion and
 * retry_after in the error's ErrorInfo metadata, so an A2A client sees
 * exactly what a REST client would.
 */
function a2aError(err: unknown): unknown {
  if (!(err instanceof ApiCallError)) return err;
  const { error, message, suggestion } = err.body;
  if (err.status >= 500) return new JsonRpcTransportError({ jsonrpc: "2.0", id: null, error: { code: A2A_ERROR_CODE.INTERNAL_ERROR, message } });
  const metadata: Record<string, string> = { error, http_status: String(err.status) };
  if (suggestion !== undefined) metadata.suggestion = suggestion;
  if (typeof err.body.retry_after === "number") metadata.retry_after = String(err.body.retry_after);
  const envelopeCode = err.status === 400 || err.status === 413 || err.status === 422 ? A2A_ERROR_CODE.INVALID_PARAMS : A2A_ERROR_CODE.INVALID_REQUEST;
  return new JsonRpcRequestMalformedError({ envelopeCode, message, metadata });
}

/** A stored config as A2A shows it; the credentials are never shown back. */
const toA2aConfig = (c: PushConfig): TaskPushNotificationConfig => ({
  tenant: "",
  id: c.id,
  taskId: c.taskId,
  url: c.url,
  token: c.token ?? "",
  authentication: c.authScheme === null ? undefined : { scheme: c.authScheme, credentials: "" },
});
