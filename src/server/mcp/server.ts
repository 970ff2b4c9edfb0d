/**
 * The MCP server behind both transports (stdio: `agentbus mcp`; Streamable
 * HTTP: /mcp): the tools of tools.ts, and each channel's messages as a
 * resource a client may subscribe to (notified when a message arrives).
 * Built on the SDK's low-level Server: the tools' input schemas are JSON
 * Schemas generated from the proto, which the high-level McpServer (zod
 * shapes) does not take.
 */
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type EmbeddedResource,
  type ResourceLink,
} from "@modelcontextprotocol/sdk/types.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import { ApiError } from "../../model/errors.js";
import type { JsonObject } from "../../model/json.js";
import { SERVICE_VERSION } from "../../platform/version.js";
import { ApiCallError, notSpinning, pause, type AgentbusApi } from "./api.js";
import { mcpErrorBody } from "./suggestions.js";
import { MAX_EMBEDDED_PDF_BYTES, sizeText, TOOLS, toolInputSchema, type ToolContext } from "./tools.js";
import { TASK_RUNNERS } from "./task-tools.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import type { CreateTaskResult } from "@modelcontextprotocol/sdk/experimental/tasks";
import type { RequestTaskStore } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { traceFrom, traceHeaders } from "../../model/trace.js";

const RESOURCE_PREFIX = "agentbus://channels/";
const RESOURCE_SUFFIX = "/messages";
/** Channels one session may follow at a time: each is a long-poll held open for it. */
export const MAX_FOLLOWED_CHANNELS = 16;
/** Long-poll seconds of a follower; the server caps it lower if it is configured so. */
const FOLLOW_WAIT_SECONDS = 20;
const PAGE = 100;
const PDF_PATTERN = /^agentbus:\/\/jobs\/([1-9][0-9]{0,15})\/pdf$/;
/** Tasks at work per session: each holds long-polls of the session's key. */
export const MAX_TASKS = 16;
/** How long a task and its result are kept when the client does not say: 10 minutes; at most an hour. */
const DEFAULT_TASK_TTL_MS = 600_000;
const MAX_TASK_TTL_MS = 3_600_000;
const TASK_POLL_MS = 1_000;

export const channelResourceUri = (identifier: string) => `${RESOURCE_PREFIX}${encodeURIComponent(identifier)}${RESOURCE_SUFFIX}`;

function identifierOf(uri: string): string {
  if (!uri.startsWith(RESOURCE_PREFIX) || !uri.endsWith(RESOURCE_SUFFIX)) throw new McpError(ErrorCode.InvalidParams, `Unknown resource ${uri}; use ${RESOURCE_PREFIX}{channel}${RESOURCE_SUFFIX}`);
  const raw = uri.slice(RESOURCE_PREFIX.length, -RESOURCE_SUFFIX.length);
  try {
    const identifier = decodeURIComponent(raw);
    if (identifier !== "" && !identifier.includes("/")) return identifier;
  } catch {
    // reported below
  }
  throw new McpError(ErrorCode.InvalidParams, `Unknown resource ${uri}; use ${RESOURCE_PREFIX}{channel}${RESOURCE_SUFFIX}`);
}

const textResult = (value: JsonObject, isError = false, files: Array<EmbeddedResource | ResourceLink> = []): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value) }, ...files],
  structuredContent: value,
  ...(isError ? { isError: true } : {}),
});

/** A failed call as the tool error a model reads: the catalog's code and message, the details, and what to do about it over MCP. */
function toolError(err: unknown): CallToolResult {
  if (err instanceof ApiCallError) return textResult(mcpErrorBody(err.body), true);
  const reason = err instanceof Error && err.name === "TimeoutError" ? "the service did not answer in time" : "the service could not be reached";
  return textResult({ error: "service_unavailable", message: `The call failed: ${reason}`, suggestion: "Check that agentbus is running at the configured URL, then retry." }, true);
}

export interface AgentbusMcp {
  server: Server;
  /** Stops the followers (the transport is closed by its owner). */
  stop(): void;
}

export interface McpServerOptions {
  /** Where the agent reaches the service, for absolute links; default where the API client calls it. */
  publicUrl?: () => string;
  /** Default MAX_EMBEDDED_PDF_BYTES. */
  maxEmbeddedBytes?: number;
  /** One request without a session: no tasks (they would outlive it). */
  sessionless?: boolean;
}

/** A refused resource read as the protocol error MCP defines for it, with the MCP suggestion. */
function resourceError(err: unknown): unknown {
  if (!(err instanceof ApiCallError)) return err;
  const body = mcpErrorBody(err.body);
  return new McpError(ErrorCode.InvalidParams, `${err.body.error}: ${err.body.message}`, body);
}

export function createMcpServer(api: AgentbusApi, options: McpServerOptions = {}): AgentbusMcp {
  const publicUrl = options.publicUrl ?? (() => api.url);
  const maxEmbeddedBytes = options.maxEmbeddedBytes ?? MAX_EMBEDDED_PDF_BYTES;
  const server = new Server(
    { name: "agentbus", title: "agentbus", version: SERVICE_VERSION },
    {
      // Tasks (MCP 2025-11-25): the long-running tools may be called as tasks; the SDK serves tasks/get, /result, /list and /cancel from the store.
      capabilities: {
        tools: {},
        resources: { subscribe: true },
        ...(options.sessionless === true ? {} : { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }),
      },
      ...(options.sessionless === true ? {} : { taskStore: new InMemoryTaskStore() }),
      instructions:
        "agentbus hands work between agents. A claimable channel is a work queue: post_message puts a task in, receive_task takes one under a lease, " +
        "complete_task finishes it with a result, and wait_for_result gives the poster that result. Broadcast channels reach every reader (read_messages). " +
        "Errors come back with an error code, a message and a suggestion.",
    },
  );
  const instance = randomUUID();
  const followers = new Map<string, AbortController>();

  /** Long-polls the channel from its current end and notifies each arrival, until unfollowed. */
  async function followLoop(identifier: string, uri: string, start: string, signal: AbortSignal): Promise<void> {
    let cursor = start;
    let backoffMs = 1000;
    while (!signal.aborted) {
      try {
        const started = Date.now();
        const page = await api.call(MessageService.method.listMessages, { identifier, since: cursor, limit: PAGE, wait: FOLLOW_WAIT_SECONDS }, { signal, waitSeconds: FOLLOW_WAIT_SECONDS });
        const arrived = Array.isArray(page.data) ? page.data.length : 0;
        if (arrived > 0) await server.sendResourceUpdated({ uri });
        if (typeof page.next_cursor === "string") cursor = page.next_cursor;
        backoffMs = 1000;
        await notSpinning(arrived, started, signal);
      } catch (err) {
        if (signal.aborted) return;
        // The key no longer may read the channel (revoked, narrowed, removed): following ends.
        if (err instanceof ApiCallError && (err.status === 401 || err.status === 403)) {
          followers.get(uri)?.abort();
          followers.delete(uri);
          return;
        }
        await pause(backoffMs, signal);
        backoffMs = Math.min(backoffMs * 2, 30_000);
      }
    }
  }

  /** The cursor after the channel's newest live message (read with the caller's rights: a channel it may not read fails here). */
  async function channelEnd(identifier: string, signal: AbortSignal): Promise<string> {
    let cursor = "0";
    for (;;) {
      const page = await api.call(MessageService.method.listMessages, { identifier, since: cursor, limit: PAGE }, { signal });
      if (typeof page.next_cursor === "string") cursor = page.next_cursor;
      if (!Array.isArray(page.data) || page.data.length < PAGE) return cursor;
    }
  }

  async function follow(identifier: string, signal: AbortSignal): Promise<string> {
    const uri = channelResourceUri(identifier);
    if (followers.has(uri)) return uri;
    if (followers.size >= MAX_FOLLOWED_CHANNELS) {
      throw ApiCallError.of(new ApiError("too_many_follows", `A session follows at most ${MAX_FOLLOWED_CHANNELS} channels`));
    }
    const start = await channelEnd(identifier, signal);
    if (followers.has(uri)) return uri;
    const controller = new AbortController();
    followers.set(uri, controller);
    void followLoop(identifier, uri, start, controller.signal);
    return uri;
  }

  function unfollow(uri: string): boolean {
    const controller = followers.get(uri);
    if (!controller) return false;
    controller.abort();
    followers.delete(uri);
    return true;
  }

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: TOOLS.map((tool) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: toolInputSchema(tool) as { type: "object" },
      annotations: { title: tool.title, readOnlyHint: tool.readOnly === true, openWorldHint: false },
      ...(TASK_RUNNERS[tool.name] === undefined || options.sessionless === true ? {} : { execution: { taskSupport: "optional" as const } }),
    })),
  }));

  /** The session's tasks at work: each is cancelled when the session ends. */
  const working = new Map<string, AbortController>();

  /**
   * Starts a tool called as a task (docs/decisions.md#mcp): the task is answered at once; its work runs until done,
   * cancelled (tasks/cancel), past its TTL, or the session ends, and its result (or error) is stored for tasks/result.
   */
  async function startTask(name: string, args: JsonObject, ttl: number | undefined, callCtx: ToolContext, store: RequestTaskStore | undefined): Promise<CreateTaskResult> {
    const runner = TASK_RUNNERS[name];
    if (runner === undefined || store === undefined) throw new McpError(ErrorCode.InvalidParams, `${name} is not run as a task; call it without 'task'`);
    if (working.size >= MAX_TASKS) throw new McpError(ErrorCode.InvalidParams, `A session has at most ${MAX_TASKS} tasks at work; wait for one to finish or cancel one`);
    const keep = Math.min(Math.max(ttl ?? DEFAULT_TASK_TTL_MS, 1_000), MAX_TASK_TTL_MS);
    const task = await store.createTask({ ttl: keep, pollInterval: TASK_POLL_MS });
    const controller = new AbortController();
    working.set(task.taskId, controller);
    const signal = AbortSignal.any([controller.signal, AbortSignal.timeout(keep)]);
    // A cancel is a status the SDK writes: the work notices it between its long-polls.
    const watch = setInterval(() => {
      store.getTask(task.taskId).then((t) => {
        if (t.status === "cancelled") controller.abort();
      }, () => controller.abort());
    }, TASK_POLL_MS);
    void (async () => {
      let outcome: { status: "completed" | "failed"; result: CallToolResult };
      try {
        // Files the work attaches (a PDF) go with the task's result.
        const files: Array<EmbeddedResource | ResourceLink> = [];
        const value = await runner(args, { ...callCtx, signal, attach: (block) => files.push(block) });
        outcome = { status: "completed", result: textResult(value, false, files) };
      } catch (err) {
        outcome = { status: "failed", result: toolError(err) };
      } finally {
        clearInterval(watch);
        working.delete(task.taskId);
      }
      // A cancelled or expired task keeps its status: the store refuses a result for it.
      await store.storeTaskResult(task.taskId, outcome.status, outcome.result).catch(() => undefined);
    })();
    return { task };
  }

  const metaText = (meta: Record<string, unknown> | undefined, name: string): string | undefined => {
    const value = meta?.[name];
    return typeof value === "string" ? value : undefined;
  };

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS.find((t) => t.name === request.params.name);
    if (tool === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${request.params.name}`);
    const args = (request.params.arguments ?? {}) as JsonObject;
    const files: Array<EmbeddedResource | ResourceLink> = [];
    const ctx: ToolContext = {
      api,
      signal: extra.signal,
      callId: `${extra.sessionId ?? instance}-${String(extra.requestId)}`,
      follow: (identifier) => follow(identifier, extra.signal),
      unfollow: (identifier) => unfollow(channelResourceUri(identifier)),
      publicUrl: publicUrl(),
      maxEmbeddedBytes,
      attach: (block) => files.push(block),
      // The caller's trace context, which MCP carries in _meta (docs/decisions.md#trace-context).
      traceHeaders: traceHeaders(traceFrom(metaText(request.params._meta, "traceparent"), metaText(request.params._meta, "tracestate"))),
    };
    if (request.params.task !== undefined) return startTask(tool.name, args, request.params.task.ttl, ctx, extra.taskStore);
    try {
      const value = tool.run ? await tool.run(args, ctx) : await api.call(tool.method, args, { signal: extra.signal, headers: ctx.traceHeaders });
      return textResult(value, false, files);
    } catch (err) {
      return toolError(err);
    }
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: `${RESOURCE_PREFIX}{channel}${RESOURCE_SUFFIX}`,
        name: "channel-messages",
        title: "A channel's messages",
        description: "The channel's live messages, oldest first (up to 100). Subscribe to be notified when a message arrives.",
        mimeType: "application/json",
      },
      {
        uriTemplate: "agentbus://jobs/{job_id}/pdf",
        name: "job-pdf",
        title: "A PDF job's document",
        description: `The PDF of a completed submit_pdf_job job (kept 24 hours), up to ${sizeText(maxEmbeddedBytes)}; get_job links larger ones.`,
        mimeType: "application/pdf",
      },
    ],
  }));

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [...followers.keys()].map((uri) => ({ uri, name: identifierOf(uri), title: `Messages of ${identifierOf(uri)}`, mimeType: "application/json" })),
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    const { uri } = request.params;
    try {
      const job = PDF_PATTERN.exec(uri)?.[1];
      if (job !== undefined) {
        const file = await api.download(JobService.method.downloadPdf, { job_id: Number(job) }, maxEmbeddedBytes, { signal: extra.signal });
        if ("bytes" in file) return { contents: [{ uri, mimeType: "application/pdf", blob: file.bytes.toString("base64") }] };
        // The job's own download path, as get_job links it.
        const record = await api.call(JobService.method.getJob, { job_id: Number(job) }, { signal: extra.signal });
        const path = typeof record.result === "object" && record.result !== null && !Array.isArray(record.result) ? record.result.url : undefined;
        const url = new URL(typeof path === "string" ? path : api.pathOf(JobService.method.downloadPdf, { job_id: Number(job) }), publicUrl()).href;
        throw new McpError(ErrorCode.InvalidParams, `The PDF is larger than ${sizeText(maxEmbeddedBytes)}; download it from ${url} with your API key`, { download_url: url });
      }
      const page = await api.call(MessageService.method.listMessages, { identifier: identifierOf(uri), since: "0", limit: PAGE }, { signal: extra.signal });
      return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(page) }] };
    } catch (err) {
      throw resourceError(err);
    }
  });

  server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
    try {
      await follow(identifierOf(request.params.uri), extra.signal);
    } catch (err) {
      throw resourceError(err);
    }
    return {};
  });

  server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    unfollow(request.params.uri);
    return {};
  });

  const stop = () => {
    for (const controller of followers.values()) controller.abort();
    followers.clear();
    for (const controller of working.values()) controller.abort();
    working.clear();
  };
  server.onclose = stop;
  return { server, stop };
}
