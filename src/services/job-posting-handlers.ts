/** POST /v1/jobs/parse (docs/decisions.md#parse-jobs): validated (422s, then 503 llm_not_configured), then queued. */
import type { AsyncJobs } from "../domain/jobs.js";
import { validateParseRequest } from "../parsing/input.js";
import { traceOf, callerOf } from "../protocol/context.js";
import type { JobHandlers } from "./handlers.js";

export function jobPostingJobHandlers(jobs: AsyncJobs, options: { llmConfigured: boolean }): JobHandlers {
  return {
    async createJobPostingParseJob(request, ctx) {
      const input = validateParseRequest(request, options);
      const jobId = await jobs.submit(callerOf(ctx), "job_posting", { ...input }, traceOf(ctx));
      return { jobId: BigInt(jobId) };
    },
  };
}
