/**
 * The MCP tools: the agent workflow over the API. Each tool names the RPC it
 * calls; its input schema is that RPC's request message (schema.ts), cut to
 * the fields an agent needs. The descriptions are written for a model: what
 * the tool does, when to use it, and what comes back.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { ChannelService } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../../gen/agentbus/v1/key_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../../model/json.js";
import { ApiCallError, type AgentbusApi, type CallOptions } from "./api.js";
import { inputSchema, type SchemaOptions } from "./schema.js";

/** What a tool call gets besides its arguments. */
export interface ToolContext {
  api: AgentbusApi;
  signal: AbortSignal;
  /** Unique to this call within the process: the root of derived idempotency keys. */
  callId: string;
  /** Subscribes this session to a channel's message resource (follow_channel). */
  follow(identifier: string): Promise<string>;
  unfollow(identifier: string): boolean;
}

export interface ToolSpec {
  name: string;
  title: string;
  description: string;
  method: DescMethod;
  schema: SchemaOptions;
  /** Read-only tools are marked so clients may call them without asking. */
  readOnly?: boolean;
  /** Default: call `method` with the arguments. */
  run?(args: JsonObject, ctx: ToolContext): Promise<JsonObject>;
}

const IDENTIFIER = "The channel: its id, an alias, or the name of a channel you created.";
const WAIT = "Seconds to wait for something to arrive before answering (long-poll; capped by the server, e.g. 20). 0 or absent answers at once.";
const waitOf = (args: JsonObject) => (typeof args.wait === "number" ? args.wait : 0);
const call = (ctx: ToolContext, method: DescMethod, args: JsonObject, options: CallOptions = {}) => ctx.api.call(method, args, { signal: ctx.signal, ...options });

export const TOOLS: readonly ToolSpec[] = [
  {
    name: "find_or_create_channel",
    title: "Find or create a channel",
    description:
      "Returns the channel you named, creating it first if you have none by that name. Use it to get a place to hand work over: " +
      "'claimable' channels are work queues (each message goes to exactly one worker), 'broadcast' channels reach every reader. " +
      "Returns the channel (id, name, mode, access, ttl_seconds, …) and whether it was created.",
    method: ChannelService.method.createChannel,
    schema: {
      fields: ["name", "mode", "access", "description", "discoverable"],
      required: ["name"],
      descriptions: { name: "The channel's name, unique among your channels.", mode: "claimable (default) or broadcast; used only when creating." },
    },
    async run(args, ctx) {
      try {
        return { created: false, channel: await call(ctx, ChannelService.method.getChannel, { identifier: args.name ?? "" }) };
      } catch (err) {
        if (!(err instanceof ApiCallError && err.body.error === "channel_not_found")) throw err;
      }
      const fields = { mode: "claimable", ...args };
      return { created: true, channel: await call(ctx, ChannelService.method.createChannel, fields, { idempotencyKey: `mcp-${ctx.callId}` }) };
    },
  },
  {
    name: "get_channel",
    title: "Get a channel",
    description: "Returns a channel's settings and state (mode, access, TTL, pinned message, your role). Use it to check a channel before posting or working on it.",
    method: ChannelService.method.getChannel,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
    readOnly: true,
  },
  {
    name: "list_my_channels",
    title: "List my channels",
    description:
      "Lists the channels you created or joined (as a member), newest first, a page at a time (pass next_cursor back as cursor): " +
      "where you can post, read and take work. Returns {data: [{id, name, mode, access, description, created_at, is_member}], next_cursor}.",
    method: ChannelService.method.listMyChannels,
    schema: {},
    readOnly: true,
  },
  {
    name: "discover_channels",
    title: "Discover public channels",
    description: "Lists the channels their owners made discoverable, newest first, a page at a time (pass next_cursor back as cursor).",
    method: ChannelService.method.discoverChannels,
    schema: {},
    readOnly: true,
  },
  {
    name: "post_message",
    title: "Post a message",
    description:
      "Posts a message to a channel: a task for a claimable channel's workers, or news for a broadcast channel's readers. " +
      "A retry of the same call is stored once. Returns the stored message (its id is what you wait on with wait_for_result) and next_cursor.",
    method: MessageService.method.createMessage,
    schema: {
      fields: ["identifier", "content", "metadata", "mentions", "delay_seconds", "actor_label"],
      required: ["identifier", "content"],
      descriptions: { identifier: IDENTIFIER, content: "The message text (up to the channel's size limit).", delay_seconds: "Hold the message back this long before anyone may receive it." },
    },
    run: (args, ctx) => call(ctx, MessageService.method.createMessage, args, { idempotencyKey: `mcp-${ctx.callId}` }),
  },
  {
    name: "read_messages",
    title: "Read new messages",
    description:
      "Reads a channel's messages after a cursor, oldest first, optionally waiting for new ones. Start with since '0' (everything live), " +
      "then pass the next_cursor of each answer as since to get only what is new. Returns {data: [messages], next_cursor}.",
    method: MessageService.method.listMessages,
    schema: {
      fields: ["identifier", "since", "limit", "wait", "status"],
      required: ["identifier"],
      descriptions: { identifier: IDENTIFIER, since: "A next_cursor from an earlier answer, or '0' for the start.", wait: WAIT },
    },
    readOnly: true,
    run: (args, ctx) => call(ctx, MessageService.method.listMessages, args, { waitSeconds: waitOf(args) }),
  },
  {
    name: "receive_task",
    title: "Receive a task",
    description:
      "Takes the oldest open task(s) of a claimable channel under a lease: no other worker gets them until you complete or release them, " +
      "or the lease runs out (then they go to someone else). Pass 'complete' to finish earlier tasks in the same call. " +
      "Returns {data: [{message, lease_token, lease_expires_at}], completed}; data is empty when nothing arrived within 'wait'.",
    method: MessageService.method.receiveMessages,
    schema: {
      fields: ["identifier", "max_messages", "lease_seconds", "wait", "complete", "actor"],
      required: ["identifier"],
      descriptions: {
        identifier: IDENTIFIER,
        lease_seconds: "How long the task is yours (30..3600, default 300); extend it with heartbeat_lease.",
        wait: WAIT,
        complete: "Tasks you finished, each {message_id, result?}: acknowledged before new work is taken.",
      },
    },
    run: (args, ctx) => call(ctx, MessageService.method.receiveMessages, args, { waitSeconds: waitOf(args) }),
  },
  {
    name: "complete_task",
    title: "Complete a task",
    description:
      "Marks a task you received as done, with its result (text, up to 64 KiB) for whoever waits on it. " +
      "Returns {status: acknowledged | already_acknowledged, message}.",
    method: MessageService.method.ackMessage,
    schema: { fields: ["message_id", "result", "metadata", "actor"], required: ["message_id"] },
  },
  {
    name: "release_task",
    title: "Release a task",
    description:
      "Gives a task you received back unfinished, so another worker (or you) can take it, after delay_seconds if given (back-off for a retry). Returns the message.",
    method: MessageService.method.releaseMessage,
    schema: { fields: ["message_id", "delay_seconds", "actor"], required: ["message_id"] },
  },
  {
    name: "heartbeat_lease",
    title: "Extend a lease",
    description: "Extends the lease of a task you are still working on (by lease_seconds, default the original length). Returns the new expires_at.",
    method: MessageService.method.heartbeatLease,
    schema: { required: ["lease_token"] },
  },
  {
    name: "wait_for_result",
    title: "Wait for a task's result",
    description:
      "Returns a message with its result once a worker completed it, waiting up to 'wait' seconds. " +
      "Use it after post_message to get the answer to your task: check message.result and message.acknowledged_by; call again if it is not there yet.",
    method: MessageService.method.getMessage,
    schema: { required: ["message_id"], descriptions: { wait: WAIT } },
    readOnly: true,
    run: (args, ctx) => call(ctx, MessageService.method.getMessage, args, { waitSeconds: waitOf(args) }),
  },
  {
    name: "channel_stats",
    title: "Queue state of a channel",
    description: "Counts a channel's messages by state (ready, delayed, in_flight, acknowledged, dead_lettered) with the oldest ready task's age.",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
    readOnly: true,
  },
  {
    name: "follow_channel",
    title: "Follow a channel",
    description:
      "Subscribes this session to a channel: you are notified (resources/updated) each time a message arrives, for the resource " +
      "agentbus://channels/{id}/messages, which reads the channel's messages. Returns that resource's URI.",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
    async run(args, ctx) {
      return { uri: await ctx.follow(String(args.identifier ?? "")) };
    },
  },
  {
    name: "unfollow_channel",
    title: "Stop following a channel",
    description: "Ends a follow_channel subscription. Returns whether there was one.",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
    async run(args, ctx) {
      return { unfollowed: ctx.unfollow(String(args.identifier ?? "")) };
    },
  },
  {
    name: "create_invitation",
    title: "Invite to a channel",
    description: "Creates an invitation to a restricted channel you own; give its id to another agent, who joins with resolve_invitation.",
    method: ChannelService.method.createInvitation,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
  },
  {
    name: "resolve_invitation",
    title: "Accept an invitation",
    description: "Joins the channel an invitation is for, making you a member. Returns the channel.",
    method: ChannelService.method.resolveInvitation,
    schema: { required: ["invitation_id"] },
  },
  {
    name: "request_access",
    title: "Ask to join a channel",
    description: "Asks a restricted channel's owner to let you in, with a reason; the owner approves or denies it.",
    method: ChannelService.method.createAccessRequest,
    schema: { required: ["identifier"], descriptions: { identifier: IDENTIFIER } },
  },
  {
    name: "whoami",
    title: "Who am I",
    description: "Returns the API key this session acts as (key id, agent label, owner).",
    method: KeyService.method.getCurrentKey,
    schema: {},
    readOnly: true,
  },
  {
    name: "submit_pdf_job",
    title: "Render a PDF",
    description:
      "Starts rendering HTML or Markdown to a PDF. Returns {job_id}; poll get_job until its status is completed; its result.url is where the PDF downloads (GET, with your API key).",
    method: JobService.method.createPdfJob,
    schema: { required: ["content"] },
  },
  {
    name: "submit_job_posting_parse",
    title: "Parse a job posting",
    description: "Starts extracting structured fields (title, company, salary, …) from a job posting's URL or text. Returns {job_id}; poll get_job for the fields.",
    method: JobService.method.createJobPostingParseJob,
    schema: {},
  },
  {
    name: "submit_transcript_job",
    title: "Transcribe a video",
    description: "Starts fetching a video's timestamped transcript (YouTube URL; optional language). Returns {job_id}; poll get_job for the transcript.",
    method: JobService.method.createTranscriptJob,
    schema: { required: ["url"] },
  },
  {
    name: "get_job",
    title: "Get a job",
    description: "Returns a job's status (queued, processing, completed, failed) and, once completed, its result (or, once failed, its error). Poll it every second or two.",
    method: JobService.method.getJob,
    schema: { required: ["job_id"] },
    readOnly: true,
  },
];

export const toolInputSchema = (tool: ToolSpec): JsonObject => inputSchema(tool.method.input, tool.schema);
