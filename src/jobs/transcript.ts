/**
 * Fetches a transcript job's captions (docs/decisions.md#transcript-jobs) with this process's
 * fetcher (src/transcripts/). Timeouts and 5xx from the video host go back
 * to the runner for another attempt; no captions, no such language and
 * blocks fail the job at once.
 */
import type { TranscriptInput } from "../transcripts/index.js";
import { JobFailure } from "../model/job-failure.js";
import { asyncJobKind } from "./async-job.js";

/** Requests to the video host wait on the network: several at once per worker. */
const CONCURRENCY = 4;

export const transcriptJob = asyncJobKind({
  kind: "transcript",
  concurrency: CONCURRENCY,
  async process(input: TranscriptInput, { signal }, { transcripts }) {
    if (!transcripts) throw new JobFailure("video_host_unavailable", "This worker has no transcript fetcher", true);
    const t = await transcripts.fetch(input, signal);
    return { result: { videoId: t.video_id, language: t.language, fullText: t.full_text, segments: t.segments } };
  },
});
