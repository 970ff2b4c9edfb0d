/**
 * The MCP tools: the agent workflow over the API. Each tool names the RPC it
 * calls; its input schema is that RPC's request message (schema.ts), cut to
 * the fields an agent needs. The descriptions are written for a model: what
 * the tool does, when to use it, and what comes back.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { EmbeddedResource, ResourceLink } from "@modelcontextprotocol/sdk/types.js";
import { ChannelService } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../../gen/agentbus/v1/key_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import { WaitpointService } from "../../../gen/agentbus/v1/waitpoint_service_pb.js";
import { ScheduleService } from "../../../gen/agentbus/v1/schedule_service_pb.js";
import { DISCOVERY_PAGE, TTL_SECONDS } from "../../domain/channels.js";
import { WAITPOINT_RULES } from "../../domain/waitpoints.js";
import { LEASE_SECONDS, MAX_METADATA_BYTES, MAX_RESULT_BYTES, RECEIVE_MAX_MESSAGES } from "../../domain/message-rules.js";
import { MAX_MENTIONS } from "../../domain/actors.js";
import { GROUP_CONCURRENCY, GROUP_KEY_MAX_CHARS, MAX_LIMIT_NAMES, PRIORITY, PRIORITY_AGING_SECONDS } from "../../domain/dispatch-rules.js";
import { STANDARD_PAGE } from "../../domain/paging.js";
import type { JsonObject } from "../../model/json.js";
import { ApiCallError, type AgentbusApi, type CallOptions } from "./api.js";
import { inputSchema, type FieldDocs, type SchemaOptions } from "./schema.js";

/** What a tool call gets besides its arguments. */
export interface ToolContext {
  api: AgentbusApi;
  signal: AbortSignal;
  /** Unique to this call within the process: the root of derived idempotency keys. */
  callId: string;
  /** Subscribes this session to a channel's message resource (follow_channel). */
  follow(identifier: string): Promise<string>;
  unfollow(identifier: string): boolean;
  /** Where the agent reaches the service (absolute links in answers start here). */
  publicUrl: string;
  /** A PDF up to this size comes back embedded; a larger one as a link. */
  maxEmbeddedBytes: number;
  /** The call's trace context as headers (from its _meta), passed on with every REST call it makes. */
  traceHeaders: Record<string, string>;
  /** Adds a content block (a file) to the answer, after its JSON. */
  attach(block: EmbeddedResource | ResourceLink): void;
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

/**
 * The longest long-poll a service can be configured to hold
 * (AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS, at most 300: src/platform/config.ts).
 * The domain takes any wait from 0 and caps it at the service's own setting,
 * which the stdio server cannot know, so the schema offers the whole range.
 */
const MAX_WAIT_SECONDS = 300;
const KIB = 1024;
const MIB = KIB * KIB;
/**
 * The largest PDF a tool answer embeds. As base64 it grows by a third (5 MiB
 * is 6.7 MiB of JSON), and the whole answer sits in the client's memory and,
 * with many clients, in the model's context. Text prints small (a page of
 * Markdown with code and CJK: 28 KiB); a PDF past 5 MiB is carrying large
 * images, and for it a link costs the agent nothing. The service keeps PDFs
 * up to 64 MiB; get_job links those between the two.
 */
export const MAX_EMBEDDED_PDF_BYTES = 5 * 1024 * 1024;

export const sizeText = (bytes: number) => (bytes % MIB === 0 ? `${bytes / MIB} MiB` : `${bytes} bytes`);

/**
 * The fields the tools share, by name, at any depth (a receive's complete
 * items too): what a model is told, and for numbers the bounds the domain
 * checks (imported, so they move with the rule).
 */
const FIELDS: FieldDocs = {
  identifier: { description: "The channel: its id, an alias, or the name of a channel you created." },
  name: { description: "The channel's name, unique among your channels." },
  mode: { description: "claimable (a work queue: each message goes to one worker) or broadcast (every reader sees every message)." },
  access: { description: "open (any key may use it) or restricted (only members: the owner invites or approves requests). Default open." },
  description: { description: "What the channel is for, shown to those who discover it." },
  discoverable: { description: "Whether discover_channels lists it for other agents. Default: the service's setting for open channels, false for restricted ones." },
  ttl_seconds: {
    description: `How long a message lives before it expires unread (${TTL_SECONDS.min}..${TTL_SECONDS.max}, default ${TTL_SECONDS.default}); used only when creating.`,
    minimum: TTL_SECONDS.min,
    maximum: TTL_SECONDS.max,
  },
  cursor: { description: "next_cursor of the previous page, for the next (older) page; leave it out for the first page." },
  limit: { description: `How many items per page (${STANDARD_PAGE.min}..${STANDARD_PAGE.max}, default ${STANDARD_PAGE.default}).`, minimum: STANDARD_PAGE.min, maximum: STANDARD_PAGE.max },
  since: { description: "A next_cursor from an earlier answer (only what came after it), or '0' for every live message." },
  status: { description: "Only unclaimed (open work) or only claimed messages; all when left out." },
  wait: {
    description: `Seconds to wait for something to arrive before answering (long-poll; the service caps it at its own limit, 25 by default). 0 or absent answers at once.`,
    minimum: 0,
    maximum: MAX_WAIT_SECONDS,
  },
  content: { description: "The message text (up to the channel's max_content_bytes)." },
  cron: { description: "Five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5') or six with seconds first ('*/30 * * * * *')." },
  timezone: { description: "An IANA time zone name the cron is read in, e.g. 'Europe/Berlin'; default 'UTC'." },
  message: { description: "What each tick of a schedule posts: {content, metadata?, group_key?, priority? (1..5)}." },
  paused: { description: "true pauses a schedule (no tick runs), false resumes it (the next tick is taken from now)." },
  metadata: { description: `Structured data to keep with it: a JSON object, at most ${MAX_METADATA_BYTES / KIB} KiB (checked against the channel's metadata_schema when it has one).` },
  mentions: { description: `Actors (ids or aliases, up to ${MAX_MENTIONS}) to notify of the message.` },
  delay_seconds: {
    description: `Seconds (fractions allowed) before the message is open work: until then no one can receive it. 0 (default) up to the channel's ttl_seconds (at most ${TTL_SECONDS.max}).`,
    minimum: 0,
    maximum: TTL_SECONDS.max,
  },
  actor_label: { description: "A free-text label of who posts, shown with the message." },
  group_key: {
    description:
      `The message's group (1..${GROUP_KEY_MAX_CHARS} characters), e.g. a repository or conversation id: on a channel with group_concurrency, ` +
      "at most that many messages of one group are worked on at once (1: one after another, in order); fair dispatch takes turns between groups.",
  },
  priority: {
    description: `How urgent the task is: ${PRIORITY.min} (most urgent) to ${PRIORITY.max}, default ${PRIORITY.default}. Workers receive more urgent work first.`,
    minimum: PRIORITY.min,
    maximum: PRIORITY.max,
  },
  group_concurrency: {
    description: `Claimable channels: at most this many messages of one group_key in flight at once (${GROUP_CONCURRENCY.min}..${GROUP_CONCURRENCY.max}; 1 makes each group strictly in order). Default unbounded; used only when creating.`,
    minimum: GROUP_CONCURRENCY.min,
    maximum: GROUP_CONCURRENCY.max,
  },
  dispatch: {
    description: "Claimable channels: fifo (default: oldest open work first) or fair (take turns between groups, so one large group cannot starve the others); used only when creating.",
  },
  priority_aging_seconds: {
    description: `A waiting message counts one priority level more urgent per this many seconds waited (${PRIORITY_AGING_SECONDS.min}..${PRIORITY_AGING_SECONDS.max}), so low priority is not starved. Default: no aging; used only when creating.`,
    minimum: PRIORITY_AGING_SECONDS.min,
    maximum: PRIORITY_AGING_SECONDS.max,
  },
  limits: {
    description: `Names of your shared limits (up to ${MAX_LIMIT_NAMES}; quotas such as a model provider's calls per minute) that every message delivered from the channel holds; used only when creating.`,
  },
  a2a: {
    description:
      "Claimable channels: publish the channel as an A2A agent, {enabled: true, name?, description?, skills?: [{id, name, description?, tags?, examples?}]}. " +
      "Other agents then read its card at /a2a/{channel_id}/.well-known/agent-card.json and send it tasks over A2A; your workers receive them as any task. Used only when creating.",
  },
  enabled: { description: "true publishes the agent card and the A2A endpoint; false keeps the settings but answers 404." },
  a2a_forward: {
    description:
      "Claimable channels: send the channel's work to a remote A2A agent, {url, auth_header?: {name, value}}: each message goes to the agent " +
      "and is completed with its answer, or released to be retried (max_deliveries and the dead-letter channel apply). Used only when creating.",
  },
  auth_header: { description: "A header sent with every request to the agent, {name, value}; the value is never shown again." },
  value: { description: "The header's value (write-only)." },
  skills: { description: "What the agent offers (at most 32): each {id (letters, digits, . _ -), name, description?, tags?, examples?}." },
  id: { description: "An identifier, unique in its list." },
  tags: { description: "Keywords (at most 16)." },
  examples: { description: "Example requests (at most 8)." },
  actor: { description: "Who does this: one of your own actors (id, alias or name; a new name creates one). Default: your key's own agent." },
  max_messages: {
    description: `How many tasks to take at once (${RECEIVE_MAX_MESSAGES.min}..${RECEIVE_MAX_MESSAGES.max}, default ${RECEIVE_MAX_MESSAGES.default}).`,
    minimum: RECEIVE_MAX_MESSAGES.min,
    maximum: RECEIVE_MAX_MESSAGES.max,
  },
  lease_seconds: {
    description: `How long the task stays yours (${LEASE_SECONDS.min}..${LEASE_SECONDS.max}, default ${LEASE_SECONDS.default}); extend it with heartbeat_lease.`,
    minimum: LEASE_SECONDS.min,
    maximum: LEASE_SECONDS.max,
  },
  complete: { description: "Tasks you finished, each {message_id, result?}: completed before new work is taken." },
  message_id: { description: "The message's (task's) id, as post_message, read_messages or receive_task returned it." },
  result: { description: `The outcome of the work for whoever waits on it (text, at most ${MAX_RESULT_BYTES / KIB} KiB).` },
  lease_token: { description: "The lease_token receive_task returned with the task." },
  invitation_id: { description: "The invitation's id, as the channel's owner or a member gave it to you." },
  reason: { description: "Why you want in, for the owner who decides." },
  format: { description: "How content is written: html (default) or markdown." },
  css: { description: "Extra CSS applied to the page, after the document's own (e.g. @page { size: letter; })." },
  url: { description: "The public http(s) URL to fetch." },
  text: { description: "The posting's text, instead of a url." },
  language: { description: "Preferred caption language code, e.g. en (default), de or pt-BR." },
  job_id: { description: "The job_id a submit_* tool returned.", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
};

/** A listing that clamps its page size rather than refusing it (channel listings). */
const CHANNEL_PAGE = {
  limit: { description: `How many channels per page (${DISCOVERY_PAGE.min}..${DISCOVERY_PAGE.max}, default ${DISCOVERY_PAGE.default}).`, minimum: DISCOVERY_PAGE.min, maximum: DISCOVERY_PAGE.max },
};

const waitOf = (args: JsonObject) => (typeof args.wait === "number" ? args.wait : 0);
const call = (ctx: ToolContext, method: DescMethod, args: JsonObject, options: CallOptions = {}) =>
  ctx.api.call(method, args, { signal: ctx.signal, headers: ctx.traceHeaders, ...options });

/** The MCP address of a PDF job's file: embedded answers name it, and resources/read reads it. */
export const pdfResourceUri = (jobId: number | string) => `agentbus://jobs/${encodeURIComponent(String(jobId))}/pdf`;

/**
 * A completed PDF job with its file: the PDF itself as an embedded resource
 * when it is small enough, else a link to the download route (absolute, so
 * the agent can fetch it). result.url is made absolute either way.
 */
export async function withPdf(job: JsonObject, ctx: ToolContext): Promise<JsonObject> {
  const result = job.result;
  if (job.kind !== "pdf" || job.status !== "completed" || typeof result !== "object" || result === null || Array.isArray(result) || typeof result.url !== "string") return job;
  const jobId = job.job_id as number;
  const url = new URL(result.url, ctx.publicUrl).href;
  const file = await ctx.api.download(JobService.method.downloadPdf, { job_id: jobId }, ctx.maxEmbeddedBytes, { signal: ctx.signal });
  const name = `job-${jobId}.pdf`;
  if ("bytes" in file) {
    const uri = pdfResourceUri(jobId);
    ctx.attach({ type: "resource", resource: { uri, mimeType: "application/pdf", blob: file.bytes.toString("base64") } });
    return { ...job, result: { ...result, url }, pdf: { embedded: true, uri, name, size_bytes: file.bytes.byteLength } };
  }
  const note = `Larger than ${sizeText(ctx.maxEmbeddedBytes)}, so not embedded: download it from download_url with your API key (GET, X-API-Key header) within 24 hours.`;
  ctx.attach({ type: "resource_link", uri: url, name, mimeType: "application/pdf", description: note, ...(file.size === undefined ? {} : { size: file.size }) });
  return { ...job, result: { ...result, url }, pdf: { embedded: false, download_url: url, name, ...(file.size === undefined ? {} : { size_bytes: file.size }), note } };
}

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
      fields: ["name", "mode", "access", "description", "discoverable", "ttl_seconds", "group_concurrency", "dispatch", "priority_aging_seconds", "limits", "a2a", "a2a_forward"],
      required: ["name"],
      docs: {
        mode: "claimable (default: a work queue, each message goes to one worker) or broadcast (every reader sees every message); used only when creating.",
        access: "open (default: any key may use it) or restricted (only members); used only when creating.",
        description: "What the channel is for; used only when creating.",
        discoverable: "Whether discover_channels lists it for other agents; used only when creating.",
      },
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
    schema: { required: ["identifier"] },
    readOnly: true,
  },
  {
    name: "list_my_channels",
    title: "List my channels",
    description:
      "Lists the channels you created or joined (as a member), newest first, a page at a time (pass next_cursor back as cursor): " +
      "where you can post, read and take work. Returns {data: [{id, name, mode, access, description, created_at, is_member}], next_cursor}.",
    method: ChannelService.method.listMyChannels,
    schema: { docs: CHANNEL_PAGE },
    readOnly: true,
  },
  {
    name: "discover_channels",
    title: "Discover public channels",
    description: "Lists the channels their owners made discoverable, newest first, a page at a time (pass next_cursor back as cursor).",
    method: ChannelService.method.discoverChannels,
    schema: { docs: CHANNEL_PAGE },
    readOnly: true,
  },
  {
    name: "post_message",
    title: "Post a message",
    description:
      "Posts a message to a channel: a task for a claimable channel's workers, or news for a broadcast channel's readers. " +
      "Workers take more urgent tasks first (priority 1..5); group_key ties related tasks together (one repository, one conversation), which a channel with group_concurrency works a few, or one, at a time. " +
      "A retry of the same call is stored once. Returns the stored message (its id is what you wait on with wait_for_result) and next_cursor.",
    method: MessageService.method.createMessage,
    schema: {
      fields: ["identifier", "content", "metadata", "mentions", "delay_seconds", "group_key", "priority", "ttl_seconds", "depends_on", "actor_label"],
      required: ["identifier", "content"],
      docs: {
        depends_on: {
          description: "Ids of messages (at most 100, of your channels) this task waits for: it is handed out once each is completed, with their results (parents), and cancelled if one fails.",
        },
        ttl_seconds: {
          description: `Seconds until this message expires unworked, when sooner than the channel's ttl_seconds: 1 up to the channel's ttl_seconds (at most ${TTL_SECONDS.max}). Default: the channel's.`,
          minimum: 1,
          maximum: TTL_SECONDS.max,
        },
      },
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
    },
    readOnly: true,
    run: (args, ctx) => call(ctx, MessageService.method.listMessages, args, { waitSeconds: waitOf(args) }),
  },
  {
    name: "receive_task",
    title: "Receive a task",
    description:
      "Takes the next open task(s) of a claimable channel under a lease (the most urgent priority first, then the oldest, or by turns between groups on a fair channel): " +
      "no other worker gets them until you complete or release them, " +
      "or the lease runs out (then they go to someone else). Pass 'complete' to finish earlier tasks in the same call. " +
      "Returns {data: [{message, lease_token, lease_expires_at}], completed}; data is empty when nothing arrived within 'wait'.",
    method: MessageService.method.receiveMessages,
    schema: {
      fields: ["identifier", "max_messages", "lease_seconds", "wait", "complete", "actor"],
      required: ["identifier"],
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
    schema: { fields: ["message_id", "result", "metadata", "actor"], required: ["message_id"], docs: { metadata: `Structured data kept with this completion: a JSON object, at most ${MAX_METADATA_BYTES / KIB} KiB.` } },
  },
  {
    name: "release_task",
    title: "Release a task",
    description:
      "Gives a task you received back unfinished, so another worker (or you) can take it, after delay_seconds if given (back-off for a retry), " +
      "or, with until_waitpoint, once that waitpoint of yours is completed or times out (a person's approval, say: create_waitpoint first). Returns the message.",
    method: MessageService.method.releaseMessage,
    schema: {
      fields: ["message_id", "delay_seconds", "until_waitpoint", "actor"],
      required: ["message_id"],
      docs: {
        delay_seconds: { ...FIELDS.delay_seconds!, description: `Seconds (fractions allowed) before the task is open work again (back-off for a retry): 0 (default) up to the channel's ttl_seconds (at most ${TTL_SECONDS.max}).` },
        until_waitpoint: {
          description:
            "The id of a waitpoint you created: the task waits (state 'waiting') until it is completed or times out, then is open work again " +
            "carrying waitpoint {id, data} or {id, timed_out: true}; this delivery is not counted. Not with delay_seconds.",
        },
      },
    },
  },
  {
    name: "create_waitpoint",
    title: "Create a waitpoint (wait for a person or another system)",
    description:
      "Creates a waitpoint: something a person or an outside system completes, with no API key, by POSTing to its complete_url " +
      "(send that URL to whoever must approve). Then release_task with until_waitpoint = its id: the task comes back to a worker when it is " +
      "completed (with its data, e.g. {approved: true}) or times out. The token in the answer is shown once. Returns the waitpoint.",
    method: WaitpointService.method.createWaitpoint,
    schema: {
      required: ["timeout_seconds"],
      docs: {
        timeout_seconds: {
          description: `Seconds until it times out unless completed first (${WAITPOINT_RULES.timeoutSeconds.min}..${WAITPOINT_RULES.timeoutSeconds.max}, 30 days); a task waiting for it then comes back with timed_out: true.`,
          minimum: WAITPOINT_RULES.timeoutSeconds.min,
          maximum: WAITPOINT_RULES.timeoutSeconds.max,
        },
        description: { description: `What is asked, for whoever decides (at most ${WAITPOINT_RULES.maxDescriptionLength} characters); shown on the console's Approvals page.` },
        idempotency_key: { description: "Optional, 1..255 printable ASCII characters: calling again with it gives the same waitpoint (with a new token, voiding the old, while it waits)." },
      },
    },
  },
  {
    name: "get_waitpoint",
    title: "Read a waitpoint",
    description: "Returns one of your waitpoints: state ('waiting', 'completed', 'timed_out'), data once completed, expires_at, waiting_messages.",
    method: WaitpointService.method.getWaitpoint,
    schema: { required: ["id"], docs: { id: { description: "The waitpoint's id, as create_waitpoint returned it." } } },
    readOnly: true,
  },
  {
    name: "list_waitpoints",
    title: "List your waitpoints",
    description: "Lists waitpoints your key created, newest first; state 'waiting' lists the ones still open (the approvals still to give).",
    method: WaitpointService.method.listWaitpoints,
    schema: { docs: { state: { description: "Only those waiting (not answered yet), completed or timed_out; all when left out." } } },
    readOnly: true,
  },
  {
    name: "complete_waitpoint",
    title: "Complete one of your waitpoints",
    description:
      "Completes a waitpoint you created, by id (no token needed), with data such as {approved: true, by: 'dana'}: the tasks waiting for it " +
      "are open work again at once. A waitpoint completes once (else waitpoint_already_completed), and not after it timed out.",
    method: WaitpointService.method.resolveWaitpoint,
    schema: {
      required: ["id"],
      docs: {
        id: { description: "The id of a waitpoint you created." },
        data: { description: `The answer, a JSON object (at most ${MAX_METADATA_BYTES / KIB} KiB), e.g. {"approved": true, "by": "dana"}; the waiting tasks receive it.` },
      },
    },
  },
  {
    name: "heartbeat_lease",
    title: "Extend a lease",
    description:
      "Extends the lease of a task you are still working on: it stays yours for lease_seconds from now. Returns the new expires_at, " +
      "and cancel_requested: true when the task's author cancelled it (stop, and complete_task with what you have or release_task).",
    method: MessageService.method.heartbeatLease,
    schema: { required: ["lease_token"] },
  },
  {
    name: "report_progress",
    title: "Report progress on a task",
    description:
      "Tells whoever waits on a task you hold how it goes: data (an object, replacing the last; at most 16 KiB) and/or text " +
      "(replacing the last, or with append: true added to it; the last 64 KiB are kept). Needs the task's lease_token. " +
      "The poster sees it with wait_for_result (progress_after) and on the message's progress. Returns the message.",
    method: MessageService.method.reportProgress,
    schema: {
      required: ["message_id", "lease_token"],
      docs: {
        data: { description: `Structured progress, e.g. {"step": 3, "of": 8}: a JSON object, at most ${MAX_METADATA_BYTES / KIB} KiB, replacing the last.` },
        append: { description: "true: add text to what was reported before (a log, streamed output); false or absent: replace it." },
      },
    },
  },
  {
    name: "cancel_task",
    title: "Cancel a task",
    description:
      "Cancels a task you posted (or any task of a channel you own) that is no longer wanted. Not yet taken: cancelled at once, never handed out. " +
      "In a worker's hands: marked cancel_requested (the worker sees it when it heartbeats or completes) and cancelled when it lets go; " +
      "a result it still completes with is kept. Returns the message (state 'cancelled', or 'in_flight' with cancel_requested).",
    method: MessageService.method.cancelMessage,
    schema: { required: ["message_id"] },
  },
  {
    name: "create_schedule",
    title: "Post a message on a schedule",
    description:
      "Posts a message to a channel at each tick of a cron expression, as your key (a daily report, a nightly clean-up task). " +
      "Exactly one message per tick, however many service processes run; ticks missed while the service was down post once. Returns the schedule with next_run_at.",
    method: ScheduleService.method.createSchedule,
    schema: {
      required: ["channel", "cron", "message"],
      docs: {
        channel: { description: "The channel: its id, an alias, or the name of a channel you created. You must be able to post to it." },
        cron: { description: "Five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5' for 09:00 on weekdays) or six with seconds first ('*/30 * * * * *')." },
        timezone: { description: "An IANA time zone name the cron is read in, e.g. 'Europe/Berlin'; default 'UTC'." },
        message: { description: "What each tick posts: {content, metadata?, group_key?, priority? (1..5)}." },
        paused: { description: "true: created paused (no tick runs until update_schedule resumes it)." },
      },
    },
  },
  {
    name: "list_schedules",
    title: "List schedules",
    description: "Lists a channel's schedules (channel given; you must be able to use it) or, without one, the schedules your key created.",
    method: ScheduleService.method.listSchedules,
    schema: { docs: { channel: { description: "A channel id, alias or your channel's name; leave out for your own schedules." } } },
    readOnly: true,
  },
  {
    name: "update_schedule",
    title: "Change, pause or resume a schedule",
    description:
      "Changes a schedule you created (or one on a channel you own): update.paused true pauses it, false resumes it (the next tick is taken from now); " +
      "update.cron, update.timezone and update.message replace those. Only the fields given change.",
    method: ScheduleService.method.updateSchedule,
    schema: {
      fields: ["id", "update"],
      required: ["id", "update"],
      docs: {
        id: { description: "The schedule's id." },
        update: { description: "The fields to change: {cron?, timezone?, message?, paused?}." },
      },
    },
  },
  {
    name: "delete_schedule",
    title: "Delete a schedule",
    description: "Deletes a schedule you created (or one on a channel you own); messages it posted stay.",
    method: ScheduleService.method.deleteSchedule,
    schema: { required: ["id"], docs: { id: { description: "The schedule's id." } } },
  },
  {
    name: "wait_for_result",
    title: "Wait for a task's result",
    description:
      "Returns a message with its result once a worker completed it, waiting up to 'wait' seconds. " +
      "Use it after post_message to get the answer to your task: check message.result and message.state ('acknowledged' when done); " +
      "'dead_lettered', 'cancelled' or 'expired' means no result will come (it answers at once then); otherwise call again. " +
      "To follow a long task, pass progress_after = the message's progress.updated_at you last saw: it also answers at the worker's next progress report.",
    method: MessageService.method.getMessage,
    schema: {
      required: ["message_id"],
      docs: {
        wait: { ...FIELDS.wait!, description: "Seconds to wait for the result before answering (long-poll; the service caps it at its own limit, 25 by default). 0 or absent answers at once." },
        progress_after: { description: "The message's progress.updated_at as you last saw it: with wait, answer also at the next progress report." },
      },
    },
    readOnly: true,
    run: (args, ctx) => call(ctx, MessageService.method.getMessage, args, { waitSeconds: waitOf(args) }),
  },
  {
    name: "list_trace",
    title: "The messages of a trace",
    description:
      "Lists the messages of one trace you may read, oldest first, across channels: a hand-off chain. trace_id is the second field of a message's " +
      "trace.traceparent (00-<trace_id>-…). Returns {data: [messages]}.",
    method: MessageService.method.listTraceMessages,
    schema: { required: ["trace_id"], docs: { trace_id: { description: "32 hex digits: the trace id of a message's trace.traceparent." } } },
    readOnly: true,
  },
  {
    name: "channel_stats",
    title: "Queue state of a channel",
    description:
      "Counts a channel's messages by state (ready, delayed, in_flight, acknowledged, dead_lettered) with the oldest ready task's age, " +
      "ready work by priority (ready_by_priority) and, on a claimable channel, its message groups (groups: count, in_flight and the largest by ready work).",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"] },
    readOnly: true,
  },
  {
    name: "follow_channel",
    title: "Follow a channel",
    description:
      "Subscribes this session to a channel: you are notified (resources/updated) each time a message arrives, for the resource " +
      "agentbus://channels/{id}/messages, which reads the channel's messages. Returns that resource's URI.",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"] },
    async run(args, ctx) {
      return { uri: await ctx.follow(String(args.identifier ?? "")) };
    },
  },
  {
    name: "unfollow_channel",
    title: "Stop following a channel",
    description: "Ends a follow_channel subscription. Returns whether there was one.",
    method: MessageService.method.getChannelStats,
    schema: { required: ["identifier"] },
    async run(args, ctx) {
      return { unfollowed: ctx.unfollow(String(args.identifier ?? "")) };
    },
  },
  {
    name: "create_invitation",
    title: "Invite to a channel",
    description: "Creates an invitation to a restricted channel you own; give its id to another agent, who joins with resolve_invitation.",
    method: ChannelService.method.createInvitation,
    schema: { required: ["identifier"] },
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
    schema: { required: ["identifier"] },
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
      "Starts rendering HTML or Markdown to a PDF. Returns {job_id}; call get_job with it every second or two until its status is completed: " +
      `get_job then returns the PDF itself (an embedded application/pdf resource), or a link to download it when it is larger than ${sizeText(MAX_EMBEDDED_PDF_BYTES)}.`,
    method: JobService.method.createPdfJob,
    schema: { required: ["content"], docs: { content: "The document: an HTML page, or Markdown (set format to markdown)." } },
  },
  {
    name: "submit_job_posting_parse",
    title: "Parse a job posting",
    description: "Starts extracting structured fields (title, company, salary, …) from a job posting's URL or text. Returns {job_id}; poll get_job for the fields.",
    method: JobService.method.createJobPostingParseJob,
    schema: { docs: { url: "The posting's public web page (http or https); or send its text instead." } },
  },
  {
    name: "submit_transcript_job",
    title: "Transcribe a video",
    description: "Starts fetching a video's timestamped transcript (YouTube URL; optional language). Returns {job_id}; poll get_job for the transcript.",
    method: JobService.method.createTranscriptJob,
    schema: { required: ["url"], docs: { url: "The video's watch-page URL (…/watch?v=<id>) or short link (…/<id>)." } },
  },
  {
    name: "get_job",
    title: "Get a job",
    description:
      "Returns a job's status (queued, processing, completed, failed) and, once completed, its result (or, once failed, its error). Poll it every second or two. " +
      `A completed PDF job comes with the PDF: embedded (application/pdf, base64) up to ${sizeText(MAX_EMBEDDED_PDF_BYTES)}, else a link to download it; 'pdf' says which.`,
    method: JobService.method.getJob,
    schema: { required: ["job_id"] },
    readOnly: true,
    run: async (args, ctx) => withPdf(await call(ctx, JobService.method.getJob, args), ctx),
  },
];

export const toolInputSchema = (tool: ToolSpec): JsonObject => inputSchema(tool.method.input, tool.schema, FIELDS);
