/** POST /v1/video/transcript and /v1/youtube/transcript (docs/decisions.md#transcript-jobs): the video id and language checked, then queued. */
import type { AsyncJobs } from "../domain/jobs.js";
import { traceOf, callerOf } from "../protocol/context.js";
import { validateTranscriptRequest } from "../transcripts/input.js";
import type { JobHandlers } from "./handlers.js";

export function transcriptJobHandlers(jobs: AsyncJobs, options: { videoBaseUrl: string }): JobHandlers {
  return {
    async createTranscriptJob(request, ctx) {
      const input = validateTranscriptRequest(request, options);
      const jobId = await jobs.submit(callerOf(ctx), "transcript", { ...input }, traceOf(ctx));
      return { jobId: BigInt(jobId) };
    },
  };
}
