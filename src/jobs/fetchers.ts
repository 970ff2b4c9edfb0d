/**
 * The outbound tools of the job_posting and transcript kinds, as configured:
 * the job-posting parser (only with OPENAI_API_KEY) and the transcript
 * fetcher, each over its own guarded outbound client. One set per worker
 * process; close() drops their idle connections.
 */
import type { Config } from "../config.js";
import { jobPostingParserFromConfig } from "../parsing/index.js";
import { transcriptFetcherFromConfig } from "../transcripts/index.js";
import type { JobDependencies } from "./types.js";

export interface Fetchers {
  deps: Pick<JobDependencies, "jobPostingParser" | "transcripts">;
  close(): Promise<void>;
}

export function openFetchers(config: Config): Fetchers {
  const jobPostingParser = jobPostingParserFromConfig(config);
  const transcripts = transcriptFetcherFromConfig(config);
  return {
    deps: { ...(jobPostingParser ? { jobPostingParser } : {}), transcripts },
    async close() {
      jobPostingParser?.close();
      transcripts.close();
    },
  };
}
