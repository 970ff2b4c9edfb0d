/**
 * The outbound tools of the job_posting and transcript kinds, as configured:
 * the job-posting parser (only with OPENAI_API_KEY) and the transcript
 * fetcher, each over its own guarded outbound client. One set per worker
 * process; close() drops their idle connections.
 *
 * Their modules (src/parsing/, src/transcripts/) load openai, linkedom and
 * Readability, about a second of start-up together, so each is loaded with
 * the first job of its kind. Whether there is a parser at all is still
 * decided here, from the configuration, as before.
 */
import type { Config } from "../platform/config.js";
import type { JobPostingParser } from "../parsing/index.js";
import type { TranscriptFetcher } from "../transcripts/index.js";
import type { JobDependencies } from "./types.js";

export interface Fetchers {
  deps: Pick<JobDependencies, "jobPostingParser" | "transcripts">;
  close(): Promise<void>;
}

export function openFetchers(config: Config): Fetchers {
  const parser =
    config.openaiApiKey === undefined
      ? undefined
      : lazily(async () => {
          const { jobPostingParserFromConfig } = await import("../parsing/index.js");
          const loaded = jobPostingParserFromConfig(config);
          if (!loaded) throw new Error("OPENAI_API_KEY is set but no job-posting parser was configured");
          return loaded;
        });
  const fetcher = lazily(async () => (await import("../transcripts/index.js")).transcriptFetcherFromConfig(config));
  const jobPostingParser: JobPostingParser | undefined = parser && {
    parse: async (input, signal) => (await parser.get()).parse(input, signal),
    close: () => void parser.close(),
  };
  const transcripts: TranscriptFetcher = {
    fetch: async (input, signal) => (await fetcher.get()).fetch(input, signal),
    close: () => void fetcher.close(),
  };
  return {
    deps: { ...(jobPostingParser ? { jobPostingParser } : {}), transcripts },
    async close() {
      await Promise.all([parser?.close(), fetcher.close()]);
    },
  };
}

/** Loads a tool on first use; close() closes it if it was ever loaded (waiting for a load under way). */
function lazily<T extends { close(): void }>(load: () => Promise<T>): { get(): Promise<T>; close(): Promise<void> } {
  let loading: Promise<T> | undefined;
  return {
    get: () => (loading ??= load()),
    close: async () => {
      const tool = await loading?.catch(() => undefined);
      tool?.close();
    },
  };
}
