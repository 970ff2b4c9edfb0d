/**
 * JobService handlers (docs/decisions.md#job-record, #pdf-jobs, #jobs-private):
 * the job record and the PDF download, shared by every kind, and the PDF
 * submission. The other kinds' submissions plug in beside it in jobService()
 * (one handler set per kind, each validating its request and calling
 * AsyncJobs.submit).
 */
import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { JobKind, JobStatus, type JobSchema } from "../../gen/agentbus/v1/job_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import type { Config } from "../platform/config.js";
import { ApiError } from "../model/errors.js";
import type { AsyncJobs } from "../domain/jobs.js";
import { toProtoTimestamp } from "../model/time.js";
import { RESULT_SCHEMAS } from "../protocol/job-results.js";
import { validatePdfRequest } from "../pdf/input.js";
import { chromiumInstalled } from "../pdf/chromium.js";
import { traceOf, callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import type { JobKindName, JobRecord, JobStatusName } from "../model/jobs.js";
import type { JobHandlers } from "./handlers.js";
import { jobPostingJobHandlers } from "./job-posting-handlers.js";
import { transcriptJobHandlers } from "./transcript-handlers.js";

const KINDS: Record<JobKindName, JobKind> = { pdf: JobKind.PDF, job_posting: JobKind.JOB_POSTING, transcript: JobKind.TRANSCRIPT };
const STATUSES: Record<JobStatusName, JobStatus> = {
  queued: JobStatus.QUEUED,
  processing: JobStatus.PROCESSING,
  completed: JobStatus.COMPLETED,
  failed: JobStatus.FAILED,
};

/** The `result` oneof of a job: the stored result message under the kind's case. */
function renderResult(job: JobRecord): MessageInitShape<typeof JobSchema>["result"] {
  if (job.result === null) return { case: undefined };
  // Stored by this service from the same messages; unknown fields would only come from a newer version.
  const options = { ignoreUnknownFields: true };
  switch (job.kind) {
    case "pdf":
      return { case: "pdf", value: fromJson(RESULT_SCHEMAS.pdf, job.result, options) };
    case "job_posting":
      return { case: "jobPosting", value: fromJson(RESULT_SCHEMAS.job_posting, job.result, options) };
    case "transcript":
      return { case: "transcript", value: fromJson(RESULT_SCHEMAS.transcript, job.result, options) };
  }
}

/** The Job (docs/decisions.md#job-record): every field present, `result` and `error` null until set. */
export function renderJob(job: JobRecord): MessageInitShape<typeof JobSchema> {
  return {
    jobId: BigInt(job.id),
    kind: KINDS[job.kind],
    status: STATUSES[job.status],
    result: renderResult(job),
    error: job.error ?? undefined,
    createdAt: toProtoTimestamp(job.createdAt),
    updatedAt: toProtoTimestamp(job.updatedAt),
    completedAt: job.completedAt === null ? undefined : toProtoTimestamp(job.completedAt),
    expiresAt: job.expiresAt === null ? undefined : toProtoTimestamp(job.expiresAt),
    trace: job.trace === null ? undefined : { traceparent: job.trace.traceparent, tracestate: job.trace.tracestate ?? undefined },
  };
}

/** GET /jobs/{job_id} and the PDF download: what every kind shares. */
export function jobHandlers(jobs: AsyncJobs): JobHandlers {
  return {
    async getJob(request, ctx) {
      return renderJob(await jobs.get(callerOf(ctx), request.jobId));
    },

    async downloadPdf(request, ctx) {
      const pdf = await jobs.pdf(callerOf(ctx), request.jobId);
      ctx.responseHeader.set("Content-Disposition", `inline; filename="job-${request.jobId}.pdf"`);
      // The caller's own document: no shared cache may keep it.
      ctx.responseHeader.set("Cache-Control", "private, no-store");
      return { contentType: "application/pdf", data: pdf };
    },
  };
}

/**
 * Whether PDF jobs can be rendered: this process's renderer is not down, or,
 * in a process without one, the configured Chromium is there.
 */
export type PdfAvailability = () => Promise<boolean>;

/** POST /v1/pdf/generate. */
export function pdfJobHandlers(jobs: AsyncJobs, options: { pdfAvailable: PdfAvailability }): JobHandlers {
  return {
    async createPdfJob(request, ctx) {
      const input = validatePdfRequest(request);
      // Checked after the input (bad input is never answered with a 5xx: docs/decisions.md#no-5xx-for-input).
      if (!(await options.pdfAvailable())) {
        throw new ApiError("pdf_renderer_unavailable");
      }
      const jobId = await jobs.submit(callerOf(ctx), "pdf", { ...input }, traceOf(ctx));
      return { jobId: BigInt(jobId) };
    },
  };
}

export function jobService(jobs: AsyncJobs, deps: { config: Config; pdfAvailable?: PdfAvailability | undefined }): ServiceEntry {
  return serviceEntry(JobService, {
    ...jobHandlers(jobs),
    ...pdfJobHandlers(jobs, { pdfAvailable: deps.pdfAvailable ?? (() => chromiumInstalled(deps.config.chromiumPath)) }),
    ...jobPostingJobHandlers(jobs, { llmConfigured: deps.config.openaiApiKey !== undefined }),
    ...transcriptJobHandlers(jobs, { videoBaseUrl: deps.config.videoBaseUrl }),
  });
}
