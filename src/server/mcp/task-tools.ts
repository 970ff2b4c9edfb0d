/**
 * The long-running tools as MCP tasks (MCP 2025-11-25; docs/decisions.md#mcp):
 * called with `task`, such a tool answers at once with a task and works
 * until its work is done (not one long-poll), and the client polls
 * tasks/get and reads tasks/result, or cancels it. Called without, the same
 * tools answer as before.
 */
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../../model/json.js";
import { pause } from "./api.js";
import { withPdf, type ToolContext } from "./tools.js";

/** The work of a tool called as a task, until it is done or `ctx.signal` ends it (cancelled, expired, the session closed). */
export type TaskRunner = (args: JsonObject, ctx: ToolContext) => Promise<JsonObject>;

/** Each long-poll of a task's loop (the service caps it lower if it is configured so). */
const WAIT_SECONDS = 25;
const JOB_POLL_MS = 1_000;
const FINISHED_MESSAGE = new Set(["acknowledged", "dead_lettered", "cancelled", "expired"]);
const FINISHED_JOB = new Set(["completed", "failed"]);

const call = (ctx: ToolContext, method: Parameters<ToolContext["api"]["call"]>[0], args: JsonObject, waitSeconds = 0) =>
  ctx.api.call(method, args, { signal: ctx.signal, headers: ctx.traceHeaders, waitSeconds });

function aborted(ctx: ToolContext): never {
  throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error("the task was cancelled");
}

/** A job submitted, then followed until it completed or failed: the finished job, a PDF with its file. */
const jobTask =
  (submit: Parameters<ToolContext["api"]["call"]>[0]): TaskRunner =>
  async (args, ctx) => {
    const { job_id } = await call(ctx, submit, args);
    for (;;) {
      const job = await call(ctx, JobService.method.getJob, { job_id: job_id ?? "" });
      if (FINISHED_JOB.has(String(job.status))) return withPdf(job, ctx);
      await pause(JOB_POLL_MS, ctx.signal);
      if (ctx.signal.aborted) aborted(ctx);
    }
  };

export const TASK_RUNNERS: Readonly<Record<string, TaskRunner>> = {
  /** The message once it is finished, however long that takes. */
  wait_for_result: async (args, ctx) => {
    for (;;) {
      const message = await call(ctx, MessageService.method.getMessage, { message_id: args.message_id ?? "", wait: WAIT_SECONDS }, WAIT_SECONDS);
      if (FINISHED_MESSAGE.has(String(message.state))) return message;
      if (ctx.signal.aborted) aborted(ctx);
    }
  },
  /** The next task(s), however long until one comes. */
  receive_task: async (args, ctx) => {
    // Tasks named in `complete` are completed by the first call only; the answer reports them.
    let request: JsonObject = { ...args, wait: WAIT_SECONDS };
    let completed: JsonObject["completed"] = [];
    for (;;) {
      const received = await call(ctx, MessageService.method.receiveMessages, request, WAIT_SECONDS);
      if (request.complete !== undefined) completed = received.completed ?? [];
      const { complete: _done, ...next } = request;
      request = next;
      if (Array.isArray(received.data) && received.data.length > 0) return { ...received, completed };
      if (ctx.signal.aborted) aborted(ctx);
      // The waiter slots of the key are full: the service answered at once.
      await pause(1_000, ctx.signal);
    }
  },
  submit_pdf_job: jobTask(JobService.method.createPdfJob),
  submit_job_posting_parse: jobTask(JobService.method.createJobPostingParseJob),
  submit_transcript_job: jobTask(JobService.method.createTranscriptJob),
};
