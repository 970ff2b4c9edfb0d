/**
 * A channel message as an A2A task (docs/decisions.md#a2a): the task's id is
 * the message's id, its state follows the message's, its history is the
 * message that was sent, and its artifact is the result a worker
 * acknowledged it with. The A2A message's text parts are the message's
 * content; its other parts, its ids and its metadata travel in the
 * message's metadata under `a2a`, so a worker that knows nothing of A2A
 * reads the text and one that does finds the rest.
 */
import { Part, Role, StreamResponse, TaskState, type Artifact, type Message as A2aMessage, type Task, type TaskStatus } from "@a2a-js/sdk";
import { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import type { ArchiveReason, MessageRecord } from "../model/messages.js";
import type { Micros } from "../model/time.js";
import { renderMessageJson } from "./json-render-text.js";
import { renderMessage } from "./render-message.js";
import type { JsonObject, JsonValue } from "../model/json.js";

/** The REST JSON of a Message, as far as a task needs it. */
export interface MessageJson {
  id: string;
  channel_id: string;
  content: string;
  metadata?: JsonObject;
  state?: string;
  result?: string | null;
  created_at?: string;
  author_key_id?: string;
  cancel_requested?: boolean;
  cancel_reason?: string;
  progress?: { data?: JsonObject; text?: string; updated_at?: string };
  [field: string]: JsonValue | undefined;
}

/** What the message's metadata holds under `a2a`. */
interface StoredA2a {
  context_id?: string;
  message_id?: string;
  parts?: JsonValue[];
  metadata?: JsonObject;
}

const objectOf = (value: JsonValue | undefined): JsonObject | undefined =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? value : undefined;

export function storedA2a(message: MessageJson): StoredA2a {
  const a2a = objectOf(message.metadata?.a2a);
  if (a2a === undefined) return {};
  return {
    context_id: typeof a2a.context_id === "string" ? a2a.context_id : undefined,
    message_id: typeof a2a.message_id === "string" ? a2a.message_id : undefined,
    parts: Array.isArray(a2a.parts) ? a2a.parts : undefined,
    metadata: objectOf(a2a.metadata),
  };
}

/** A message posted without A2A is its own context. */
export const contextOf = (message: MessageJson): string => storedA2a(message).context_id ?? message.id;

/** An A2A message → the channel message to post: {content, metadata}. */
export function toPost(message: A2aMessage, contextId: string, requestMetadata: JsonObject | undefined): { content: string; metadata: JsonObject } {
  const texts: string[] = [];
  const others: JsonValue[] = [];
  for (const part of message.parts) {
    if (part.content?.$case === "text") texts.push(part.content.value);
    else others.push(Part.toJSON(part) as JsonValue);
  }
  const a2a: JsonObject = { context_id: contextId, message_id: message.messageId };
  if (others.length > 0) a2a.parts = others;
  if (message.metadata !== undefined && Object.keys(message.metadata).length > 0) a2a.metadata = message.metadata as JsonObject;
  if (requestMetadata !== undefined && Object.keys(requestMetadata).length > 0) a2a.request_metadata = requestMetadata;
  // A message of files or data only still has a readable content.
  const content = texts.length > 0 ? texts.join("\n") : `(A2A message: ${others.length} part${others.length === 1 ? "" : "s"}, in metadata.a2a.parts)`;
  return { content, metadata: { a2a } };
}

/** The message that was sent, as the task's history holds it. */
function sentMessage(message: MessageJson): A2aMessage {
  const stored = storedA2a(message);
  const parts: Part[] = [];
  if (!/^\(A2A message: \d+ parts?, in metadata\.a2a\.parts\)$/.test(message.content)) parts.push(textPart(message.content));
  for (const part of stored.parts ?? []) parts.push(Part.fromJSON(part));
  return {
    messageId: stored.message_id ?? message.id,
    contextId: contextOf(message),
    taskId: message.id,
    role: Role.ROLE_USER,
    parts,
    metadata: stored.metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}

const textPart = (text: string): Part => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" });

/** The message's state as an A2A task state. A task waiting for an approval is still being worked on. */
export function taskState(state: string | undefined): TaskState {
  switch (state) {
    case "in_flight":
    case "waiting":
      return TaskState.TASK_STATE_WORKING;
    case "acknowledged":
      return TaskState.TASK_STATE_COMPLETED;
    case "dead_lettered":
    case "expired":
      return TaskState.TASK_STATE_FAILED;
    case "cancelled":
      return TaskState.TASK_STATE_CANCELED;
    default:
      // ready, delayed, blocked: not yet with a worker.
      return TaskState.TASK_STATE_SUBMITTED;
  }
}

export const isFinal = (state: TaskState): boolean =>
  state === TaskState.TASK_STATE_COMPLETED || state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_CANCELED || state === TaskState.TASK_STATE_REJECTED;

/** Why a task stands where it does, in words, when there is something to say. */
function statusText(message: MessageJson): string | undefined {
  switch (message.state) {
    case "expired":
      return "The task expired before a worker completed it.";
    case "dead_lettered":
      return "Every delivery of the task failed; it was dead-lettered.";
    case "cancelled":
      return message.cancel_reason ?? "The task was cancelled.";
    case "waiting":
      return "Waiting for an approval.";
    case "in_flight":
      if (message.cancel_requested === true) return "Cancellation requested; the worker stops at its next step.";
      return message.progress?.text;
    default:
      return undefined;
  }
}

export function taskStatus(message: MessageJson): TaskStatus {
  const text = statusText(message);
  const data = message.progress?.data;
  const parts: Part[] = [];
  if (text !== undefined && text !== "") parts.push(textPart(text));
  if (data !== undefined && message.state === "in_flight") parts.push({ content: { $case: "data", value: data }, metadata: undefined, filename: "", mediaType: "application/json" });
  return {
    state: taskState(message.state),
    message:
      parts.length === 0
        ? undefined
        : { messageId: `${message.id}:status:${message.progress?.updated_at ?? message.state ?? ""}`, contextId: contextOf(message), taskId: message.id, role: Role.ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] },
    timestamp: message.progress?.updated_at ?? message.created_at,
  };
}

/** The result a worker acknowledged with: JSON (an object or an array) as a data part, anything else as text. */
export function resultArtifact(message: MessageJson): Artifact | undefined {
  if (message.result === undefined || message.result === null) return undefined;
  let part: Part = textPart(message.result);
  try {
    const parsed: unknown = JSON.parse(message.result);
    if (parsed !== null && typeof parsed === "object") part = { content: { $case: "data", value: parsed }, metadata: undefined, filename: "", mediaType: "application/json" };
  } catch {
    // Plain text.
  }
  return { artifactId: `${message.id}:result`, name: "result", description: "The result the worker completed the task with.", parts: [part], metadata: undefined, extensions: [] };
}

export function toTask(message: MessageJson, historyLength?: number): Task {
  const artifact = resultArtifact(message);
  return {
    id: message.id,
    contextId: contextOf(message),
    status: taskStatus(message),
    artifacts: artifact === undefined ? [] : [artifact],
    history: historyLength === 0 ? [] : [sentMessage(message)],
    metadata: { channel_id: message.channel_id, message_state: message.state ?? "", ...(message.cancel_requested === true ? { cancel_requested: true } : {}) },
  };
}

/**
 * An A2A push notification's body (docs/decisions.md#a2a): the task as it
 * stands, as a StreamResponse (A2A 1.0), rendered from the message exactly as
 * the API renders it.
 */
export function taskPushBody(message: MessageRecord, now: Micros, archived: ArchiveReason | null): string {
  const json = JSON.parse(renderMessageJson(MessageSchema, renderMessage(message, now, archived))) as MessageJson;
  return JSON.stringify(StreamResponse.toJSON({ payload: { $case: "task", value: toTask(json, 0) } }));
}
