/**
 * One call to a remote A2A agent for one channel message
 * (docs/decisions.md#a2a-forward), with @a2a-js/sdk's client over the
 * guarded outbound client: the message goes as an A2A message (its id the
 * A2A messageId, so a redelivery is the same message to the agent), and the
 * agent's answer comes back as the result text, or why it failed.
 */
import { Artifact, Part, Role, TaskState, type Message as A2aMessage, type Task } from "@a2a-js/sdk";
import { ClientFactory, JsonRpcTransportFactory, type Client } from "@a2a-js/sdk/client";
import type { JsonObject, JsonValue } from "../model/json.js";
import type { MessageRecord } from "../model/messages.js";
import { traceHeaders } from "../model/trace.js";
import type { OutboundClient } from "../outbound/guarded-fetch.js";
import { pause } from "../platform/pause.js";

export type RemoteOutcome = { kind: "completed"; result: string } | { kind: "failed"; reason: string };

/** The longest one request to the agent may take (a blocking send waits for the agent's answer). */
const REQUEST_TIMEOUT_MS = 120_000;
/** The most of an answer read. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const FIRST_POLL_MS = 500;
const MAX_POLL_MS = 5_000;

/** fetch over the guarded client: private targets refused unless configured, bounded time and size. */
function guardedFetch(http: OutboundClient, extraHeaders: () => Record<string, string>): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const headers: Record<string, string> = { ...Object.fromEntries(new Headers(init?.headers).entries()), ...extraHeaders() };
    const body = typeof init?.body === "string" ? init.body : undefined;
    const res = await http.request(url, { method: init?.method ?? "GET", headers, body, timeoutMs: REQUEST_TIMEOUT_MS, maxResponseBytes: MAX_ANSWER_BYTES, signal: init?.signal ?? undefined });
    if (res.truncated) throw new Error(`the agent's answer is larger than ${MAX_ANSWER_BYTES} bytes`);
    const answerHeaders = new Headers();
    for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) answerHeaders.set(name, Array.isArray(value) ? value.join(", ") : value);
    return new Response(res.status === 204 || res.status === 304 ? null : res.body, { status: res.status, headers: answerHeaders });
  };
}

/** The agent of one forward: its card fetched once, then reused. */
export class RemoteAgent {
  private client: Promise<Client> | undefined;

  constructor(
    private readonly url: string,
    private readonly authHeader: { name: string; value: string } | null,
    private readonly http: OutboundClient,
  ) {}

  private connect(): Promise<Client> {
    const headers = () => (this.authHeader === null ? {} : { [this.authHeader.name]: this.authHeader.value });
    const fetchImpl = guardedFetch(this.http, headers);
    const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: undefined });
    // A card URL is used as given; a base URL gets the well-known path.
    const card = this.url.endsWith(".json") ? factory.createFromUrl(this.url, "") : factory.createFromUrl(this.url.endsWith("/") ? this.url : `${this.url}/`);
    // A card that could not be read is read again next time.
    card.catch(() => (this.client = undefined));
    return card;
  }

  /** Sends the message and waits for the agent's final answer, polling a task it answers with; `signal` cancels it. */
  async send(message: MessageRecord, signal: AbortSignal): Promise<RemoteOutcome> {
    // The message's trace goes with each request (as headers); with spans on, the request's own span replaces it.
    const options = { signal, serviceParameters: traceHeaders(message.trace) };
    const client = await (this.client ??= this.connect());
    const answer = await client.sendMessage(
      { tenant: "", message: toA2a(message), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false }, metadata: undefined },
      options,
    );
    if (!("status" in answer)) return { kind: "completed", result: resultOf(answer.parts) };
    let task: Task = answer;
    for (let wait = FIRST_POLL_MS; !isFinal(task); wait = Math.min(wait * 2, MAX_POLL_MS)) {
      if (signal.aborted) {
        await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, { serviceParameters: options.serviceParameters }).catch(() => undefined);
        return { kind: "failed", reason: "cancelled" };
      }
      await pause(wait, signal);
      if (signal.aborted) continue;
      task = await client.getTask({ tenant: "", id: task.id, historyLength: 0 }, options);
    }
    const state = task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
    if (state !== TaskState.TASK_STATE_COMPLETED) return { kind: "failed", reason: `agent_${TaskState[state]?.replace("TASK_STATE_", "").toLowerCase() ?? "unknown"}` };
    const artifacts = task.artifacts;
    if (artifacts.length === 0) return { kind: "completed", result: resultOf(task.status?.message?.parts ?? []) };
    if (artifacts.length === 1) return { kind: "completed", result: resultOf(artifacts[0]!.parts) };
    return { kind: "completed", result: JSON.stringify({ artifacts: artifacts.map((a) => Artifact.toJSON(a)) }) };
  }
}

/** Waiting on the client is over: completed, failed, canceled, rejected, or needing what a queue cannot give (input, auth). */
const isFinal = (task: Task): boolean => {
  const state = task.status?.state;
  return state !== undefined && state !== TaskState.TASK_STATE_SUBMITTED && state !== TaskState.TASK_STATE_WORKING && state !== TaskState.TASK_STATE_UNSPECIFIED;
};

/**
 * The answer's parts as a result, as agentbus's own A2A server maps a result
 * the other way: one text part is the text, one data part its JSON; anything
 * else the parts' A2A JSON.
 */
function resultOf(parts: readonly Part[]): string {
  const only = parts.length === 1 ? parts[0]!.content : undefined;
  if (only?.$case === "text") return only.value;
  if (only?.$case === "data") return JSON.stringify(only.value);
  return JSON.stringify({ parts: parts.map((p) => Part.toJSON(p)) });
}

/** A channel message as the A2A message the agent receives: its content as text, the A2A parts it came with, and where it came from. */
function toA2a(message: MessageRecord): A2aMessage {
  const stored = message.metadata.a2a;
  const a2a = stored !== null && typeof stored === "object" && !Array.isArray(stored) ? (stored as JsonObject) : {};
  const extra = Array.isArray(a2a.parts) ? (a2a.parts as JsonValue[]) : [];
  return {
    messageId: message.id,
    contextId: typeof a2a.context_id === "string" ? a2a.context_id : "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: message.content }, metadata: undefined, filename: "", mediaType: "text/plain" }, ...extra.map((p) => Part.fromJSON(p))],
    metadata: { agentbus: { message_id: message.id, channel_id: message.channelId, delivery: message.deliveryCount } },
    extensions: [],
    referenceTaskIds: [],
  };
}
