/**
 * call(): request/response over a work queue. Posts a task to a claimable
 * channel and waits for a worker to acknowledge it, returning the ack's
 * `result`. The wait is a series of long-polling GetMessage calls, so no reply
 * channel and no polling loop of the caller's own.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import type { AgentbusClient } from "./client.js";

export interface TaskCallOptions {
  /** How long to wait for the acknowledgement, from the post on. Default 60. */
  timeoutSeconds?: number;
  /** Posted as one of the caller's actors (id or alias); default the key's own actor. */
  actor?: string;
  /** Stored on the task message. */
  metadata?: JsonObject;
  /** The task's group (1..128 characters): a channel's group_concurrency and fair dispatch work by it. */
  groupKey?: string;
  /** 1 (most urgent) to 5; default 3. Workers receive more urgent tasks first. */
  priority?: number;
  /** The task expires this many seconds after it is posted (1..the channel's ttl_seconds); default the channel's. */
  ttlSeconds?: number;
  /** Names of the channel owner's shared limits the task holds while in flight, besides the channel's. */
  limits?: string[];
  /** Aborting stops the wait (the call rejects with the signal's reason); the task stays posted. */
  signal?: AbortSignal;
}

export interface CallResult {
  /** The worker's result; undefined when it acknowledged without one. */
  result: string | undefined;
  /** The task as acknowledged, `acknowledgedBy` included. */
  message: Message;
}

/** No acknowledgement within `timeoutSeconds`. The task stays posted and may still be done: `messageId` lets you look again. */
export class CallTimeoutError extends Error {
  override readonly name = "CallTimeoutError";
  constructor(
    readonly messageId: string,
    readonly timeoutSeconds: number,
    /** The task as last read: not acknowledged. */
    readonly lastSeen: Message | undefined,
  ) {
    super(`No acknowledgement of message ${messageId} within ${timeoutSeconds} s`);
  }
}

/** The task stopped being live (it expired, or was retracted or dead-lettered) without an acknowledgement: no result will come. */
export class CallAbandonedError extends Error {
  override readonly name = "CallAbandonedError";
  constructor(
    /** The task as last read. */
    readonly task: Message,
  ) {
    super(`Message ${task.id} is no longer live and was not acknowledged`);
  }
}

const DEFAULT_TIMEOUT_SECONDS = 60;
/** Longer than the service's long-poll cap (25 s by default); it answers at its cap and we ask again. */
const MAX_WAIT_PER_POLL_SECONDS = 30;

/** Room for the long-poll plus the round trip, in whole ms: a fractional grpc-timeout is a protocol error. */
function deadlineMs(waitSeconds: number): number {
  return Math.ceil((waitSeconds + 30) * 1000);
}

export async function call(client: AgentbusClient, channel: string, task: string, options: TaskCallOptions = {}): Promise<CallResult> {
  const timeoutSeconds = options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  const deadline = Date.now() + timeoutSeconds * 1000;
  const { signal } = options;
  const posted = await client.messages.createMessage(
    {
      identifier: channel,
      content: task,
      actor: options.actor,
      metadata: options.metadata,
      groupKey: options.groupKey,
      priority: options.priority,
      ttlSeconds: options.ttlSeconds,
      limits: options.limits,
    },
    { signal },
  );
  const id = posted.message?.id;
  if (id === undefined) throw new Error("CreateMessage answered without the message");
  let lastSeen = posted.message;
  for (;;) {
    signal?.throwIfAborted();
    const remainingSeconds = (deadline - Date.now()) / 1000;
    if (remainingSeconds <= 0) throw new CallTimeoutError(id, timeoutSeconds, lastSeen);
    const wait = Math.min(remainingSeconds, MAX_WAIT_PER_POLL_SECONDS);
    const message = await client.messages.getMessage({ messageId: id, wait }, { signal, timeoutMs: deadlineMs(wait) });
    lastSeen = message;
    if (message.acknowledgedBy.length > 0) return { result: message.result, message };
    // GetMessage answers at once for a message that is no longer live: waiting again would spin.
    if (!message.active) throw new CallAbandonedError(message);
  }
}
